"""The grader process's orders from the harness (a2rl.pipeline.grader_process.follow_orders):
a stop lets it finish the running evaluation; lines that end without one mean the harness is
gone, and the grader exits at once instead of evaluating for no one."""

import json

from a2rl.common.clock import BudgetClock
from a2rl.pipeline.grader_process import follow_orders


def test_a_stop_order_is_told_apart_from_a_harness_that_is_gone():
    clock = BudgetClock(100.0)
    start = json.dumps({"start": 5.0})
    assert follow_orders(iter([start, json.dumps({"stop": True}), start]), clock) is True
    assert clock.started
    assert follow_orders(iter([start]), BudgetClock(100.0)) is False  # the pipe ended
    assert follow_orders(iter([]), BudgetClock(100.0)) is False
