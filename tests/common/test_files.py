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
