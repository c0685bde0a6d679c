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


def test_the_best_of_many_submissions_is_allowed_its_winners_curse():
    """The best of 10 equally good submissions on 20 items passes their common score by about
    1.5 test standard errors; that much more gap is allowed, and only when there were 10."""
    from a2rl.grading.twin import selection_bias

    assert selection_bias(1) == 0.0 and 1.0 < selection_bias(4) < selection_bias(10) < 1.6
    twin = {"score": 40.0, "stderr": 11.0}
    alone = verdict(95.0, 11.0, twin)  # 55 points past 3 x 15.6
    among_ten = verdict(95.0, 11.0, twin, selected_from=10)
    assert alone["flagged"] and not among_ten["flagged"] and among_ten["selected_from"] == 10
    assert abs(among_ten["threshold"] - alone["threshold"] - selection_bias(10) * 11.0) < 1e-3


def test_a_model_that_learnt_the_test_items_is_flagged_among_ten_submissions():
    assert verdict(100.0, 0.0, {"score": 35.0, "stderr": 10.7}, selected_from=10)["flagged"]
