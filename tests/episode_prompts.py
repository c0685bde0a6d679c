"""Checks the interactive tasks' tests share on real episodes: append-style prompts only grow,
token for token."""

from __future__ import annotations

from pathlib import Path

SMOLLM2 = Path(__file__).resolve().parents[1] / "resources" / "models" / "smollm2-135m-instruct"


def tokenizers(tiny_model: Path) -> list:
    """The tiny model's ChatML tokenizer, and SmolLM2's (the grid's base model) when set up."""
    from transformers import AutoTokenizer

    names = [tiny_model] + ([SMOLLM2] if (SMOLLM2 / "tokenizer.json").is_file() else [])
    return [AutoTokenizer.from_pretrained(n) for n in names]


def assert_prompts_only_grow(episodes, tokenizer) -> int:
    """Each step's prompt ids (``ChatTokens``) are the last step's plus new tokens, except where
    the chat's window slid (the turns themselves do not extend the last step's), and equal the
    chat template applied to the whole chat. Returns how many steps were checked."""
    from a2rl.task.envs import ChatTokens, encode_prompt, render_chat

    checked = 0
    for ep in episodes:
        chat, last, last_turns = ChatTokens(tokenizer), [], []
        for step in ep.steps:
            turns = step["prompt"]
            assert isinstance(turns, list) and turns[0]["role"] == "system"
            # the admissible actions are in each step's own turn, never in the header
            assert "Available actions" not in turns[0]["content"]
            ids = chat.ids(turns)
            if turns[:len(last_turns)] == last_turns:
                assert ids[:len(last)] == last and len(ids) > len(last)
            assert ids == encode_prompt(tokenizer, render_chat(tokenizer, turns, True))
            last, last_turns = ids, turns
            checked += 1
    return checked
