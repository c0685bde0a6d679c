"""Progress of long steps (a2rl.common.progress): a log that is not a terminal gets a line per
report, a few per step, none for a step that ends quickly; and a real lockstep play reports its
episodes."""

from __future__ import annotations

import io
import time

from a2rl.common.progress import progress


def test_a_log_gets_whole_lines_with_rate_and_estimate_not_redraws():
    log = io.StringIO()
    for _ in progress(range(40), desc="games", unit="game", stream=log, every_s=0.05,
                      quiet_s=0.0):
        time.sleep(0.01)
    text = log.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and all(line.startswith("games:") for line in lines)
    assert "40/40" in lines[-1] and ("game/s" in lines[-1] or "s/game" in lines[-1])
    assert "<" in lines[1]  # elapsed<left: the estimate of the time left
    assert 2 <= len(lines) <= 40 * 0.01 / 0.05 + 4  # about one a report interval, not per item


def test_a_step_that_ends_quickly_writes_nothing_and_the_switch_turns_it_off(monkeypatch):
    log = io.StringIO()
    with progress(total=3, desc="generate", stream=log, quiet_s=5.0) as bar:
        bar.update(3)
    assert log.getvalue() == ""
    monkeypatch.setenv("A2RL_PROGRESS", "0")
    for _ in progress(range(5), desc="x", stream=log, every_s=0.0, quiet_s=0.0):
        time.sleep(0.01)
    assert log.getvalue() == ""


def test_lockstep_play_reports_its_episodes(capfd, monkeypatch):
    """play() (a2rl.task.envs) reports episodes done of the total on stderr."""
    import a2rl.common.progress as module
    from a2rl.task.envs import Observation, RandomPolicy, Step, play

    monkeypatch.setattr(module, "QUIET_S", 0.0)
    monkeypatch.setattr(module, "LOG_EVERY_S", 0.0)

    class Counter:
        """A text environment that ends after three steps."""

        def reset(self, game):
            self.steps = 0
            return Observation(text=f"start {game}", admissible=["go"], goal="go thrice")

        def step(self, action):
            self.steps += 1
            return Step(observation=Observation(text="ok", goal="go thrice", admissible=["go"]),
                        reward=0.0, done=self.steps >= 3, info={})

        def close(self):
            pass

    episodes = play(["a", "b", "c"], Counter, RandomPolicy(0), max_steps=5)
    assert [e.n_steps for e in episodes] == [3, 3, 3]
    err = capfd.readouterr().err
    assert "episodes" in err and "3/3" in err
