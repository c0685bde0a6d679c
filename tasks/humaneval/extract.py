"""Turn a model's reply into the code appended to a HumanEval prompt.

A HumanEval program is ``prompt + completion``: the prompt ends with the function's signature and
docstring, and the completion is either the function's body (a base model continuing the text)
or, from chat models, a whole new definition of the function, which then replaces the stub.

Rules, in order:

1. Code fences: when the reply has ```` ``` ```` fences, the code is the first fenced block that
   defines the entry point, else the first block (an unterminated fence, from a reply cut off by
   the token limit, runs to the end of the text).
2. Without fences, the code is the reply itself; when it defines the entry point at the start of a
   line, prose before the definition (other than imports and decorators right above it) and
   after it (the first line back at column 0 that is not code) is dropped.
3. Definition (the code defines ``def <entry_point>(`` at column 0): the top-level imports,
   functions, classes and assignments are kept, everything else at top level (example calls,
   prints, asserts, ``if __name__ == "__main__":`` blocks, stray prose) is dropped, also when it
   shares a line with a kept statement (``import os; os._exit(0)``). Code that does
   not parse (cut off) is shortened line by line from the end until it does; if it never does it
   is kept as it is and fails in the sandbox.
4. Body (no such definition): lines written without indentation are indented by four spaces;
   an indented body ends at the first later line at column 0 (the usual HumanEval stop
   sequences: a new ``def``, ``class``, ``if``, ``print``, ``#``...).

``program_of(prompt, extraction)`` glues the result to the prompt.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

METHODS = ("fenced_def", "fenced_body", "def", "body", "empty")

_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_START = re.compile(r"(?:import |from \S+ import |@|def |async def |class )")
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_KEEP = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, *_COMPOUND)


@dataclass(frozen=True)
class Extraction:
    """The code to append to the prompt and how it was found (one of ``METHODS``)."""

    code: str
    method: str


def _defines(entry_point: str) -> re.Pattern:
    return re.compile(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(entry_point)}[ \t]*\(", re.MULTILINE)


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def _pick_block(blocks: list[tuple[str, str]], entry_point: str) -> str:
    defines = _defines(entry_point)
    for _, code in blocks:
        if defines.search(code):
            return code
    for lang, code in blocks:
        if lang in ("python", "py", "python3", ""):
            return code
    return blocks[0][1]


def _code_region(text: str, entry_point: str) -> str:
    """The lines of unfenced text around the definition that look like code."""
    lines = text.splitlines()
    match = _defines(entry_point).search(text)
    def_line = text[:match.start()].count("\n")
    start = def_line
    while start > 0 and (not lines[start - 1].strip() or _CODE_START.match(lines[start - 1])):
        start -= 1
    end = def_line + 1
    while end < len(lines):
        line = lines[end]
        if line.strip() and not line[0].isspace() and not _CODE_START.match(line):
            break
        end += 1
    return "\n".join(lines[start:end]).strip("\n") + "\n"


def _parse_prefix(code: str) -> tuple[str, ast.Module] | None:
    """The longest prefix of ``code`` (whole lines) that parses, with its tree."""
    lines = code.splitlines()
    for end in range(len(lines), 0, -1):
        candidate = "\n".join(lines[:end]) + "\n"
        try:
            return candidate, ast.parse(candidate)
        except (SyntaxError, ValueError):
            continue
    return None


def _clean_definition(code: str, entry_point: str) -> str:
    """Keep top-level imports, definitions and assignments (see rule 3)."""
    parsed = _parse_prefix(code)
    if parsed is None or not _defines(entry_point).search(parsed[0]):
        return code
    source, tree = parsed
    lines = source.splitlines()
    kept = []
    for node in tree.body:
        if not isinstance(node, _KEEP):
            continue
        if isinstance(node, _COMPOUND):  # starts a line of its own, decorators above it
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            kept.append("\n".join(lines[first - 1:node.end_lineno]))
        else:  # exactly the statement: `import os; os._exit(0)` keeps only `import os`
            kept.append(ast.get_source_segment(source, node))
    return "\n\n".join(kept) + "\n"


def _as_body(code: str, cut_at_dedent: bool) -> str:
    lines = code.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return ""
    if not lines[0][0].isspace():
        return "\n".join(("    " + line) if line.strip() else "" for line in lines).rstrip() + "\n"
    if cut_at_dedent:
        for i, line in enumerate(lines[1:], start=1):
            if line.strip() and not line[0].isspace():
                lines = lines[:i]
                break
    return "\n".join(lines).rstrip() + "\n"


def extract_code(reply: str, entry_point: str) -> Extraction:
    """The code to append to the prompt, per the module docstring's rules."""
    blocks = _fenced_blocks(reply)
    fenced = bool(blocks)
    code = _pick_block(blocks, entry_point) if fenced else reply
    if not code.strip():
        return Extraction("", "empty")
    if _defines(entry_point).search(code):
        if not fenced:
            code = _code_region(code, entry_point)
        return Extraction(_clean_definition(code, entry_point), "fenced_def" if fenced else "def")
    body = _as_body(code, cut_at_dedent=not fenced)
    if not body.strip():
        return Extraction("", "empty")
    return Extraction(body, "fenced_body" if fenced else "body")


def program_of(prompt: str, extraction: Extraction) -> str:
    """The program run against the tests: the prompt, then the extracted code (a new
    definition goes after a blank line, a body directly under the docstring)."""
    if extraction.method in ("fenced_def", "def"):
        return prompt.rstrip("\n") + "\n\n\n" + extraction.code
    return prompt + extraction.code
