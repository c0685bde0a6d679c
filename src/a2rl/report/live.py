"""``a2rl view``: the report of a grid's results folder served on localhost while the grid
runs, its pages following what changes.

    a2rl view results/quick            # http://127.0.0.1:8765/
    a2rl view grid=ci --port 0         # any free port; the address is printed

The pages are the static report's (``a2rl.report.html.index_page``, ``a2rl.report.run_page``),
drawn from the run folders as they are now: a finished run from its summary.json, a running
one from a summary made on the fly (``a2rl.analysis.summary.summarize`` with the config the
runner wrote into config.json). The index adds the table of every cell
(``a2rl.analysis.status``). Each page asks ``/api/stamp`` every few seconds whether the files it
was drawn from changed (their sizes and modification times) and, when they did, fetches itself
again and swaps its body in place: a running cell's submissions, best-so-far curve and
transcript appear as they arrive, with no reload by hand. ``/api/status`` is the status table as
JSON. The static report under results/<label>/report/ stays the grid's artifact; nothing here
writes into the results folder (figures go to a temporary folder of the server's own).

Read-only and local: the server binds 127.0.0.1 only, answers GET and HEAD only, answers only
requests addressed to its own loopback name (a page elsewhere cannot reach it through DNS
rebinding), and serves no file but its pages, its figures and the static report's files (no run
folder, no sealed split, nothing outside the results folder). An agent run with
``agent.network=open`` shares the host's loopback, so the server also wants a secret: the
address it prints carries ``?token=...``, which the first page turns into a cookie (as Jupyter
does); a request with neither is refused. What agents wrote (transcripts, logs, paths) is escaped
as in the static report.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import shutil
import tempfile
import threading
from dataclasses import replace
from datetime import UTC, datetime
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional
from urllib.parse import parse_qs, unquote, urlsplit

from a2rl.analysis.status import (
    STATUS_HEADER,
    GridStatus,
    cell_status,
    grid_status,
    status_rows,
)
from a2rl.common.layout import Layout, RunPaths
from a2rl.common.records import RecordError, RunSummary
from a2rl.report.html_parts import esc, table

log = logging.getLogger(__name__)
HOST = "127.0.0.1"
DEFAULT_PORT = 8765
POLL_MS = 2000
COOKIE = "a2rl_view"
INDEX_FIGURES = ("leaderboard.svg", "budget_curves.svg")
# what a run page is drawn from: a change in any of them redraws it
RUN_FILES = ("run.json", "config.json", "ledger.jsonl", "events.jsonl", "final.json",
             "summary.json", "integrity.json", "llm_calls.jsonl", "transcript.jsonl")
# asks whether the page's files changed, then swaps the page's body for the new one and runs
# its scripts again (the transcript viewer's filter); in <head>, so it survives the swap
POLL_SCRIPT = """<script>
(function () {
  var stamp = %(stamp)s, page = location.pathname;
  async function poll() {
    try {
      var now = await (await fetch("/api/stamp?page=" + encodeURIComponent(page),
                                   {cache: "no-store"})).json();
      if (now.stamp !== stamp) {
        var text = await (await fetch(page, {cache: "no-store"})).text();
        var doc = new DOMParser().parseFromString(text, "text/html");
        stamp = now.stamp;
        document.body.replaceWith(doc.body);
        document.querySelectorAll("body script").forEach(function (old) {
          var fresh = document.createElement("script");
          fresh.textContent = old.textContent;
          old.replaceWith(fresh);
        });
      }
    } catch (err) { /* the server is gone or busy: ask again */ }
    setTimeout(poll, %(poll_ms)d);
  }
  setTimeout(poll, %(poll_ms)d);
})();
</script>
"""


class LiveReport:
    """The pages of one results folder, drawn when their files changed since last time."""

    def __init__(self, results: Path, planned: list[dict[str, Any]] = ()):
        self.results = Path(results).resolve()
        self.planned = list(planned)
        self.layout = Layout(self.results, self.results)
        self.figures = Path(tempfile.mkdtemp(prefix="a2rl-view-"))
        self._pages: dict[str, tuple[str, str]] = {}  # page -> (stamp, html)
        self._read: dict[Path, tuple[Any, RunSummary]] = {}  # summary.json -> (stamp, summary)
        self._board: Optional[tuple] = None  # the index's last: key, board, summaries
        self._drawn: Optional[tuple] = None  # the key of the board the figures show
        self._lock = threading.RLock()

    def close(self) -> None:
        shutil.rmtree(self.figures, ignore_errors=True)

    # ----------------------------------------------------------------- stamps and pages

    def status(self) -> GridStatus:
        return grid_status(self.results, self.planned)

    def run_root(self, slug: str) -> Optional[Path]:
        """The run folder of ``slug`` (task__agent__driver__seedK) when there is one."""
        parts = slug.split("__")
        if len(parts) != 4 or not parts[3].startswith("seed") or not parts[3][4:].isdigit():
            return None
        if any(p in ("", ".", "..") or "/" in p for p in parts):
            return None
        root = self.layout.run(*parts[:3], int(parts[3][4:])).root
        return root if root.is_dir() else None

    def stamp(self, page: str) -> Optional[str]:
        """What ``page`` was drawn from, as a short hash of its files' sizes and modification
        times (None: no such page)."""
        if page in ("/", "/index.html"):
            return _digest(self._index_inputs(self.status()))
        root = self.run_root(_run_slug(page) or "")
        if root is None:
            return None
        # and a running LLM agent's own transcript, as its CLI writes it into the agent folder
        agent = RunPaths(root).agent_files
        return _digest([_file_stamp(root / name) for name in RUN_FILES]
                       + sorted(_folder_stamp(agent)))

    def page(self, page: str) -> Optional[str]:
        """The HTML of ``page`` (the index or a run's), drawn again only when its stamp
        changed."""
        with self._lock:
            status = self.status() if page in ("/", "/index.html") else None
            stamp = (_digest(self._index_inputs(status)) if status is not None
                     else self.stamp(page))
            if stamp is None:
                return None
            cached = self._pages.get(page)
            if cached and cached[0] == stamp:
                return cached[1]
            html = (self._index(status) if status is not None
                    else self._run_page(_run_slug(page)))
            html = html.replace("</head>", POLL_SCRIPT % {"stamp": json.dumps(stamp),
                                                         "poll_ms": POLL_MS} + "</head>", 1)
            self._pages[page] = (stamp, html)
            return html

    def _index_inputs(self, status: GridStatus) -> list:
        """The index changes with a cell's state, submissions or last event, and with any
        summary.json."""
        return [(c.slug, c.state, c.outcome, c.valid, c.invalid, c.best, c.last_event,
                 _file_stamp(RunPaths(Path(c.run)).summary_json) if c.run else None)
                for c in status.cells]

    def _index(self, status: GridStatus) -> str:
        from a2rl.analysis.leaderboard import leaderboard_frame, level_frame
        from a2rl.report.html import index_page

        summaries = self._summaries(status)
        board, levels = leaderboard_frame(summaries), level_frame(summaries)
        # the figures are drawn when asked for, again only when a summary changed (each is
        # the same object until its file changes: _summaries)
        self._board = (tuple(map(id, summaries)), board, summaries)
        generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return index_page(board, levels, summaries, generated, before=cells_section(status))

    def _summaries(self, status: GridStatus) -> list[RunSummary]:
        """Every summary.json of the folder, each read again only when it changed."""
        summaries = []
        for cell in status.cells:
            path = RunPaths(Path(cell.run)).summary_json if cell.run else None
            if path is None or not path.is_file():
                continue
            stamp = _file_stamp(path)
            known = self._read.get(path)
            if known is None or known[0] != stamp:
                try:
                    known = (stamp, RunSummary.load(path))
                except (RecordError, OSError) as err:  # being rewritten, or damaged
                    log.warning("summary left out: %s", err)
                    continue
                self._read[path] = known
            summaries.append(known[1])
        return summaries

    def index_figure(self, name: str) -> Optional[Path]:
        """The index's figure ``name`` (leaderboard.svg, budget_curves.svg) of the board the
        index last showed, drawn when first asked for after it changed: the index answers
        without waiting for matplotlib and the bootstrap bands."""
        from a2rl.report.html import index_figures

        if name not in INDEX_FIGURES:
            return None
        with self._lock:
            if self._board is None:
                self._index(self.status())
            key, board, summaries = self._board
            if self._drawn != key:
                index_figures(board, summaries, self.figures)
                self._drawn = key
        return self.figures / name

    def _run_page(self, slug: str) -> str:
        from a2rl.report.plots import trajectory_svg
        from a2rl.report.run_page import run_page

        run = RunPaths(self.run_root(slug))
        summary = self._summary(run)
        if summary is None:
            return _plain_page(slug, "This run has no summary yet and no config.json to "
                               "summarize it from (a run from before the live view).")
        trajectory_svg(summary, self.figures / f"{slug}.svg")
        plot = f"../plots/{slug}.svg?v={_digest([_file_stamp(run.ledger)])}"
        return run_page(summary, run, plot, self._transcript_so_far(run, slug))

    def _transcript_so_far(self, run: RunPaths, slug: str) -> Optional[tuple[str, Path]]:
        """A running LLM agent's transcript as its CLI has written it so far, read from the
        agent folder (the stack's own reader, which leaves it there) into the server's folder;
        None for a script agent or a finished run (its page reads the collected one)."""
        if run.run_json.exists() or not run.config.is_file():
            return None
        from a2rl.common.files import read_json
        from a2rl.llm.stacks import stack_of

        name = (read_json(run.config).get("agent") or {}).get("stack")
        if not name:
            return None
        text = stack_of(name).transcript_so_far(run.agent_files)
        if text is None:
            return None
        path = self.figures / f"{slug}.transcript.jsonl"
        path.write_text(text)
        return name, path

    def _summary(self, run: RunPaths) -> Optional[RunSummary]:
        """summary.json when the run is summarized and nothing changed since, else a summary
        made now from the run's config.json."""
        newest = max((_file_stamp(run.root / n)[1] for n in RUN_FILES
                      if n not in ("summary.json", "integrity.json")), default=0)
        if run.summary_json.is_file() and run.summary_json.stat().st_mtime >= newest:
            try:
                return RunSummary.load(run.summary_json)
            except (RecordError, OSError):
                pass
        if not run.config.is_file():
            return None
        from omegaconf import OmegaConf

        from a2rl.analysis.summary import summarize
        from a2rl.common.files import read_json
        from a2rl.config.types import to_run_config

        cfg = to_run_config(OmegaConf.create(read_json(run.config)))
        resources = Layout.from_paths(cfg.paths).resources
        summary = summarize(cfg, Layout(self.results, resources))
        if run.run_json.exists():
            return summary
        # the agent is still at work: its state and time so far, not "not_run"
        now = cell_status(self.layout, cfg.task.id, cfg.agent.name, cfg.driver.name, cfg.seed)
        return replace(summary, status=now.state, agent_seconds=now.elapsed_s)

    # ------------------------------------------------------------------- static files

    def static_file(self, path: str) -> Optional[Path]:
        """A file of the server's figures or of the static report (results/<label>/report/),
        never another: the path is resolved, links followed, and refused unless it lands
        below the folder it was asked of (so neither the run folders nor the sealed splits
        beside the report, nor anything outside the results folder)."""
        relative = unquote(path).lstrip("/")
        if "\0" in relative:
            return None
        if relative.startswith("plots/") and relative[len("plots/"):] in INDEX_FIGURES:
            return self.index_figure(relative[len("plots/"):])
        candidates = []
        # the server's figures, never the transcripts read so far that it keeps beside them
        if relative.startswith("plots/") and relative.endswith(".svg"):
            candidates.append((self.figures, self.figures / relative[len("plots/"):]))
        report = self.layout.report
        candidates.append((report, report / relative))
        for base, candidate in candidates:
            try:
                resolved = candidate.resolve()
            except (OSError, RuntimeError):
                continue
            if resolved.is_relative_to(base.resolve()) and resolved.is_file():
                return resolved
        return None


def cells_section(status: GridStatus) -> str:
    """The live index's table of every cell, each with a run folder linked to its page."""
    counts = ", ".join(f"{n} {s}" for s, n in status.counts().items()) or "no cells"
    rows = []
    for cell, row in zip(status.cells, status_rows(status)):
        name = (f'<a href="runs/{esc(cell.slug)}.html">{esc(row[0])}</a>' if cell.run
                else esc(row[0]))
        rows.append([name, f'<span class="state-{esc(cell.state)}">{esc(row[1])}</span>',
                     *(esc(v) for v in row[2:])])
    return (f'<h2 id="cells">Cells</h2><p class="muted">Live: {esc(counts)}; updated '
            f"{esc(status.generated)} (<code>a2rl status {esc(status.results)}</code> shows "
            "the same).</p>" + table(STATUS_HEADER, rows, [4, 6], cls="cells"))


def _plain_page(title: str, text: str) -> str:
    from a2rl.report.html_parts import page

    return page(title, f"<h1>{esc(title)}</h1><p>{esc(text)}</p>", depth=1)


def _run_slug(page: str) -> Optional[str]:
    if page.startswith("/runs/") and page.endswith(".html"):
        return page[len("/runs/"):-len(".html")]
    return None


def _file_stamp(path: Path) -> tuple[int, float]:
    try:
        st = path.stat()
    except OSError:
        return (-1, 0.0)
    return (st.st_size, st.st_mtime)


def _folder_stamp(folder: Path) -> list[tuple[str, int, float]]:
    """Name, size and modification time of each file directly in ``folder``."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    stamps = []
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                st = entry.stat(follow_symlinks=False)
                stamps.append((entry.name, st.st_size, st.st_mtime))
        except OSError:
            continue
    return stamps


def _digest(values: Any) -> str:
    return hashlib.sha256(json.dumps(values, default=str).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------- server


class Handler(BaseHTTPRequestHandler):
    server_version = "a2rl-view"
    report: LiveReport  # set on the class made for each server
    token: str

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's names)
        self.do_GET(body=False)

    def do_GET(self, body: bool = True) -> None:  # noqa: N802
        if not self._addressed_to_us():
            return self._send(HTTPStatus.MISDIRECTED_REQUEST, b"not this server's name\n",
                              "text/plain", body)
        url = urlsplit(self.path)
        path = url.path
        given = parse_qs(url.query).get("token", [""])[0]
        if not (hmac.compare_digest(given, self.token) or self._cookie_ok()):
            return self._send(HTTPStatus.FORBIDDEN, b"open the address a2rl view printed (it "
                              b"carries the token)\n", "text/plain", body)
        self._set_cookie = bool(given)
        try:
            if path == "/api/status":
                data = json.dumps(self.report.status().to_dict()).encode()
                return self._send(HTTPStatus.OK, data, "application/json", body)
            if path == "/api/stamp":
                page = parse_qs(url.query).get("page", ["/"])[0]
                data = json.dumps({"stamp": self.report.stamp(page)}).encode()
                return self._send(HTTPStatus.OK, data, "application/json", body)
            if path in ("/", "/index.html") or _run_slug(path):
                html = self.report.page(path)
                if html is not None:
                    return self._send(HTTPStatus.OK, html.encode(), "text/html; charset=utf-8",
                                      body)
            else:
                file = self.report.static_file(path)
                if file is not None:
                    return self._send(HTTPStatus.OK, file.read_bytes(), _content_type(file),
                                      body)
        except Exception:  # one page's failure is that page's, never the server's
            log.exception("a2rl view: %s failed", path)
            return self._send(HTTPStatus.INTERNAL_SERVER_ERROR, b"this page failed; see the "
                              b"server's log\n", "text/plain", body)
        self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain", body)

    def _not_allowed(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"read-only\n", "text/plain", True)

    do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed  # noqa: N815

    def _addressed_to_us(self) -> bool:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
        return host in ("127.0.0.1", "localhost")

    def _cookie_ok(self) -> bool:
        jar = SimpleCookie()
        try:
            jar.load(self.headers.get("Cookie") or "")
        except CookieError:
            return False
        morsel = jar.get(COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value, self.token)

    def _send(self, status: HTTPStatus, data: bytes, kind: str, body: bool) -> None:
        self.send_response(status)
        if getattr(self, "_set_cookie", False):
            self.send_header("Set-Cookie", f"{COOKIE}={self.token}; Path=/; HttpOnly; "
                             "SameSite=Strict")
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("a2rl view: " + format, *args)


def _content_type(path: Path) -> str:
    return {".html": "text/html; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
            ".csv": "text/csv; charset=utf-8", ".json": "application/json",
            ".css": "text/css"}.get(path.suffix, "application/octet-stream")


def make_server(results: Path, planned: list[dict[str, Any]] = (),
                port: int = DEFAULT_PORT) -> ThreadingHTTPServer:
    """The live report of ``results`` on 127.0.0.1:``port`` (0: any free port), not started;
    ``server.report`` is its LiveReport (close it after the server) and ``server.url`` the
    address to open, token included."""
    report = LiveReport(results, planned)
    token = secrets.token_urlsafe(18)
    handler = type("LiveHandler", (Handler,), {"report": report, "token": token})
    server = ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    server.report = report  # type: ignore[attr-defined]
    server.url = f"http://{HOST}:{server.server_address[1]}/?token={token}"  # type: ignore
    return server


def main(args: list[str]) -> int:
    import argparse

    from a2rl.analysis.status import where

    parser = argparse.ArgumentParser(
        prog="a2rl view", description="Serve a grid's report on http://127.0.0.1:PORT/ while "
        "it runs (read-only; pages follow the running cells).")
    parser.add_argument("where", nargs="*", help="a results folder (results/quick), or "
                        "grid=NAME and overrides as the workflow was given them")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any free one)")
    opts = parser.parse_args(args)
    try:
        results, planned = where(opts.where)
    except ValueError as err:
        parser.error(str(err))
    server = make_server(results, planned, opts.port)
    print(f"a2rl view: {results} at {server.url} (Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.report.close()
    return 0
