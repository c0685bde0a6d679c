"""``a2rl tasks``: every task id the installed task plugins provide (a2rl.common.plugins), with its
package, level, metric and whether ``prepare`` has the data it reads. A plugin that cannot be
used is listed with its package and its problem; the other tasks list as usual.

    a2rl tasks [--json] [OVERRIDES...]      (OVERRIDES as for `a2rl run`, e.g. paths.data=...)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from a2rl.common.plugins import Plugin, PluginError, plugins


def task_rows(overrides: list[str]) -> list[dict[str, Any]]:
    """One row per task id, plus one per plugin that cannot be used."""
    from a2rl.config.compose import composing

    rows: list[dict[str, Any]] = []
    with composing():
        for plugin in plugins("tasks").values():
            try:
                rows.extend(plugin_rows(plugin, overrides))
            except PluginError as err:
                rows.append(broken_row(plugin, str(err)))
    return rows


def plugin_rows(plugin: Plugin, overrides: list[str]) -> list[dict[str, Any]]:
    """The rows of one plugin's task ids (``conf/task/<id>.yaml`` in its package)."""
    if plugin.error:
        raise PluginError(plugin.describe(plugin.error))
    plugin.load()  # an import error is the plugin's, reported once
    ids = sorted(p.stem for p in (plugin.folder() / "conf" / "task").glob("*.yaml"))
    if not ids:
        raise PluginError(plugin.describe("its package has no conf/task/<id>.yaml"))
    return [task_row(plugin, task_id, overrides) for task_id in ids]


def task_row(plugin: Plugin, task_id: str, overrides: list[str]) -> dict[str, Any]:
    from a2rl.config.checks import ConfigError
    from a2rl.config.compose import compose
    from a2rl.task.base import load_task

    row = {"task": task_id, "package": plugin.package, "implementation": plugin.name}
    try:
        cfg = compose([*overrides, f"task={task_id}"])
        task = load_task(cfg.task, Path(cfg.paths.data))
    except (ConfigError, PluginError, RuntimeError, ValueError) as err:
        return row | {"level": "?", "metric": "?", "data": "?", "problem": str(err)}
    return row | {"level": cfg.task.level, "metric": task.metric, "data": task.data_status()}


def broken_row(plugin: Plugin, problem: str) -> dict[str, Any]:
    return {"task": plugin.name, "package": plugin.package, "implementation": plugin.value,
            "level": "?", "metric": "?", "data": "?", "problem": problem}


def main(args: list[str]) -> int:
    """Print the table (or JSON with --json); exit 1 when a plugin is broken."""
    as_json = "--json" in args
    rows = task_rows([a for a in args if a != "--json"])
    if as_json:
        print(json.dumps(rows, indent=1))
    else:
        from tabulate import tabulate

        columns = ["task", "level", "metric", "data", "package"]
        print(tabulate([[r[c] for c in columns] for r in rows if "problem" not in r],
                       headers=columns))
        for r in (r for r in rows if "problem" in r):
            print(f"\nbroken: {r['task']} ({r['package']}): {r['problem']}")
    return 1 if any("problem" in r for r in rows) else 0
