"""A hostile agent's strings in what people read (issue #28, minor finding "summary.md keeps agent
strings as raw HTML"): the agent chooses its submissions' errors, the code the route quotes, its
log, the files the integrity checks quote, the model names its LLM calls carry, the hosts it
asks the egress proxy for and the fields of its events. Each carries HTML, links, images,
emphasis, code spans, table borders and code fences. summary.md, rendered by a CommonMark
renderer with raw HTML on (markdown-it-py, as a Markdown viewer would), and the run's HTML page
show each one as text, and neither gains a tag or an attribute from it.
"""

from __future__ import annotations

import html
from dataclasses import replace
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from a2rl.analysis.view import DETAIL_BRIEF
from a2rl.common.layout import RunPaths
from a2rl.common.records import SubmissionItem, Submissions
from a2rl.report.markdown import render_markdown
from a2rl.report.run_page import run_page

pytestmark = pytest.mark.attacks

# single spaces only, and shorter than the brief tables' cut (DETAIL_BRIEF), so shown whole
PAYLOAD = ("<script>f()</script><img src=x onerror=f()> [a](javascript:f()) "
           "![p](http://e.example/p) <http://e.example/> **b** _i_ `c` ~~s~~ a|b \\[x] &lt;b&gt;")
EXCERPT = f"Traceback (most recent call last):\n```\n{PAYLOAD}\n````\n~~~\n{PAYLOAD}"
# what summary.md may be made of: its headings, paragraphs, lists, tables, bold and code
MARKDOWN_TAGS = {"h1", "h2", "p", "ul", "li", "strong", "code", "pre", "table", "thead",
                 "tbody", "tr", "th", "td"}


class Tags(HTMLParser):
    """The tags of an HTML text with their attributes, and its visible text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    @property
    def visible(self) -> str:
        return " ".join("".join(self.text).split())


def hostile_summary(blank):
    item = SubmissionItem(
        id=1, elapsed_s=3.0, valid=False, score=None, stderr=None, error=PAYLOAD, status_code=400,
        cached=None, model_path=PAYLOAD, split="test", artifact_hash=None, artifact_bytes=None,
        equals_base=None, code_commit="0123456789abcdef", status=None, parent=PAYLOAD,
        methods=[])
    evidence = [{"where": PAYLOAD, "match": PAYLOAD, "what": PAYLOAD}]
    return replace(
        blank,
        submissions=Submissions(total=1, valid=0, invalid=1, items=[item]),
        route={"methods": [], "techniques": [], "per_submission": [
            {"id": 1, "code_commit": PAYLOAD, "valid": True, "methods": ["SFT"],
             "techniques": [], "evidence": evidence}]},
        code={"repo": "/results/code.git", "final_commit": None, "revisions": [
            {"commit": "0123456789abcdef", "time": PAYLOAD, "message": PAYLOAD,
             "tags": ["submission-1"], "files": [PAYLOAD]}]},
        failures=[{"kind": "submission", "message": PAYLOAD, "elapsed_s": 3.0,
                   "excerpt": None},
                  {"kind": "traceback", "message": PAYLOAD, "elapsed_s": None,
                   "excerpt": EXCERPT}],
        integrity={"contamination": {
            "checked": True, "flagged": True, "n": 8, "files_scanned": 1,
            "contaminated_items": 1, "splits": {"test": {"contaminated": 1, "judged": 2}},
            "evidence": [{"split": "test", "id": PAYLOAD, "coverage": 0.5, "files": [PAYLOAD],
                          "example": PAYLOAD}],
            "left_out_count": 1, "left_out": [{"path": PAYLOAD, "reason": PAYLOAD}]},
            "tamper": {"count": 1, "rejected_count": 0,
                       "attempts": [{"kind": PAYLOAD, "source": PAYLOAD, "detail": PAYLOAD}]}},
        llm={"calls": 1, "failed_calls": 0, "input_tokens": 1, "output_tokens": 1,
             "cost_usd": 0.0, "latency_s": 0.1, "models": [PAYLOAD]},
        network={"policy": "allowlist", "allowlist": ["pypi.org"], "hosts": [
            {"host": PAYLOAD, "port": 443, "allowed": False, "connections": 1, "bytes_up": 0,
             "bytes_down": 0}]},
        timeline=[{"time": "t", "elapsed_s": 1.0, "kind": PAYLOAD, "detail": PAYLOAD}])


def test_summary_md_shows_the_agents_strings_as_text(blank_summary):
    assert len(PAYLOAD) <= DETAIL_BRIEF
    md = render_markdown(hostile_summary(blank_summary))
    renderer = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    page = Tags(renderer.render(md))
    assert {tag for tag, _ in page.tags} <= MARKDOWN_TAGS, page.tags
    assert all(not attrs for _, attrs in page.tags), page.tags
    # every place the agent wrote into shows its text whole: the submission's error and parent,
    # the route's commit and evidence (2), the revision's message, the failures (2), the
    # excerpt's copies (2), integrity (id, files, example, path, reason, kind, source, detail),
    # the models, the host and the timeline (kind, detail)
    assert page.visible.count(PAYLOAD) == 22, page.visible
    # the excerpt is one code block, with its fence-like lines inside
    assert f"<pre><code>{html.escape(EXCERPT, quote=False)}\n</code></pre>" \
        in renderer.render(md)


def test_the_run_page_shows_the_agents_strings_as_text(tmp_path, blank_summary):
    page = Tags(run_page(hostile_summary(blank_summary), RunPaths(tmp_path / "run"), "p.svg"))
    assert "script" not in {tag for tag, _ in page.tags}
    assert not [attrs for _, attrs in page.tags if any(a.startswith("on") for a in attrs)]
    assert [attrs["src"] for tag, attrs in page.tags if tag == "img"] == ["p.svg"]
    assert not [attrs for tag, attrs in page.tags if tag == "a" and "evil" in attrs["href"]]
    assert PAYLOAD in page.visible and EXCERPT.split("\n", 1)[1] in "".join(page.text)
