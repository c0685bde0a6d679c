"""The GSM8K answer extractor: formats models produce, numeric comparison, real gold answers."""

from __future__ import annotations

import json

import pytest
from a2rl_tasks.gsm8k.extract import (
    extract_answer,
    gold_of,
    is_correct,
    normalize_number,
    score_completion,
)


@pytest.mark.parametrize("completion, expected, method", [
    ("Janet sells 9 eggs for $2 each.\n#### 18", "18", "marker"),
    ("#### $18", "18", "marker"),
    ("####18 dollars", "18", "marker"),
    ("#### **$1,000**", "1000", "marker"),
    ("#### **1,000**", "1000", "marker"),
    ("The answer is 18.", "18", "phrase"),
    ("So the final answer is: $18.00", "18", "phrase"),
    ("Answer: **-5**", "-5", "phrase"),
    ("Thus \\boxed{18}.", "18", "boxed"),
    ("The final answer is $\\boxed{1,000}$", "1000", "boxed"),
    ("$\\boxed{\\frac{7}{2}}$", "3.5", "boxed"),
    ("She makes $18.00 every day.", "18", "last"),
    ("They need 1,000 bricks", "1000", "last"),
    ("The temperature is -5 degrees", "-5", "last"),
    ("It takes 3.5 hours", "3.5", "last"),
    ("The discount is 18%", "18", "last"),
    ("16 - 3 - 4 = 9 eggs, and 9 * 2 = 18", "18", "last"),
    ("He pays 20 - 3", "3", "last"),  # a minus between numbers is not a sign
    ("The answer is \u22127.", "-7", "phrase"),
    ("I do not know.", None, "none"),
    # "answer" as a verb names no answer: the last number is the answer
    ("She has to answer 34-16 = 18 questions on the test, so 18", "18", "last"),
    ("To answer 7 of them takes 3 hours; she answers 2 more. Final: 5", "5", "last"),
    ("Answer = 12", "12", "phrase"),
    ("My final answer 42 stands.", "42", "phrase"),
    ("The answer was 6, but the answer is 7", "7", "phrase"),
])
def test_formats(completion, expected, method):
    got = extract_answer(completion)
    assert (got.value, got.method) == (expected, method)


@pytest.mark.parametrize("completion, expected", [
    # explicit markers win over a later last number
    ("#### 18\nThat is 9 eggs times 2 dollars.", "18"),
    ("The answer is 18. Check: 16 - 3 - 4 = 9, 9 * 2 = 18 dollars for 2 eggs... 7", "18"),
    ("\\boxed{18} because 9 * 2 = 18, not 20", "18"),
    ("#### 18\nThe answer is 20", "18"),
    ("#### Step 1: eggs left\n16 - 3 - 4 = 9\n#### Step 2\n9 * 2 = 18\n#### 18", "18"),
    # a model that goes on to invent the next few-shot example is judged on its own answer
    ("9 * 2 = 18\n#### 18\n\nQuestion: Tom has 5 apples...\nAnswer: 5\n#### 5", "18"),
    ("The answer is 18.\nQuestion: what is 2 + 3?\nThe answer is 5.", "18"),
    ("She earns 18 dollars.\n\nUser: next one please, 7", "18"),
])
def test_markers_beat_later_numbers(completion, expected):
    assert extract_answer(completion).value == expected


@pytest.mark.parametrize("a, b", [("18", "18.0"), ("18", "18.00"), ("$18.00", "18"),
                                  ("1,000", "1000"), ("-5", "-5.0"), ("3.5", "7/2"),
                                  ("18%", "18"), ("0.50", ".5")])
def test_numeric_equality(a, b):
    assert is_correct(a, b) and is_correct(normalize_number(a), b)


@pytest.mark.parametrize("a, b", [("18", "19"), ("1,000", "100"), ("-5", "5"), ("3.5", "3")])
def test_numeric_inequality(a, b):
    assert not is_correct(a, b)


def test_long_decimals_are_not_rounded():
    for completion, gold in (("#### 0.99999999999999999999999999999", "1"),
                             ("The answer is 1.00000000000000000000000000001", "1"),
                             ("#### 18.000000000000000000000000000000000001", "18"),
                             ("#### -0.3333333333333333333333333333333", "-1/3")):
        assert score_completion(completion, gold) == 0.0, completion
        assert extract_answer(completion).value == normalize_number(completion.split()[-1])


def test_long_decimals_keep_every_digit():
    assert normalize_number("0.99999999999999999999999999999") == "0." + "9" * 29
    assert normalize_number("-12.50") == "-12.5" and normalize_number("0.05") == "0.05"


def test_absurdly_long_numbers_are_skipped_not_a_crash():
    digits = "9" * 5000
    assert extract_answer(f"#### {digits}\nso the answer is 12").value == "12"
    assert extract_answer(f"{digits}").method == "none"


def test_nothing_extracted_is_wrong():
    assert not is_correct(None, "0")
    assert score_completion("no idea", "0") == 0.0


def test_gold_of_rejects_malformed_solutions():
    assert gold_of("2 + 2 = 4\n#### 1,080") == "1080"
    with pytest.raises(ValueError, match="####"):
        gold_of("the answer is 4")
    with pytest.raises(ValueError, match="not a number"):
        gold_of("#### four")


@pytest.fixture
def gsm8k_test_items(gsm8k_data):
    with (gsm8k_data.root / "gsm8k" / "test.jsonl").open() as fh:
        items = [json.loads(line) for line in fh]
    assert len(items) == gsm8k_data.test
    return items


def test_real_gold_solutions_score_100(gsm8k_test_items):
    scores = [score_completion(item["answer"], gold_of(item["answer"]))
              for item in gsm8k_test_items]
    assert sum(scores) == len(scores)


def test_real_golds_as_plain_sentences_score_100(gsm8k_test_items):
    """The same solutions without the #### line, ending in "The answer is N." instead."""
    scores = []
    for item in gsm8k_test_items:
        body, tail = item["answer"].rsplit("####", 1)
        scores.append(score_completion(f"{body.strip()}\nThe answer is {tail.strip()}.",
                                       gold_of(item["answer"])))
    assert sum(scores) == len(scores)


def test_shuffled_golds_score_near_zero(gsm8k_test_items):
    golds = [gold_of(item["answer"]) for item in gsm8k_test_items]
    shifted = [item["answer"] for item in gsm8k_test_items[1:] + gsm8k_test_items[:1]]
    accuracy = sum(map(score_completion, shifted, golds)) / len(golds)
    assert accuracy < 0.05
