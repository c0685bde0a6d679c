"""docs/deviations.md and the leaderboards' links to it (a2rl.analysis.deviations): every
built-in task id has a row, the document's own links resolve, and both leaderboards link a task
to its row while a task without one (a plugin's) stays plain text."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote

import yaml

from a2rl.analysis.deviations import DOC, anchors, slug, task_links
from a2rl.analysis.leaderboard import leaderboard_frame, to_markdown
from a2rl.report.html import index_page
from checkout import REPO

BUILT_IN_IDS = sorted(yaml.safe_load(p.read_text())["id"]
                      for p in (REPO / "tasks").glob("*/conf/task/*.yaml"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def headings(path: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ +(.+?)\s*$", path.read_text(),
                                                  re.MULTILINE)}


def test_the_document_is_the_checkouts_and_every_built_in_task_has_a_row():
    assert DOC == REPO / "docs" / "deviations.md"
    table = anchors()
    assert BUILT_IN_IDS and set(BUILT_IN_IDS) <= set(table), \
        f"no deviations row for {sorted(set(BUILT_IN_IDS) - set(table))}"
    assert set(table.values()) <= headings(DOC)  # each anchor is a section of the document
    assert set(table) == set(BUILT_IN_IDS)  # and names no task that does not exist
    assert table["gsm8k_arith"] == "gsm8k" and table["household"] == "alfworld"


def assert_links_resolve(doc: Path) -> None:
    for target in LINK.findall(doc.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / unquote(path)).resolve() if path else doc
        assert file.is_file(), f"{doc} links to a missing {target}"
        if anchor and file.suffix == ".md":
            assert anchor in headings(file), f"{doc}: no heading for {target}"


def test_the_documents_own_links_and_anchors_resolve():
    assert_links_resolve(DOC)


def test_each_task_package_readme_links_its_rows():
    """tasks/<package>/README.md (shipped with the package) points at the row of each of its
    task ids, and its links resolve."""
    table = anchors()
    packages: dict[str, set[str]] = {}
    for conf in (REPO / "tasks").glob("*/conf/task/*.yaml"):
        packages.setdefault(conf.parents[2].name, set()).add(yaml.safe_load(conf.read_text())["id"])
    for package, ids in packages.items():
        readme = REPO / "tasks" / package / "README.md"
        assert readme.is_file(), f"tasks/{package} has no README.md"
        for anchor in {table[i] for i in ids}:
            assert f"../../docs/deviations.md#{anchor}" in readme.read_text(), (package, anchor)
        assert_links_resolve(readme)


def test_github_slugs():
    assert slug("GSM8K") == "gsm8k" and slug("Across tasks") == "across-tasks"
    assert slug("The offline world (what is synthetic)") == "the-offline-world-what-is-synthetic"
    assert slug("AlpacaEval smoke cells: `scripts/measure_alpacaeval.py`") == \
        "alpacaeval-smoke-cells-scriptsmeasure_alpacaevalpy"


def test_links_are_relative_to_the_page_and_absent_for_a_task_without_a_row(tmp_path):
    page_dir = tmp_path / "results" / "quick" / "report"
    links = task_links({"gsm8k", "household", "plug_words"}, page_dir)
    assert set(links) == {"gsm8k", "household"}  # the plugin's task has no row: no link
    path, _, anchor = links["household"].partition("#")
    assert anchor == "alfworld" and not Path(path).is_absolute()
    assert (page_dir / unquote(path)).resolve() == DOC
    # a folder with spaces is quoted; without the document (no checkout) there are no links
    odd = tmp_path / "my results"
    odd.mkdir()
    doc = odd / "deviations.md"
    doc.write_text("# Deviations\n\n## GSM8K\n\nTask ids: `gsm8k`\n")
    assert task_links({"gsm8k"}, tmp_path, doc) == {"gsm8k": "my%20results/deviations.md#gsm8k"}
    assert task_links({"gsm8k"}, tmp_path, tmp_path / "missing.md") == {}


def board_of(blank_summary, *tasks: str):
    return leaderboard_frame([replace(blank_summary, task=t, final_score=10.0, baseline=5.0,
                                      improvement=5.0) for t in tasks])


def test_markdown_leaderboard_links_a_task_to_its_row(blank_summary, tmp_path):
    board = board_of(blank_summary, "gsm8k", "plug_words")
    links = task_links(set(board["task"]), tmp_path)
    md = to_markdown(board, links=links)
    assert f"| ci | [gsm8k]({links['gsm8k']}) | L1 | sft |" in md
    assert "| ci | plug_words | L1 | sft |" in md  # no row, no link, nothing broken
    assert "docs/deviations.md" in md.split("|")[0]  # the intro says what the links are
    plain = to_markdown(board)
    assert "| ci | gsm8k | L1 |" in plain and "deviations" not in plain


def test_html_leaderboard_links_a_task_to_its_row(blank_summary, tmp_path):
    board = board_of(blank_summary, "gsm8k", 'plug<"x">')
    links = task_links(set(board["task"]), tmp_path)
    html = index_page(board, board.iloc[0:0], [], "now", links)
    assert f'<td><a href="{links["gsm8k"]}" title="how gsm8k differs from its benchmark">' \
           f"gsm8k</a></td>" in html
    assert "<td>plug&lt;&quot;x&quot;&gt;</td>" in html  # unknown id: escaped text, no link
    assert html.count("deviations.md#") == 1
    assert "deviations.md" not in index_page(board, board.iloc[0:0], [], "now")
