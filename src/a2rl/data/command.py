"""``a2rl data``: the tasks' official data.

    a2rl data status [--json] [OVERRIDES...]
        per dataset: installed, partial or missing, where, version, licence; per task id (as
        `a2rl tasks` composes it, e.g. grid=paper): its data status, the dataset to fetch, and
        which ids are offline variants that need none
    a2rl data fetch NAME... [--mirror URL] [--from DIR] [--accept-unpinned] [OVERRIDES...]
        NAME: a dataset or a task id that reads one. From the official URLs (or a mirror
        holding the files under their paths, also $A2RL_DATA_MIRROR), or from a folder
    a2rl data export DIR [NAME...] [OVERRIDES...]
        copy installed datasets (all by default) into DIR, for `--from DIR` elsewhere

Files go under ``paths.data`` ($A2RL_DATA, else ./data), where the task configs read them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .install import Options, data_problems, dataset_row, export, fetch
from .manifest import DataError, load_manifests


def data_root(overrides: list[str]) -> Path:
    """``paths.data`` of the composed config, relative to ``paths.root``."""
    from a2rl.config.compose import compose

    cfg = compose(overrides)
    return Path(cfg.paths.root) / cfg.paths.data


def task_rows(overrides: list[str]) -> list[dict[str, Any]]:
    """`a2rl tasks`' rows, each with the dataset to fetch when its data is missing, and the
    offline variants named."""
    from a2rl.config.compose import compose, composing
    from a2rl.task.base import load_task
    from a2rl.task.listing import task_rows as listed

    manifests = load_manifests()
    rows = listed(overrides)
    with composing():
        for row in rows:
            if row["task"] in manifests.variants:
                row["kind"] = "offline variant"
                row["note"] = manifests.variants[row["task"]]
            elif "problem" in row:
                continue
            cfg = compose([*overrides, f"task={row['task']}"])
            task = load_task(cfg.task, Path(cfg.paths.root) / cfg.paths.data)
            row["fetch"] = data_problems(task, manifests)
            row.setdefault("kind", "official")
    return rows


def status(overrides: list[str], as_json: bool) -> int:
    manifests = load_manifests()
    root = data_root(overrides)
    datasets = [dataset_row(d, root) for d in manifests.datasets.values()]
    tasks = task_rows(overrides)
    if as_json:
        print(json.dumps({"data": str(root), "datasets": datasets, "tasks": tasks}, indent=1))
        return 0
    from tabulate import tabulate

    print(f"paths.data: {root}\n")
    print(tabulate([[d["dataset"], d["state"], d["version"], d["licence"],
                     ", ".join(d["missing"] + [f"unpinned: {p}" for p in d["unpinned"]])]
                    for d in datasets],
                   headers=["dataset", "state", "version", "licence", "missing / unpinned"]))
    print()
    print(tabulate([[t["task"], t.get("kind", "?"), t["data"],
                     "; ".join(t.get("fetch") or []) or t.get("note", "")] for t in tasks],
                   headers=["task", "kind", "data", "to do / variant of"]))
    return 0


def split_overrides(args: list[str]) -> tuple[list[str], list[str]]:
    """(Hydra overrides, this command's arguments): an override is KEY=VALUE anywhere except as
    the value of --mirror or --from (a URL may hold "=")."""
    overrides, own = [], []
    for i, arg in enumerate(args):
        after_option = i > 0 and args[i - 1] in ("--mirror", "--from")
        is_override = "=" in arg and not arg.startswith("-") and not after_option
        (overrides if is_override else own).append(arg)
    return overrides, own


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="a2rl data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("status")
    st.add_argument("--json", action="store_true")
    fe = sub.add_parser("fetch")
    fe.add_argument("names", nargs="+", metavar="NAME")
    fe.add_argument("--mirror", help="base URL holding the files under their paths")
    fe.add_argument("--from", dest="source", type=Path, help="install from this folder")
    fe.add_argument("--accept-unpinned", action="store_true",
                    help="install files the manifest has no checksum for (recording theirs)")
    ex = sub.add_parser("export")
    ex.add_argument("out", type=Path)
    ex.add_argument("names", nargs="*", metavar="NAME")
    overrides, own = split_overrides(args)
    parsed = parser.parse_args(own)
    try:
        if parsed.command == "status":
            return status(overrides, parsed.json)
        manifests = load_manifests()
        root = data_root(overrides)
        if parsed.command == "fetch":
            options = Options(parsed.mirror, parsed.source, parsed.accept_unpinned)
            for dataset in dict.fromkeys(manifests.find(n) for n in parsed.names):
                record = fetch(dataset, root, options)
                paths = sorted(f.get("path", p) for p, f in record["files"].items())
                print(f"{dataset.name}: installed under {root} ({', '.join(paths)})")
                for line in record["missing"]:
                    print(f"{dataset.name}: partial, {line}", file=sys.stderr)
            return 0
        absent = ("missing", "no files to fetch")
        names = parsed.names or [d.name for d in manifests.datasets.values()
                                 if dataset_row(d, root)["state"] not in absent]
        for dataset in dict.fromkeys(manifests.find(n) for n in names):
            if dataset.files:
                written = export(dataset, root, parsed.out)
                print(f"{dataset.name}: {', '.join(written)} -> {parsed.out}")
        return 0
    except DataError as err:
        print(f"a2rl data: {err}", file=sys.stderr)
        return 1
