"""Materialising in a child (a2rl.grading.loading) from a process whose main is a script that
only runs where it was started, as a Snakemake job's is: the child must not import it again."""

import subprocess
import sys

from checkout import child_env

# a job script as Snakemake runs one: runpy with a global only Snakemake sets
JOB = r'''
import runpy, sys
script = sys.argv[1] + "/job.py"
open(script, "w").write("""
job = snakemake  # noqa: F821
import sys
from pathlib import Path
from a2rl.grading.loading import LoadLimits, materialize_limited
model = Path(sys.argv[2])
print("loaded", materialize_limited(model, model, Path(sys.argv[1]) / "out",
                                    LoadLimits(60, 2**30)) == model)
""")
runpy.run_path(script, init_globals={"snakemake": object()}, run_name="__main__")
'''


def test_a_job_scripts_main_is_not_imported_again_in_the_child(tmp_path, tiny_model):
    done = subprocess.run([sys.executable, "-c", JOB, str(tmp_path), str(tiny_model)],
                          capture_output=True, text=True, env=child_env(), timeout=300)
    assert "loaded True" in done.stdout, done.stderr[-2000:]


def test_an_allocation_refused_inside_a_library_is_the_memory_cap():
    """Past the cap, what fails depends on the allocator: Python's MemoryError, or safetensors'
    refused mmap (RuntimeError "Cannot allocate memory (12)", seen in CI) that the loader wraps
    as a loading error. Both read as the memory cap; another loading error does not."""
    from a2rl.grading.loading import ran_out_of_memory
    from a2rl.models.submission import InvalidSubmission

    def wrapped(err):
        try:
            try:
                raise err
            except Exception as inner:
                raise InvalidSubmission(f"cannot load model from x: {inner}") from inner
        except InvalidSubmission as outer:
            return outer

    mmap = RuntimeError("unable to mmap 811960 bytes from file <m>: Cannot allocate memory (12)")
    assert ran_out_of_memory(wrapped(mmap))
    assert ran_out_of_memory(wrapped(MemoryError()))
    assert ran_out_of_memory(wrapped(OSError(12, "Cannot allocate memory")))
    assert not ran_out_of_memory(wrapped(ValueError("weight shapes do not match")))
