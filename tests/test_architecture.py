"""The package order is the architecture: read every import (also those inside functions) with
``ast`` and check that no package imports a higher one and that modules form no cycle. Each
package has a face (its ``__init__``: a docstring saying what it owns, ``__all__`` naming what
others may use); code outside ``src/`` (task plugins, the workflow, studies, benchmarks) imports
faces only, task plugins ``a2rl.task`` only; the README's package map names every module; and
no module of the package or of a task is longer than MAX_MODULE_LINES."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from checkout import REPO

SRC = REPO / "src" / "a2rl"
TASKS = REPO / "tasks"

# Low to high. A package may import its own modules and those of lower ranks; packages of the same
# rank are independent of each other.
RANK = {"common": 0, "config": 1, "isolation": 2, "llm": 2, "models": 2, "task": 3, "grading": 4,
        "data": 4,
        "analysis": 5, "report": 6, "pipeline": 7}
# What a task package (tasks/<name>/) may use of a2rl: the task interface, which re-exports what
# a task needs of common, config and isolation.
TASK_MAY_USE = {"task"}
# Code outside src/ that uses a2rl, and how its imports are read (.smk files are Python with
# Snakemake's rules, so only their import statements are parsed).
OUTSIDE = ("workflow", "experiments", "benchmarks", "Snakefile")


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
        elif isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] \
                == ["_FACE"] and isinstance(node.value, ast.Dict):
            # a lazy face (name -> module of the package, imported on first use)
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                found.update({f"{package}.{value.value}", f"{package}.{value.value}.{key.value}"})
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


# Past this a module holds more than one concern: it is split by concern (as a2rl.task.envs,
# 596 lines, gave its prompts to a2rl.task.prompts), not given an exception here.
MAX_MODULE_LINES = 500


def test_no_module_is_longer_than_the_limit():
    long = [f"{p.relative_to(REPO)}: {n} lines" for p in [*SRC.rglob("*.py"), *TASKS.rglob("*.py")]
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(long)


@pytest.mark.parametrize("task", sorted(p.name for p in TASKS.iterdir()
                                        if (p / "__init__.py").is_file()))
def test_tasks_use_only_the_task_interface_and_shared_helpers(task):
    wrong = []
    for path in (TASKS / task).rglob("*.py"):
        for target in imports_of(path, f"a2rl_tasks.{task}.{path.stem}"):
            if package_of(target) not in TASK_MAY_USE:
                wrong.append(f"{path.relative_to(TASKS)} -> {target}")
    assert not wrong, "\n".join(wrong)


def face(package: str) -> set[str]:
    return set(importlib.import_module(f"a2rl.{package}").__all__)


@pytest.mark.parametrize("package", sorted(RANK))
def test_every_package_has_a_face(package):
    """A docstring that says what the package owns, and ``__all__``: names that resolve, none of
    them hiding a module of the package under the same name."""
    module = importlib.import_module(f"a2rl.{package}")
    assert (module.__doc__ or "").strip(), f"a2rl/{package}/__init__.py has no docstring"
    names = getattr(module, "__all__", None)
    assert names, f"a2rl/{package}/__init__.py declares no __all__"
    assert len(names) == len(set(names)), f"a2rl.{package}.__all__ repeats a name"
    missing = [n for n in names if not hasattr(module, n)]
    assert not missing, f"a2rl.{package}.__all__ names what it does not define: {missing}"
    # a module's namesake may stand for it (config.compose.compose); another object may not
    shadowed = [n for n in names if (SRC / package / f"{n}.py").exists()
                and f"a2rl.{package}.{n}" not in (getattr(getattr(module, n), "__name__", None),
                                                   getattr(getattr(module, n), "__module__", None))]
    assert not shadowed, f"a2rl.{package} hides its modules {shadowed} behind other objects"


def python_of(path: Path) -> str:
    """The Python of ``path`` that ``ast`` can read: a .py file whole, a Snakemake file's or a
    template's a2rl import statements only (dedented)."""
    text = path.read_text()
    if path.suffix == ".py":
        return text
    statement = re.compile(
        r"^[ \t]*(?:from\s+a2rl\S*\s+import\s+(?:\([^)]*\)|.*)|import\s+a2rl.*)$", re.M)
    return "\n".join(m.group(0).strip() for m in statement.finditer(text))


# the one place past a face, and why: benchmarks/core.py times the grader's copy and
# materialize steps by wrapping them where the grader looks them up, so it needs the modules
REACHES_IN = {("benchmarks/core.py", "a2rl.grading.artifacts"),
              ("benchmarks/core.py", "a2rl.grading.grader")}


