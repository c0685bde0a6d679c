"""The shared file helpers: the lock that makes concurrent writers of one file set take turns."""

import fcntl
import threading
import time

import pytest

from a2rl.common.files import held_lock


def test_a_held_lock_makes_the_next_writer_wait_until_it_is_released(tmp_path):
    lock = tmp_path / "results" / ".report.lock"
    held, released = threading.Event(), []

    def first_writer():
        with held_lock(lock):
            held.set()
            time.sleep(0.5)
            released.append(time.monotonic())

    writer = threading.Thread(target=first_writer)
    writer.start()
    assert held.wait(10)
    with held_lock(lock):
        acquired = time.monotonic()
    writer.join()
    assert released and acquired >= released[0]


def test_a_lock_is_free_again_after_its_holder_raised(tmp_path):
    lock = tmp_path / ".lock"
    with pytest.raises(RuntimeError):
        with held_lock(lock):
            raise RuntimeError("writer failed")
    with open(lock) as fh:  # a non-blocking try raises BlockingIOError while the lock is held
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)


@pytest.mark.parametrize("build", ["run_leaderboard", "run_report"])
def test_a_user_report_waits_for_a_finishing_cell_that_writes_it(tmp_path, build):
    """`a2rl report` and the workflow's rules write the files a finishing cell writes (its
    report lock held): they take their turn instead of removing plots it is drawing."""
    from a2rl.common.layout import Layout
    from a2rl.config.compose import compose
    from a2rl.pipeline import jobs

    overrides = ["grid=ci", f"paths.root={tmp_path}"]
    lock = Layout.from_paths(compose(overrides).paths).report_lock
    done = threading.Event()
    writer = threading.Thread(target=lambda: (getattr(jobs, build)(overrides, []), done.set()))
    with held_lock(lock):
        writer.start()
        assert not done.wait(1.0)  # held off while the cell's writer holds the lock
    writer.join(60)
    assert done.is_set()
