"""The ``sft`` reference agent's TRL script (src/a2rl/agents/sft_train.py): how it fits an
interactive task's long episode chats and its batches into a CPU's memory."""

import importlib.util

import pytest
from transformers import AutoTokenizer

from checkout import REPO

SCRIPT = REPO / "src" / "a2rl" / "agents" / "sft_train.py"


@pytest.fixture(scope="module")
def sft_train():
    spec = importlib.util.spec_from_file_location("sft_train_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def episode_row(steps: int) -> dict:
    """A row as an interactive task writes it: the chat up to a step, then the action."""
    prompt = [{"role": "system", "content": "Text game: reach the goal."},
              {"role": "user", "content": "Goal: put a mug in the fridge.\n\nYou are in a room."}]
    for i in range(steps):
        prompt += [{"role": "assistant", "content": f"go to cabinet {i}"},
                   {"role": "user", "content": f"You arrive at cabinet {i}. It is closed. " * 4}]
    return {"prompt": prompt, "completion": [{"role": "assistant", "content": "open fridge 1"}]}


def tokens(sft_train, tokenizer, example):
    return sft_train.chat_tokens(tokenizer, example["prompt"] + example["completion"])


def test_a_long_chat_keeps_its_goal_and_latest_steps_and_the_action(sft_train, tiny_model):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    row = episode_row(30)
    max_len = tokens(sft_train, tokenizer, episode_row(10))
    fitted, dropped = sft_train.fit_chat(tokenizer, row, max_len)
    assert dropped
    assert fitted["prompt"][:2] == row["prompt"][:2]  # the system turn and the goal
    assert fitted["completion"] == row["completion"]  # the action to learn is never cut
    kept = fitted["prompt"][2:]
    assert kept == row["prompt"][len(row["prompt"]) - len(kept):]  # the latest steps, whole
    assert kept and len(kept) % 2 == 0 and tokens(sft_train, tokenizer, fitted) <= max_len
    # the fewest steps dropped: one more step would not fit
    one_more = {**fitted, "prompt": row["prompt"][:2] + row["prompt"][-len(kept) - 2:]}
    assert tokens(sft_train, tokenizer, one_more) > max_len


def test_a_chat_that_fits_and_a_plain_row_are_left_alone(sft_train, tiny_model):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    row = episode_row(3)
    assert sft_train.fit_chat(tokenizer, row, 4096) == (row, False)
    plain = {"prompt": [{"role": "user", "content": "2+2?"}],
             "completion": [{"role": "assistant", "content": "4"}]}
    assert sft_train.fit_chat(tokenizer, plain, 4) == (plain, False)


@pytest.mark.parametrize(("batch", "max_len", "micro"), [
    (8, 512, 8), (8, 1024, 4), (8, 2048, 2), (8, 8192, 1), (6, 1024, 3), (7, 1024, 1)])
def test_a_step_runs_in_micro_batches_that_fit_the_token_budget(sft_train, batch, max_len,
                                                                micro):
    assert sft_train.micro_batch(batch, max_len) == micro
    assert batch % micro == 0