def faceless_imports(path: Path, allowed: set[str]) -> list[str]:
    """The a2rl imports of ``path`` that go past a package's face: ``import a2rl.x.y``, ``from
    a2rl.x.y import z``, or a name the face of an ``allowed`` package does not declare."""
    wrong = []
    for node in ast.walk(ast.parse(python_of(path))):
        if isinstance(node, ast.Import):
            wrong += [a.name for a in node.names if a.name.startswith("a2rl.")]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and node.module.startswith("a2rl."):
            package = package_of(node.module)
            if package == "agents" and package in allowed:
                continue  # standalone scripts, no face: a study may import one (its settings)
            if node.module != f"a2rl.{package}" or package not in allowed:
                wrong.append(node.module)
            else:
                wrong += [f"{node.module}.{a.name}" for a in node.names
                          if a.name not in face(package)]
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return [f"{where}: {w}" for w in wrong if (str(where), w) not in REACHES_IN]


def outside_files(root: str) -> list[Path]:
    top = REPO / root
    if top.is_file():
        return [top]
    return sorted(p for p in top.rglob("*") if p.suffix in (".py", ".smk"))


@pytest.mark.parametrize("task", sorted(p.name for p in TASKS.iterdir()
                                        if (p / "__init__.py").is_file()))
def test_tasks_import_the_task_face_only(task):
    wrong = [w for p in (TASKS / task).rglob("*.py") for w in faceless_imports(p, TASK_MAY_USE)]
    assert not wrong, "a task imports a2rl only through a2rl.task:\n" + "\n".join(wrong)


def test_the_task_scaffold_imports_the_task_face_only():
    """What ``a2rl new task`` writes is a task plugin too (its .py.j2 files' import lines)."""
    templates = sorted((SRC / "templates" / "new_task").rglob("*.py.j2"))
    assert templates
    wrong = [w for p in templates for w in faceless_imports(p, TASK_MAY_USE)]
    assert not wrong, "a scaffolded task imports a2rl only through a2rl.task:\n" + "\n".join(wrong)


@pytest.mark.parametrize("root", OUTSIDE)
def test_code_outside_src_imports_package_faces_only(root):
    """The workflow, studies and benchmarks use what a package's ``__init__`` declares; the
    workflow never the command line's module (a2rl.pipeline.cli)."""
    if not (REPO / root).exists():
        pytest.skip(f"no {root} in this checkout")
    wrong = [w for p in outside_files(root) for w in faceless_imports(p, {*RANK, "agents"})]
    assert not wrong, "imports past a package's face:\n" + "\n".join(wrong)


def test_the_face_check_sees_deep_and_undeclared_imports(tmp_path):
    """The check above must catch what it is for, or it passes vacuously."""
    source = tmp_path / "job.smk"
    source.write_text("rule x:\n    input: 'a'\n"
                      "from a2rl.pipeline.cli import run_stages\n"
                      "from a2rl.task import (\n    Task,\n    no_such_name,\n)\n"
                      "import a2rl.task.envs\n")
    wrong = [w.split(": ")[1] for w in faceless_imports(source, set(RANK))]
    assert wrong == ["a2rl.pipeline.cli", "a2rl.task.no_such_name", "a2rl.task.envs"]


def test_grading_and_tasks_receive_composed_config():
    """Neither grading nor a task plugin runs Hydra: the pipeline composes, and lends a judge
    its driver's config through the harness (a2rl.task.base.Harness.driver)."""
    composing = []
    for path in sorted([*(SRC / "grading").rglob("*.py"), *TASKS.rglob("*.py")]):
        if "a2rl.config.compose" in imports_of(path, "a2rl.grading.x"):
            composing.append(str(path.relative_to(REPO)))
    assert not composing, f"composes config itself: {composing}"


def readme_map() -> dict[str, str]:
    """The README's package map: each package's entry (its lines until the next package)."""
    text = (REPO / "README.md").read_text().split("## The packages", 1)[1].split("```")[1]
    entries: dict[str, str] = {}
    package = None
    for line in text.splitlines():
        head = re.match(r"^(\w+)/\s", line)
        if head:
            package = head.group(1)
        if package:
            entries[package] = entries.get(package, "") + line + "\n"
    return entries


def test_the_readme_map_names_every_module():
    entries = readme_map()
    missing = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if len(parts) == 1:  # a2rl/__init__.py
            continue
        name = parts[-2] if parts[-1] == "__init__" else parts[-1]
        if name == parts[0]:  # the package itself
            continue
        if not re.search(rf"\b{re.escape(name)}\b", entries.get(parts[0], "")):
            missing.append("/".join(parts))
    assert not missing, "README.md's package map does not name:\n" + "\n".join(missing)


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
    face = package / "__init__.py"
    face.write_text('_FACE = {"build_report": "html"}\n')
    assert "a2rl.grading.html.build_report" in imports_of(face, "a2rl.grading")
