"""The grader's process, supervised by the harness: started before the agent, restarted when it
dies (at most ``budget.grader_restarts`` times, with a growing pause), stopped after the agent.

The harness holds the grader's listening sockets (the unix socket the sandbox reaches, and
127.0.0.1:<port>) for the whole run and lends them to each grader process, so a restarted grader
answers on the same socket path and port; a request made while it restarts waits in the
socket's queue. A request the dead grader was answering is cut off: the agent's client says
"retry". The restarted grader records the submission it was evaluating as ``interrupted`` (it
does not count; the agent submits it again) rather than evaluating it again by itself: the
submission may be what killed it. Each death and restart is an event (grader_died,
grader_restart) and run.json counts the restarts; one death past the cap ends the agent and
makes the run infra_failed (grader_died). The agent's clock keeps running meanwhile; only an
evaluation the death cut off is given back (excused, as a judge outage is).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

from a2rl.common.clock import BudgetClock
from a2rl.common.events import EventLog
from a2rl.common.layout import RunPaths
from a2rl.grading.grader import recover_inflight
from a2rl.grading.ledger import Ledger
from a2rl.pipeline.grader_process import GraderSpec

START_TIMEOUT_S = 600.0  # loading the task (and its libraries) on a busy machine
STOP_GRACE_S = 60.0  # after the running evaluation's own limit
BACKOFF_S = (1.0, 2.0, 5.0, 10.0)  # pause before the 1st, 2nd, 3rd, later restart


class GraderDied(RuntimeError):
    """The grader's process could not be started, or died more often than allowed."""


def listening_sockets(socket_path: Path) -> tuple[socket.socket, socket.socket]:
    """The unix socket (world-writable: the sandbox's uid connects) and 127.0.0.1:<free port>,
    bound and listening, inheritable by the grader's process."""
    socket_path.unlink(missing_ok=True)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(socket_path))
    socket_path.chmod(0o666)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("127.0.0.1", 0))
    for sock in (unix, tcp):
        sock.listen(128)
        sock.set_inheritable(True)
    return unix, tcp


def describe_exit(code: Optional[int]) -> str:
    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


