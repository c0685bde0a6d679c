"""WebShop (L3, interactive shopping): WebShop's text environment, search and reward, on the
offline procedural catalog (the default, ``conf/task/webshop.yaml``) or on WebShop's own data
files by path."""

from __future__ import annotations

from pathlib import Path

from a2rl.task import TaskConfig

from .params import WebShopParams
from .task import WebShopTask

__all__ = ["WebShopParams", "WebShopTask", "build"]


def build(cfg: TaskConfig, data_root: Path) -> WebShopTask:
    return WebShopTask(cfg, Path(data_root))
