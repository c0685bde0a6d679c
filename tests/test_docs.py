"""The documentation as a new user meets it: reference pages (README.md, docs/*.md) say how the
benchmark works and hold no lab record (load averages, ``nice`` levels, commit hashes: those
belong to the dated pages of docs/results/), every relative link of the README, docs/ and the
task packages' READMEs leads to a file (and a heading, for a Markdown anchor), and every results
page is listed in the results index."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from a2rl.analysis.deviations import slug
from checkout import REPO

RESULTS = REPO / "docs" / "results"
REFERENCE = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINKED = [*REFERENCE, *sorted(RESULTS.glob("*.md")), *sorted((REPO / "tasks").glob("*/README.md")),
          REPO / "benchmarks" / "README.md", REPO / "experiments" / "README.md"]
# what a lab notebook says and a reference page does not
LAB_RECORD = {
    "a load average": re.compile(r"\bload averages?\b|\bload (?:of )?\d", re.IGNORECASE),
    "a nice level": re.compile(r"\bnice\b|\bautogroup\b", re.IGNORECASE),
    "a commit hash": re.compile(r"`(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}`"
                                r"|\bcommit (?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),
}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def lab_record(text: str) -> list[str]:
    """``line N: <what> in: <line>`` for every line of ``text`` that reads like a lab record."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in LAB_RECORD.items():
            if pattern.search(line):
                found.append(f"line {number}: {what} in: {line.strip()}")
    return found


@pytest.mark.parametrize("page", REFERENCE, ids=lambda p: str(p.relative_to(REPO)))
def test_reference_pages_hold_no_lab_record(page):
    found = lab_record(page.read_text(encoding="utf-8"))
    assert not found, (f"{page.relative_to(REPO)} reads like a lab notebook; move these to a "
                       f"docs/results/<date>-<study>.md page and link it:\n" + "\n".join(found))


def test_the_lab_record_check_catches_each_kind():
    text = ("at load 4.8 on two cores\nload average 3-5\nrun at `nice -n 19`\nmain `aa3a503`\n"
            "the merge of commit 0cbc3f1\nseed `7340117` and the `gsm8k` task\n")
    assert [line.split(":")[0] for line in lab_record(text)] == [
        "line 1", "line 2", "line 3", "line 4", "line 5"]


def headings(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#+ +(.+?)\s*$", text, re.MULTILINE)}


def broken_links(page: Path) -> list[str]:
    """Every relative link of ``page`` (outside code blocks) whose file, or whose heading in a
    Markdown file, does not exist."""
    broken = []
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not this test's to check
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / unquote(path)).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in headings(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(REPO)}")
    return broken


@pytest.mark.parametrize("page", LINKED, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(REPO)}:\n" + "\n".join(broken)


def test_the_link_check_catches_a_missing_file_and_a_missing_heading(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    (tmp_path / "a.md").write_text("# A title\n\n## Part one\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#part-one) [gone](c.md) [no part](a.md#part-two) [web](https://x)\n"
                    "```\n[in a code block](d.md)\n```\n")
    assert broken_links(page) == ["c.md: no such file",
                                  "a.md#part-two: no heading #part-two in a.md"]


def test_every_results_page_is_in_the_index():
    index = (RESULTS / "README.md").read_text(encoding="utf-8")
    listed = set(LINK.findall(index))
    pages = {p.name for p in RESULTS.glob("*.md") if p.name != "README.md"}
    assert pages and not pages - listed, f"not in docs/results/README.md: {sorted(pages - listed)}"
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d-[a-z0-9-]+\.md", p) for p in pages), sorted(pages)


# a merge that left its conflict markers in a page or a config still parses (Markdown, YAML
# comments), so nothing else would notice
CONFLICT = re.compile(r"^(?:<{7}|>{7})(?: |$)|^={7}$", re.MULTILINE)
TEXT_FILES = [*LINKED, *sorted((REPO / "docs").rglob("*.json")),
              *sorted(REPO.glob("conf/**/*.yaml")), *sorted(REPO.glob("tasks/**/*.yaml")),
              *sorted(REPO.glob("tasks/**/*.j2")), *sorted(REPO.glob("src/a2rl/templates/**/*.j2"))]


def conflict_lines(text: str) -> list[int]:
    return [text.count("\n", 0, m.start()) + 1 for m in CONFLICT.finditer(text)]


def test_no_page_or_config_keeps_merge_conflict_markers():
    found = {str(p.relative_to(REPO)): lines for p in TEXT_FILES
             if (lines := conflict_lines(p.read_text(encoding="utf-8")))}
    assert not found, f"merge conflict markers (file: lines): {found}"


def test_the_conflict_check_catches_each_marker():
    text = "a\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\n| a | b |\n|=======|\n"
    assert conflict_lines(text) == [2, 4, 6]