class GraderProcess:
    """One grader process and the thread reading its reports (ready, the clock)."""

    def __init__(self, spec: GraderSpec, clock: BudgetClock, log: Path):
        read_end, write_end = os.pipe()
        spec.report_fd = write_end
        env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "a2rl.pipeline.grader_process"], stdin=subprocess.PIPE,
                stdout=out, stderr=out, env=env, start_new_session=True,
                pass_fds=(spec.unix_fd, spec.tcp_fd, write_end))
        os.close(write_end)  # the reader sees the end of the pipe when the process ends
        self.clock = clock
        self.ready = threading.Event()
        self._reports = os.fdopen(read_end)
        self._reader = threading.Thread(target=self._read, name="grader-reports", daemon=True)
        self._reader.start()
        self.order(spec.encode().decode())

    def order(self, line: str) -> None:
        """Send one line; a process that is gone no longer reads (its death is seen anyway)."""
        try:
            self.proc.stdin.write(line.encode() if line.endswith("\n") else (line + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def _read(self) -> None:
        for line in self._reports:
            report = json.loads(line)
            if report.get("ready"):
                self.ready.set()
            elif report.get("clock") == "begin_eval":
                self.clock.begin_eval()
            elif report.get("clock") == "end_eval":
                self.clock.end_eval(report["account"])

    def wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.ready.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return False
        return True

    def wait(self, timeout: Optional[float] = None) -> int:
        """Its exit status, once its last report is booked."""
        code = self.proc.wait(timeout)
        self._reader.join()
        self._reports.close()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()


class GraderSupervisor:
    """Starts the grader's process and keeps one running until ``stop``; ``failure`` says why
    it gave up (None while it has not)."""

    def __init__(self, spec: GraderSpec, clock: BudgetClock, events: EventLog, log: Path,
                 max_restarts: int, eval_timeout_s: Optional[float]):
        self.spec = spec
        self.clock = clock
        self.events = events
        self.log = log
        self.max_restarts = max_restarts
        self.eval_timeout_s = eval_timeout_s
        self.restarts = 0
        self.failure: Optional[str] = None
        self._sockets = listening_sockets(spec.socket_path)
        spec.unix_fd, spec.tcp_fd = (s.fileno() for s in self._sockets)
        self.port: int = self._sockets[1].getsockname()[1]
        self._lock = threading.Lock()  # the current process, and whether it is stopping
        self._stopping = False
        self._process: Optional[GraderProcess] = None
        self._live: set[int] = set()  # pids of grader processes not yet waited for
        self._watcher: Optional[threading.Thread] = None

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> GraderSupervisor:
        process = self._launch()
        if process is None:
            self.close_sockets()
            raise GraderDied(f"the grader's process did not start (see {self.log})")
        self._process = process
        self._watcher = threading.Thread(target=self._watch, name="grader-supervisor",
                                         daemon=True)
        self._watcher.start()
        return self

    def _launch(self) -> Optional[GraderProcess]:
        """A grader process that answers, or None (it died or did not answer in time)."""
        self.spec.clock = self.clock.state()
        with self._lock:  # its pid is known to ``pids`` from its start
            process = GraderProcess(self.spec, self.clock, self.log)
            self._live.add(process.proc.pid)
        if process.wait_ready(START_TIMEOUT_S):
            return process
        process.kill()
        self._wait(process)
        return None

    def _wait(self, process: GraderProcess, timeout: Optional[float] = None) -> int:
        code = process.wait(timeout)
        with self._lock:
            self._live.discard(process.proc.pid)
        return code

    def pids(self) -> list[int]:
        """The grader's processes (the running one, one starting): the harness's, never
        ended with the agent's processes."""
        with self._lock:
            return list(self._live)

    def clock_started(self) -> None:
        """The agent's clock started: the grader's process keeps the same one."""
        with self._lock:
            if self._process is not None:
                self._process.order(json.dumps({"start": self.clock.state()["started"]}))

    def _watch(self) -> None:
        """Restart the grader each time it dies, until the cap or ``stop``."""
        while True:
            code = self._wait(self._process)
            if self._stopping and code == 0:
                return
            self._booked_cut_evaluation()
            self.events.emit("grader_died", how=describe_exit(code), restarts=self.restarts,
                             max_restarts=self.max_restarts, after_agent=self._stopping)
            if self._stopping:  # after the agent: nothing to serve; stop() records the rest
                return
            if self.restarts >= self.max_restarts:
                self._give_up(f"the grader's process died ({describe_exit(code)}) after "
                              f"{self.restarts} restart(s); budget.grader_restarts="
                              f"{self.max_restarts}")
                return
            time.sleep(BACKOFF_S[min(self.restarts, len(BACKOFF_S) - 1)])
            self.restarts += 1
            process = None if self._stopping else self._launch()
            with self._lock:
                if process is None:
                    if not self._stopping:
                        self._give_up(f"the grader's process did not start again after dying "
                                      f"({describe_exit(code)}); see {self.log.name}")
                    return
                self._process = process
                if self._stopping:  # stopped while it started: it finishes at once
                    process.order(json.dumps({"stop": True}))
                elif self.clock.started:
                    process.order(json.dumps({"start": self.clock.state()["started"]}))
            self.events.emit("grader_restart", restarts=self.restarts, pid=process.proc.pid)

    def _booked_cut_evaluation(self) -> None:
        """An evaluation the death cut off is given back to the agent, as a judge outage is."""
        if self.clock.evaluating:
            self.clock.end_eval("excused")

    def _give_up(self, reason: str) -> None:
        self.failure = reason
        self.events.emit("grader_failed", reason=reason)

    def stop(self) -> None:
        """Let the running evaluation finish, stop the grader and record a submission it was
        evaluating if it died meanwhile; the sockets are closed."""
        with self._lock:
            self._stopping = True
            if self._process is not None:
                self._process.order(json.dumps({"stop": True}))
        if self._watcher is not None:
            self._watcher.join(None if self.eval_timeout_s is None
                               else self.eval_timeout_s + STOP_GRACE_S)
            if self._watcher.is_alive():  # an evaluation past its own limit: cut it off
                with self._lock:
                    self._process.kill()
                self._watcher.join()
        recover_inflight(Ledger(RunPaths(self.spec.run_root).ledger), self.events)
        self.close_sockets()

    def close_sockets(self) -> None:
        for sock in self._sockets:
            sock.close()
        self.spec.socket_path.unlink(missing_ok=True)

    def __enter__(self) -> GraderSupervisor:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
