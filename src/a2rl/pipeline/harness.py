"""What the pipeline lends a task for grading (``a2rl.task.base.Harness``): model folders and
their hashes (``a2rl.models``) and recording LLM proxies for paid judges (``a2rl.llm``). It
lives here, above the task layer, so that tasks import neither package."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from a2rl.common.layout import Layout
from a2rl.config.types import DriverConfig, ModelConfig, RunConfig
from a2rl.llm.drivers import KEYED_PROVIDERS
from a2rl.llm.proxy import LLMProxy, ProxySettings
from a2rl.models.hf_folder import content_hash
from a2rl.models.provision import prepare_base_model
from a2rl.task.base import GradingUnavailable, Task, load_task


class PipelineHarness:
    def __init__(self, layout: Layout):
        self.layout = layout

    def model_folder(self, model: ModelConfig) -> Path:
        return prepare_base_model(model, self.layout.model(model.name))

    def folder_hash(self, folder: Path) -> str:
        return content_hash(folder)

    def driver(self, name: str) -> DriverConfig:
        from a2rl.config.compose import compose

        return compose([f"driver={name}"]).driver

    def recording_proxy(self, driver: DriverConfig, calls_log: Path, max_usd: float | None,
                        timeout_s: float) -> LLMProxy:
        key = os.environ.get(driver.api_key_env) if driver.api_key_env else None
        if not key and driver.provider in KEYED_PROVIDERS:
            raise GradingUnavailable(f"driver {driver.name!r} (a judge) needs its key in "
                                     f"${driver.api_key_env}")
        rates = driver.prices.rates()
        settings = ProxySettings(
            provider=driver.provider, model=driver.model or driver.name,
            base_url=driver.base_url or "", api_key=key,
            openai_base_url=driver.openai_base_url,
            price_in_per_mtok=rates.input, price_out_per_mtok=rates.output,
            price_cached_in_per_mtok=rates.cached_input, max_usd=max_usd,
            timeout_s=timeout_s)
        return LLMProxy(settings, calls_log, "a2rl-judge-" + secrets.token_urlsafe(16)).start()


def load_task_of(cfg: RunConfig) -> Task:
    """The cell's task, lent the pipeline's harness; the stages and the grader's process
    (a2rl.pipeline.grader_process) load it so."""
    task = load_task(cfg.task, Path(cfg.paths.root) / cfg.paths.data)
    task.harness = PipelineHarness(Layout.from_paths(cfg.paths))
    return task
