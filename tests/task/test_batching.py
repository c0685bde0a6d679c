"""a2rl.task.batching: how prompts are grouped and which prefix caches are kept."""

from __future__ import annotations

import pytest

from a2rl.task.batching import GenerationStats, PrefixCache, buckets, common_prefix_len

LENGTHS = [100, 12, 95, 60, 58, 99, 11, 61, 300, 10]


@pytest.mark.parametrize("budget", [0.0, 0.1, 0.3])
def test_buckets_keep_padding_within_budget(budget):
    groups = buckets(LENGTHS, batch_size=4, pad_budget=budget)
    assert sorted(i for g in groups for i in g) == list(range(len(LENGTHS)))
    for g in groups:
        assert 1 <= len(g) <= 4
        longest = max(LENGTHS[i] for i in g)
        pads = sum(longest - LENGTHS[i] for i in g)
        assert pads <= budget * longest * len(g)
    flat = [LENGTHS[i] for g in groups for i in g]
    assert flat == sorted(LENGTHS, reverse=True), "longest first, as before"


def test_buckets_group_similar_lengths_and_full_budget_gives_fixed_chunks():
    assert [sorted(LENGTHS[i] for i in g) for g in buckets(LENGTHS, 8, 0.1)] == \
        [[300], [95, 99, 100], [58, 60, 61], [10, 11, 12]]
    assert [len(g) for g in buckets(LENGTHS, 4, 1.0)] == [4, 4, 2]
    assert buckets([], 4, 0.1) == []


def test_common_prefix_len():
    assert common_prefix_len([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert common_prefix_len([[1, 2, 3]]) == 3
    assert common_prefix_len([[5], [1]]) == 0
    assert common_prefix_len([]) == 0


def test_prefix_cache_is_bounded_and_finds_the_longest_match():
    cache = PrefixCache(capacity=2)
    cache.put((1, 2), "a")
    cache.put((1, 2, 3), "b")
    assert cache.longest_match([1, 2, 3, 4]) == (1, 2, 3)
    assert cache.longest_match([1, 2, 3]) == (1, 2), "a match leaves a token to generate from"
    assert cache.longest_match([2, 2, 3]) is None
    cache.get((1, 2))  # now the most recently used
    cache.put((7, 8), "c")
    assert len(cache) == 2 and cache.get((1, 2, 3)) is None and cache.get((1, 2)) == "a"


def test_padded_share_counts_only_what_the_prompt_pass_computed():
    stats = GenerationStats(prompt_tokens=100, prefix_reused_tokens=60, padded_tokens=10)
    assert stats.padded_share == pytest.approx(10 / 50)
    assert GenerationStats().as_dict()["padded_share"] == 0.0
