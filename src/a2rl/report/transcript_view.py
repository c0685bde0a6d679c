"""The transcript viewer of a run page: the agent's route as one timeline (its messages, its
commands with collapsible outputs, its submissions with their scores and a link to each one's
code diff, and what went wrong), with filters: errors only, submissions only, commands matching
a text. Static HTML: outputs fold with <details>, and a few lines of inline script do the
filtering (the page reads without it). Rows use ``content-visibility: auto`` so a run with
thousands of entries opens and scrolls quickly (tests/report/test_transcript_view.py measures
5,000 entries)."""

from __future__ import annotations

from a2rl.analysis.transcripts.timeline import Entry
from a2rl.report.html_parts import esc, fmt

MAX_MESSAGE_CHARS = 6000  # a message longer than this folds after its start
MAX_COMMAND_LINES = 4  # a longer command shows these and folds the rest
CHUNK = 25  # entries per block the browser skips laying out while it is off screen

CSS = """
.tv-controls { position: sticky; top: 0; background: #fff; padding: 0.5em 0; z-index: 1;
  border-bottom: 1px solid #ddd; display: flex; gap: 1em; align-items: center;
  flex-wrap: wrap; }
.tv-controls input[type=search] { width: 22em; padding: 3px 6px; }
.tv { font-size: 0.9em; margin: 0.5em 0; }
.tv > ol { list-style: none; padding: 0; margin: 0; content-visibility: auto;
  contain-intrinsic-size: auto 1200px; }
.tv li { border-left: 4px solid #d0d7de; padding: 3px 8px; margin: 3px 0; }
.tv li.message { border-color: #8fb8e8; } .tv li.command { border-color: #adb5bd; }
.tv li.submission { border-color: #1b7f3b; background: #f3fbf5; }
.tv li.event { border-color: #c8a400; } .tv li.err { border-color: #b00020;
  background: #fff5f5; }
.tv .t { color: #666; font-variant-numeric: tabular-nums; display: inline-block;
  min-width: 5.5em; } .tv .who { font-weight: bold; margin-right: 0.4em; }
.tv pre { margin: 0.3em 0; max-height: 30em; overflow: auto; white-space: pre-wrap; }
.tv .msg, .tv code { white-space: pre-wrap; } .tv.only-errors li:not(.err),
.tv.only-submissions li:not(.submission), .tv li.hidden { display: none; }
"""

SCRIPT = """
(function () {
  var list = document.getElementById('tv'), query = document.getElementById('tv-q'),
      count = document.getElementById('tv-count');
  var rows = Array.prototype.slice.call(list.querySelectorAll('li'));
  var commands = rows.map(function (li) {  // a command's whole text, folded lines too
    if (!li.classList.contains('command')) return null;
    return Array.prototype.map.call(li.querySelectorAll('code'), function (c) {
      return c.textContent; }).join(' ').toLowerCase(); });
  function apply() {
    var mode = document.querySelector('input[name=tv-filter]:checked').value;
    list.className = 'tv' + (mode === 'all' ? '' : ' only-' + mode);  // CSS hides the rest
    var q = query.value.trim().toLowerCase(), shown = 0;
    for (var i = 0; i < rows.length; i++) {
      var hide = q !== '' && (commands[i] === null || commands[i].indexOf(q) < 0);
      rows[i].classList.toggle('hidden', hide);
      if (!hide && (mode === 'all' || rows[i].classList.contains(
          mode === 'errors' ? 'err' : 'submission'))) shown++;
    }
    count.textContent = shown + ' of ' + rows.length + ' entries';
  }
  document.querySelectorAll('input[name=tv-filter]').forEach(function (r) {
    r.addEventListener('change', apply); });
  query.addEventListener('input', apply);
  function openTarget() {  // a submission's diff link opens the revision it points at
    var target = location.hash && document.getElementById(location.hash.slice(1));
    if (target && target.tagName === 'DETAILS') target.open = true;
  }
  window.addEventListener('hashchange', openTarget); openTarget(); apply();
})();
"""


def diff_anchor(submission_id: int) -> str:
    """The id of a submission's code revision on the run page (run_page's diff sections)."""
    return f"diff-submission-{submission_id}"


def _time(entry: Entry) -> str:
    return f'<span class="t">+{fmt(entry.elapsed_s, 1)} s</span>'


