"""How busy the machine is right now, for anything that times itself (``a2rl doctor``).

torch's CPU kernels split each operation over their threads and wait for the slowest, so on
cores other processes also use, a timing can come out many times too slow (docs/benchmarks.md,
"Sharing the cores": at load 4.8 on 2 cores doctor timed steps 10x slower than idle). ``sample``
reads the load average against the usable cores and, from two reads of /proc a moment apart,
the other processes using CPU (with whether they loaded torch); ``busy`` says whether timings
taken now can be trusted.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

# another process at this share of one core or more counts as competing
BUSY_CPU_SHARE = 0.5


@dataclass
class Competitor:
    pid: int
    name: str
    cpu: float  # cores' worth of CPU over the sample, 1.0 = one core
    threads: int
    torch: bool  # it has libtorch loaded (its threads wait on one another when descheduled)


@dataclass
class Load:
    load1: float
    load5: float
    cores: int
    competitors: list[Competitor] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        """Whether other work already takes a core's worth of what this machine has: the
        1-minute load average is at the usable cores or above, or other processes used at
        least one core during the sample."""
        return self.load1 >= self.cores or sum(c.cpu for c in self.competitors) >= 1.0

    def describe(self) -> str:
        others = ", ".join(f"{c.name} (pid {c.pid}, {c.cpu:.1f} cores, {c.threads} threads"
                           f"{', torch' if c.torch else ''})" for c in self.competitors[:4])
        return (f"load {self.load1:.1f} / {self.load5:.1f} (1 / 5 min) on {self.cores} cores"
                + (f"; other processes using CPU: {others}" if others else ""))

    def to_dict(self) -> dict:
        return asdict(self) | {"busy": self.busy}


def _cpu_ticks(pid: str) -> tuple[int, str, int] | None:
    """(utime + stime ticks, command name, threads) of a process, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12]), name, int(fields[17])


def _has_torch(pid: int) -> bool:
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def sample(seconds: float = 0.5, min_cpu: float = BUSY_CPU_SHARE) -> Load:
    """The load average and the processes (other than this one) that used at least
    ``min_cpu`` of a core over ``seconds``, busiest first. Without /proc (not Linux) only the
    load average."""
    load1, load5, _ = os.getloadavg()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1
    proc = Path("/proc")
    if not proc.is_dir():
        return Load(load1, load5, cores)
    me = os.getpid()
    first = {p.name: _cpu_ticks(p.name) for p in proc.iterdir() if p.name.isdigit()}
    time.sleep(seconds)
    tick = os.sysconf("SC_CLK_TCK")
    competitors = []
    for pid, before in first.items():
        after = _cpu_ticks(pid)
        if before is None or after is None or int(pid) == me:
            continue
        cpu = (after[0] - before[0]) / tick / seconds
        if cpu >= min_cpu:
            competitors.append(Competitor(int(pid), after[1], round(cpu, 2), after[2],
                                          _has_torch(int(pid))))
    competitors.sort(key=lambda c: -c.cpu)
    return Load(load1, load5, cores, competitors)
