"""a2rl.task.inference on the tiny model: batching must not change greedy output."""

from __future__ import annotations

import importlib.util

import pytest

from a2rl.config.types import InferenceConfig
from a2rl.task.inference import HFGenerator, format_chat, load_generator

USER_TURNS = [
    "Hi",
    "What is 2+2?",
    "Tom has 3 apples and buys 5 more. How many apples does he have now?",
    "def add(a, b):",
    "x",
    "A farmer sells 12 eggs every morning and 7 every evening. " * 4,
    "12 * 7 =",
]
# A long instructions prefix all prompts share, as an environment's prompt has.
SYSTEM = ("You are playing a text game in a house. Reply with one command such as 'go to "
          "kitchen', 'take apple', 'open fridge' or 'look'. Think briefly first. " * 2)


@pytest.fixture(scope="module")
def generator(tiny_model):
    return load_generator(tiny_model, InferenceConfig(backend="hf", batch_size=4, pad_budget=0.1,
                                                      max_new_tokens=20, torch_threads=1))


def _prompts(tokenizer):
    # chat-formatted prompts plus raw ones, of very different token lengths
    return [format_chat(tokenizer, u) for u in USER_TURNS] + ["plain text prompt", "1 2 3"]


def test_backend_choice(generator):
    assert isinstance(generator, HFGenerator)


def test_batched_greedy_equals_one_at_a_time(generator):
    prompts = _prompts(generator.tokenizer)
    lengths = {len(generator.tokenizer(p).input_ids) for p in prompts}
    assert len(lengths) >= 6, "prompts must differ in length to exercise padding"
    batched = generator.generate(prompts)
    single = [generator.generate([p])[0] for p in prompts]
    assert batched == single
    assert all(batched), "the random tiny model should still produce text"
    assert len(set(batched)) > 1


