"""The child process of reward.passes: reads the job (program, tests, entry point, token, memory
cap) on stdin, caps its own address space, runs the program and the tests in one namespace and
prints the token only after check() returned, so a program that exits early cannot pass.
Run as a script (``python -I reward_child.py``) from an empty folder; standard library only."""

import json
import resource
import sys


def run() -> str:
    job = json.loads(sys.stdin.read())
    token, limit = job.pop("token"), job.pop("memory_mb") * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    space = {"__name__": "__candidate__"}
    exec(compile(job["program"] + "\n\n" + job["test"], "<candidate>", "exec"), space)
    space["check"](space[job["entry_point"]])
    return token


if __name__ == "__main__":
    print(run(), flush=True)
