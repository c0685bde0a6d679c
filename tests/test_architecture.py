"""The package order is the architecture: read every import (also those inside functions) with
``ast`` and check that no package imports a higher one and that modules form no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from checkout import REPO

SRC = REPO / "src" / "a2rl"
TASKS = REPO / "tasks"

# Low to high. A package may import its own modules and those of lower ranks; packages of the same
# rank are independent of each other.
RANK = {"common": 0, "config": 1, "isolation": 2, "llm": 2, "models": 2, "task": 3, "grading": 4,
        "analysis": 5, "report": 6, "pipeline": 7}
# What a task package (tasks/<name>/) may use of a2rl: the task interface and shared helpers.
TASK_MAY_USE = {"task", "common", "config", "isolation"}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, name: str) -> set[str]:
    """Every a2rl module ``path`` imports, resolved to dotted names."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m == "a2rl" or m.startswith("a2rl.")}


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def source_modules() -> dict[str, Path]:
    return {module_name(p): p for p in SRC.rglob("*.py")}


def test_every_module_belongs_to_a_ranked_package_or_the_agents():
    loose = [m for m in source_modules() if package_of(m) not in (*RANK, "agents", None)]
    assert not loose, f"modules outside the package order: {loose}"


def test_no_package_imports_a_higher_or_sibling_package():
    modules = source_modules()
    wrong = []
    for name, path in modules.items():
        here = package_of(name)
        for target in imports_of(path, name):
            there = package_of(target)
            if there is None or there == here or here is None:
                continue
            if here == "agents" or there == "agents" and here != "pipeline":
                wrong.append(f"{name} -> {target}")  # agents run alone in the sandbox
            elif there in RANK and here in RANK and RANK[there] >= RANK[here]:
                wrong.append(f"{name} -> {target}")
    assert not wrong, "imports against the package order:\n" + "\n".join(sorted(wrong))


@pytest.mark.parametrize("task", sorted(p.name for p in TASKS.iterdir()
                                        if (p / "__init__.py").is_file()))
def test_tasks_use_only_the_task_interface_and_shared_helpers(task):
    wrong = []
    for path in (TASKS / task).rglob("*.py"):
        for target in imports_of(path, f"a2rl_tasks.{task}.{path.stem}"):
            if package_of(target) not in TASK_MAY_USE:
                wrong.append(f"{path.relative_to(TASKS)} -> {target}")
    assert not wrong, "\n".join(wrong)


def test_modules_form_no_import_cycle():
    modules = source_modules()
    graph = {name: {t for t in imports_of(path, name) if t in modules and t != name}
             for name, path in modules.items()}
    for name in graph:  # a package's __init__ is not a dependency of its own modules
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_the_checker_reads_relative_and_lazy_imports(tmp_path):
    """The reader must see imports inside functions and relative ones, or the checks above pass
    vacuously."""
    package = tmp_path / "a2rl" / "grading"
    package.mkdir(parents=True)
    source = package / "thing.py"
    source.write_text("def f():\n    from a2rl.pipeline import stages\n"
                      "from ..report import html\n")
    found = imports_of(source, "a2rl.grading.thing")
    assert {"a2rl.pipeline.stages", "a2rl.report.html"} <= found