def test_batched_equals_single_when_rows_stop_early(tiny_model):
    """Rows that hit end-of-sequence at different steps keep the same text as alone."""
    gen = load_generator(tiny_model, InferenceConfig(backend="hf", batch_size=8,
                                                     max_new_tokens=20))
    prompts = _prompts(gen.tokenizer)
    full = gen.generate(prompts)
    # Declare a token the model emits mid-way in some completion to be end-of-sequence.
    ids = gen.tokenizer(full[1], add_special_tokens=False).input_ids
    gen.eos_ids = [ids[len(ids) // 2]]
    batched = gen.generate(prompts)
    single = [gen.generate([p])[0] for p in prompts]
    assert batched == single
    assert any(len(b) < len(f) for b, f in zip(batched, full))


def test_shared_prefix_greedy_equals_one_at_a_time(tiny_model):
    """The prefix path (cached KV of the shared instructions, copied per batch) gives the texts
    that plain one-at-a-time generation gives, and keeps its cached prefix unchanged."""
    cfg = InferenceConfig(backend="hf", batch_size=4, max_new_tokens=16, torch_threads=1,
                          pad_budget=0.1, prefix_cache=True)
    gen = load_generator(tiny_model, cfg)
    prompts = [format_chat(gen.tokenizer, u, system=SYSTEM) for u in USER_TURNS]
    batched = gen.generate(prompts)
    assert gen.stats.prefix_reused_tokens >= 30 * len(prompts), gen.stats
    assert gen.stats.padded_share <= 0.5
    (prefix,) = list(gen.prefixes._entries)
    assert gen.prefixes.get(prefix).get_seq_length() == len(prefix)
    alone = [gen.generate([p])[0] for p in prompts]  # each from the cached prefix
    assert gen.stats.prefix_reused_tokens >= 2 * 30 * len(prompts)
    assert gen.prefixes.get(prefix).get_seq_length() == len(prefix)
    plain = load_generator(tiny_model, InferenceConfig(
        backend="hf", batch_size=1, max_new_tokens=16, torch_threads=1, prefix_cache=False))
    single = [plain.generate([p])[0] for p in prompts]
    assert plain.stats.prefix_reused_tokens == 0
    assert batched == single and alone == single
    assert len(set(single)) > 1


def test_length_buckets_split_the_prompt_pass_not_the_decoding(tiny_model):
    """With pad_budget below 1 a batch's prompt pass runs in several length buckets, padding
    less, and the batch is still decoded once; the texts are one-at-a-time generation's, with
    and without the shared-prefix cache."""
    prompts = _prompts(load_generator(tiny_model, InferenceConfig(backend="hf")).tokenizer)
    plain = load_generator(tiny_model, InferenceConfig(backend="hf", batch_size=1,
                                                       max_new_tokens=16, torch_threads=1))
    single = [plain.generate([p])[0] for p in prompts]
    for prefix_cache in (False, True):
        whole = load_generator(tiny_model, InferenceConfig(
            backend="hf", batch_size=len(prompts), max_new_tokens=16, torch_threads=1,
            pad_budget=1.0, prefix_cache=prefix_cache))
        bucketed = load_generator(tiny_model, InferenceConfig(
            backend="hf", batch_size=len(prompts), max_new_tokens=16, torch_threads=1,
            pad_budget=0.1, prefix_cache=prefix_cache))
        assert bucketed.generate(prompts) == whole.generate(prompts) == single
        assert bucketed.stats.batches == whole.stats.batches == 1
        assert bucketed.stats.prefill_batches >= 3 > whole.stats.prefill_batches == 1
        assert bucketed.stats.padded_share <= 0.1 < whole.stats.padded_share
        assert bucketed.stats.new_tokens == whole.stats.new_tokens


def test_old_grouping_gives_the_same_texts(generator, tiny_model):
    """Fixed chunks without a prefix cache (the grouping before length buckets) agree with the
    bucketed path and pad more."""
    old = load_generator(tiny_model, InferenceConfig(backend="hf", batch_size=4,
                                                     max_new_tokens=20, torch_threads=1,
                                                     pad_budget=1.0, prefix_cache=False))
    prompts = _prompts(generator.tokenizer)
    before = generator.stats.padded_tokens
    assert generator.generate(prompts) == old.generate(prompts)
    assert old.stats.padded_tokens > generator.stats.padded_tokens - before


def test_order_and_max_new_tokens(generator):
    prompts = _prompts(generator.tokenizer)
    shorter = generator.generate(prompts[::-1], max_new_tokens=3)
    longer = generator.generate(prompts[::-1])
    for s, long_text in zip(shorter, longer):
        assert long_text.startswith(s.rstrip("\ufffd"))
    assert generator.generate([]) == []


def test_sampling_uses_temperature(tiny_model):
    gen = load_generator(tiny_model, InferenceConfig(backend="hf", temperature=1.0,
                                                     max_new_tokens=12))
    prompt = format_chat(gen.tokenizer, "Hi")
    outs = {gen.generate([prompt])[0] for _ in range(4)}
    assert len(outs) > 1


def test_format_chat_with_template(generator):
    text = format_chat(generator.tokenizer, "What is 2+2?")
    assert text == "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    with_system = format_chat(generator.tokenizer, "Hi", system="Be brief.")
    assert with_system.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
    assert with_system.endswith("<|im_start|>assistant\n")


def test_format_chat_without_template():
    class Plain:
        chat_template = None

    assert format_chat(Plain(), "What is 2+2?") == "What is 2+2?"
    assert format_chat(Plain(), "Q", system="S") == "S\n\nQ"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_vllm_backend_without_vllm_is_a_clear_error(tiny_model):
    with pytest.raises(RuntimeError, match="vllm is not installed"):
        load_generator(tiny_model, InferenceConfig(backend="vllm"))


def test_episode_caches_reuse_extend_rebuild_and_free(generator):
    """Per-episode KV caches (generate_episodes): an episode whose prompt extends its last one
    encodes only the new tokens; one whose prompt does not (its chat's window slid) is encoded
    afresh; either way the text equals plain generation of the same prompt; release frees."""
    from a2rl.task.envs import ChatTokens, encode_prompt, render_chat

    tok = generator.tokenizer
    chats = {k: [{"role": "system", "content": SYSTEM}, {"role": "user", "content": u}]
             for k, u in enumerate(USER_TURNS[:3])}
    encoders = {k: ChatTokens(tok) for k in chats}
    generator.reset()
    for step in range(3):
        if step == 2:  # episode 0's window slides: its oldest pair goes
            chats[0] = chats[0][:2] + chats[0][4:]
        requests = [(k, encoders[k].ids(chat)) for k, chat in chats.items()]
        texts = generator.generate_episodes(requests)
        assert texts == [generator.generate([render_chat(tok, chat, True)])[0]
                         for chat in chats.values()]
        assert [ids for _, ids in requests] == [encode_prompt(tok, render_chat(tok, c, True))
                                                for c in chats.values()]
        for k in chats:
            chats[k] = chats[k] + [{"role": "assistant", "content": f"go {step}"},
                                   {"role": "user", "content": f"room {step} " * (k + 1)}]
    counts = generator.episodes.counts()
    assert counts["rebuilt"] == 1 and counts["live"] == 3 and encoders[0].rebuilds == 1
    assert counts["reused"] > counts["encoded"] / 3
    for k in chats:
        generator.release(k)
    assert len(generator.episodes) == 0


def test_live_episodes_bound_the_caches_held_and_keep_the_actions(generator, monkeypatch):
    """Lockstep play with the model at most two episodes at once (inference.live_episodes):
    the same actions as every episode at once, and never more than two caches held."""
    from a2rl.task.envs import GeneratorPolicy, Observation, Step, TextEnv, play

    class Rooms(TextEnv):
        def reset(self, game):
            self.game, self.n = game, 0
            return Observation(f"You are in room {game}.", f"leave room {game}",
                               ["go north", "go south", f"open door {game}"], {})

        def step(self, action):
            self.n += 1
            return Step(Observation(f"After {action}: room {self.game}, turn {self.n}.",
                                    "", ["go north", "go south", "look"], {}),
                        0.0, False, {"won": False})

    held, play_caches = [], generator.generate_episodes

    def counting(requests, max_new_tokens=24):
        texts = play_caches(requests, max_new_tokens)
        held.append(len(generator.episodes))  # every cache held after the call
        return texts

    games = [str(g) for g in range(5)]
    generator.reset()
    at_once = play(games, Rooms, GeneratorPolicy(generator, 6), max_steps=3)
    monkeypatch.setattr(generator, "generate_episodes", counting)
    bounded = play(games, Rooms, GeneratorPolicy(generator, 6), max_steps=3, live=2)
    assert [[s["action"] for s in e.steps] for e in bounded] == \
        [[s["action"] for s in e.steps] for e in at_once]
    assert max(held) == 2 and len(generator.episodes) == 0


def test_joined_episode_caches_decode_in_place(generator):
    """The batch's joined cache lives in buffers reserved for the prompt and the reply: a
    decoding step writes into them (no copy of the cache per step) and the model sees the same
    keys, values and logits as with transformers' concatenating cache."""
    import torch
    from transformers import DynamicCache

    model, caches = generator.model, generator.episodes
    prompts = [[5, 9, 14, 3, 8, 21, 4], [7, 3, 30]]  # of different lengths: row 1 is padded
    heads = [caches._extended(None, ids) for ids in prompts]
    width, new = max(len(ids) for ids in prompts), 4
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts])
    concatenating = DynamicCache([(layer.keys.clone(), layer.values.clone())
                                  for layer in caches._joined(heads, width, width).layers],
                                 config=model.config)
    runs = []
    for cache in (caches._joined(heads, width, width + new), concatenating):
        logits, step_mask = [], mask
        with torch.no_grad():
            for token in range(new):
                step_mask = torch.cat([step_mask, torch.ones(2, 1, dtype=torch.long)], dim=1)
                out = model(input_ids=torch.full((2, 1), 11 + token), attention_mask=step_mask,
                            position_ids=step_mask.sum(-1, keepdim=True) - 1, cache=cache)
                logits.append(out.logits)
        runs.append((cache, torch.stack(logits)))
    (reserved, logits), (plain, plain_logits) = runs
    first = reserved.layers[0]
    assert first.keys.data_ptr() == first._keys.data_ptr()  # a view of the reserved buffer
    assert first.keys.shape[2] == width + new == plain.layers[0].keys.shape[2]
    assert torch.equal(first.keys, plain.layers[0].keys)
    assert torch.equal(logits, plain_logits)