def _message(entry: Entry) -> str:
    d = entry.details
    who = {"assistant": "agent", "user": "prompt", "system": "system"}.get(d.get("role"), "")
    meta = ""
    if d.get("llm_call") is not None:
        meta = (f' <span class="muted">(LLM call {esc(d["llm_call"])}: '
                f'{esc(d.get("input_tokens"))} in, {esc(d.get("output_tokens"))} out, '
                f'{fmt(d.get("latency_s"), 2)} s)</span>')
    text = entry.text
    if len(text) > MAX_MESSAGE_CHARS or (who in ("prompt", "system") and len(text) > 300):
        body = (f'<details><summary>{esc(text[:200])} …</summary>'
                f'<div class="msg">{esc(text)}</div></details>')
    else:
        body = f'<div class="msg">{esc(text)}</div>'
    return f'{_time(entry)}<span class="who">{who}</span>{meta}{body}'


def _command(entry: Entry) -> str:
    d = entry.details
    output = d.get("output")
    status = (f"exit {d['exit_code']}" if d.get("exit_code") is not None else
              "failed" if entry.error else "done")
    label = "$" if d.get("shell") else esc(d.get("tool"))
    lines = entry.text.splitlines() or [""]
    if len(lines) > MAX_COMMAND_LINES:  # a heredoc: its first lines, the rest folded
        shown = (f"<code>{esc(chr(10).join(lines[:MAX_COMMAND_LINES]))}</code><details>"
                 f"<summary>{len(lines) - MAX_COMMAND_LINES} more lines</summary>"
                 f"<code>{esc(chr(10).join(lines[MAX_COMMAND_LINES:]))}</code></details>")
    else:
        shown = f"<code>{esc(entry.text)}</code>"
    head = f'{_time(entry)}<span class="who">{label}</span>{shown}'
    if output is None:
        return head + ' <span class="muted">(no result)</span>'
    size = f"{len(output):,} characters" + (", cut" if d.get("truncated") else "")
    return (f'{head}<details><summary>output ({esc(status)}, {size})</summary>'
            f"<pre>{esc(output)}</pre></details>")


def _submission(entry: Entry) -> str:
    d = entry.details
    sid = d["submission_id"]
    if d["valid"]:
        what = (f'<b>score {fmt(d["score"])}</b> on {esc(d["split"])} '
                f'(best so far {fmt(d["best"])})')
    else:
        what = f'<b>rejected</b>{" (" + esc(d["status"]) + ")" if d.get("status") else ""}: ' \
               f'{esc(d.get("message"))}'
    diff = (f' · <a href="#{diff_anchor(sid)}">code diff</a>' if d.get("code_commit") else "")
    return (f'{_time(entry)}<span class="who">submission {esc(sid)}</span>'
            f"<code>{esc(entry.text)}</code> → {what}{diff}")


def _event(entry: Entry) -> str:
    return f'{_time(entry)}<span class="who">harness</span>{esc(entry.text[:500])}'


RENDER = {"message": _message, "command": _command, "submission": _submission,
          "event": _event}


def transcript_section(entries: list[Entry]) -> str:
    """The viewer's HTML: controls, the ordered list, its style and script."""
    counts = {k: sum(1 for e in entries if e.kind == k) for k in RENDER}
    errors = sum(1 for e in entries if e.error)
    items = [f'<li class="{e.kind}{" err" if e.error else ""}">{RENDER[e.kind](e)}</li>'
             for e in entries]
    # rows in chunks that the browser lays out only near the screen (content-visibility)
    rows = "\n".join("<ol>" + "".join(items[i:i + CHUNK]) + "</ol>"
                     for i in range(0, len(items), CHUNK))
    radios = "".join(
        f'<label><input type="radio" name="tv-filter" value="{value}"'
        f'{" checked" if value == "all" else ""}> {label}</label>'
        for value, label in (("all", "everything"), ("errors", f"errors only ({errors})"),
                             ("submissions", f"submissions only ({counts['submission']})")))
    return (f"<style>{CSS}</style>"
            f'<p class="muted">{counts["message"]} messages, {counts["command"]} commands, '
            f'{counts["submission"]} submissions, {counts["event"]} harness events, in order; '
            f"outputs fold open on a click.</p>"
            f'<div class="tv-controls">{radios}'
            f'<input type="search" id="tv-q" placeholder="commands matching…" '
            f'aria-label="commands matching"><span class="muted" id="tv-count"></span></div>'
            f'<div class="tv" id="tv">\n{rows}\n</div><script>{SCRIPT}</script>')
