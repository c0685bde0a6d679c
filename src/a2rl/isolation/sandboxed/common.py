"""What both sandboxed processes of a code check do first: read the job, limit themselves.

Standard library only: this text runs in the sandbox after ``a2rl/isolation/plaindata.py`` and
before the process's own part (``candidate.py`` or ``checker.py``), as one program.
"""
import json
import os
import resource
import sys


def read_job():
    job = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for name, value in job["rlimits"].items():
        kind = getattr(resource, name)
        hard = resource.getrlimit(kind)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, value))
    return job


def describe(err):
    try:
        name = getattr(err, "remote_type", None) or type(err).__name__
        return str(name)[:100], str(err)[:500]
    except BaseException:
        return "unprintable exception", ""
