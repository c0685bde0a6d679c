"""The twin-split verdict (a2rl.grading.twin): flagged past 3 standard errors of the difference
and at least 10 points, never below."""

from a2rl.grading.twin import SEED_FROM, SEED_SPAN, draw_seed, verdict


def test_a_gap_within_the_noise_is_not_flagged():
    # 8 items each: 62.5 vs 37.5 is 25 points, under 3 standard errors of the difference
    assert not verdict(62.5, 17.1, {"score": 37.5, "stderr": 17.1})["flagged"]


def test_a_gap_past_three_standard_errors_is_flagged():
    found = verdict(100.0, 0.0, {"score": 37.5, "stderr": 18.3})
    assert found["flagged"] and found["gap"] == 62.5 and round(found["threshold"], 1) == 54.9


def test_no_flag_under_ten_points_whatever_the_errors():
    assert not verdict(60.0, 0.0, {"score": 51.0, "stderr": 0.0})["flagged"]
    assert verdict(60.0, 0.0, {"score": 49.0, "stderr": 0.0})["flagged"]


def test_twin_seeds_are_far_from_every_configured_seed():
    seeds = {draw_seed() for _ in range(100)}
    assert all(SEED_FROM <= s < SEED_FROM + SEED_SPAN for s in seeds) and len(seeds) > 90
