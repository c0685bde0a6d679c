"""Per-episode KV caches for lockstep play with an HF causal LM.

Append-style episode prompts (``a2rl.task.envs``, ``PromptFormat.style="append"``) only grow, so
an episode's step t prompt is its step t-1 prompt plus new tokens. ``EpisodeCaches`` keeps each
live episode's KV cache between steps and runs only the new tokens through the model; a
finished episode's cache is freed (``release``). One step of all live episodes:

- each episode's new tokens but the last run through the model from its own cache, one
  episode at a time (on a CPU a batched prompt pass is no faster, and alone nothing is padded:
  step lengths differ a lot between episodes);
- the caches are then left-padded with zeros to the longest and joined, every padded position
  masked and position ids taken from the mask, so each row sees exactly its own tokens at its
  own positions (as when it is generated alone), and generate runs the last prompt tokens and
  decodes the whole batch together (on a CPU a decoding step costs about as much for a few
  rows as for many, which is where lockstep pays). The joined cache is written into buffers
  reserved for the whole call (prompt and reply), so a decoding step writes its token in
  place: transformers' ``DynamicLayer`` concatenates, copying the whole cache every step, which
  was two thirds of a decoding step at 50 episodes of 1,000 tokens on a CPU
  (``benchmarks/episode_tokens.py``);
- afterwards each row's prompt positions are cut out of the joined cache as its new cache (the
  generated reply is dropped: the next prompt holds the action as the chat writes it, which
  need not be the reply's tokens).

A prompt that does not extend its episode's cached ids (the chat's window slid) starts that
episode's cache again. Greedy decoding gives the same tokens as without the caches up to
floating-point ties (tests/task/test_inference.py and tests/tasks/test_household.py check
that).

Self-contained (the standard library; torch and transformers where the model is): the
interactive tasks copy it into the agent's data folder as ``a2rl_episode_cache.py`` next to
``a2rl_envs.py``, and the reference GRPO script rolls out its policy with ``ModelGenerator``,
so the episodes agents train on and those the grader scores come from the same code.
"""

from __future__ import annotations

import copy
import functools
import time
from dataclasses import dataclass


@dataclass
class _Entry:
    ids: list[int]  # the prompt tokens the cache holds
    layers: list[tuple]  # per layer (keys, values), each [1, heads, len(ids), head_dim]


class EpisodeCaches:
    """The KV caches of live episodes, keyed by the caller's episode key. Counters: ``encoded``
    prompt tokens run through the model, ``reused`` prompt tokens taken from a cache,
    ``rebuilt`` caches dropped because a prompt did not extend them, ``prefill_s`` seconds in
    the prompt pass before generate."""

    def __init__(self, model):
        self.model = model
        self.entries: dict[object, _Entry] = {}
        self.encoded = self.reused = self.rebuilt = 0
        self.peak = 0  # the most caches held at once (live episodes)
        self.prefill_s = 0.0  # the prompt pass of the new tokens but each prompt's last

    def __len__(self) -> int:
        return len(self.entries)

    def counts(self) -> dict[str, float]:
        return {"encoded": self.encoded, "reused": self.reused, "rebuilt": self.rebuilt,
                "live": len(self.entries), "peak": self.peak, "prefill_s": self.prefill_s}

    def take_peak(self) -> int:
        """The most caches held at once since the last call (or since the start), counting
        anew from the caches held now: the peak of one batch of episodes."""
        peak, self.peak = self.peak, len(self.entries)
        return peak

    def release(self, key) -> None:
        """Free a finished episode's cache."""
        self.entries.pop(key, None)

    def generate(self, requests: list[tuple[object, list[int]]], generation_config
                 ) -> list[list[int]]:
        """The generated token ids (end-of-sequence and what follows included, as generate
        returns them) for each (key, prompt ids) request, in order; each episode's cache ends
        up holding its prompt."""
        import torch

        rows = [(key, list(ids)) for key, ids in requests]
        if not all(ids for _, ids in rows):
            raise ValueError("an episode prompt has no tokens")
        # one copy of each episode's cache alive at a time: an episode's old cache is dropped
        # as soon as it is extended, and the extended ones as soon as they are joined (holding
        # on to them made a step's peak four times the live caches, not two)
        started, heads = time.perf_counter(), []
        for key, ids in rows:
            entry = self._reusable(key, ids)
            self.entries.pop(key, None)  # the batch holds it now
            self.reused += len(entry.ids) if entry else 0
            self.encoded += len(ids) - (len(entry.ids) if entry else 0)
            heads.append(self._extended(entry, ids[:-1]))
            del entry
        self.prefill_s += time.perf_counter() - started
        width = max(len(ids) for _, ids in rows)
        pad = generation_config.pad_token_id
        device = self.model.device
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for _, ids in rows],
                                 dtype=torch.long, device=device)
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for _, ids in rows],
                            dtype=torch.long, device=device)
        capacity = width + (generation_config.max_new_tokens or 0)
        kwargs = {"cache": self._joined(heads, width - 1, capacity)} if width > 1 else {}
        heads.clear()
        config = copy.deepcopy(generation_config)
        config.return_dict_in_generate = True
        out = self.model.generate(input_ids=input_ids, attention_mask=mask,
                                  generation_config=config, **kwargs)
        cache = out.cache  # the joined cache, extended by the last tokens and the decoding
        for i, (key, ids) in enumerate(rows):
            keep = mask[i].bool().nonzero().squeeze(-1)  # the row's prompt positions
            # indexing with a tensor copies: each row's cache owns its memory, not the batch's
            self.entries[key] = _Entry(ids, [
                (layer.keys[i:i + 1, :, keep], layer.values[i:i + 1, :, keep])
                for layer in cache.layers])
        self.peak = max(self.peak, len(self.entries))
        return out.sequences[:, width:].tolist()

    def _extended(self, entry: _Entry | None, head: list[int]) -> _Entry | None:
        """``entry`` extended to ``head`` (a prompt but its last token, which generate runs):
        the tokens it lacks run through the model alone, from its cache (on a CPU a batched
        prompt pass is no faster than one prompt at a time, and alone nothing is padded)."""
        import torch
        from transformers import DynamicCache

        done = len(entry.ids) if entry else 0
        if len(head) == done:
            return entry
        cache = DynamicCache(list(entry.layers) if entry else None, config=self.model.config)
        ids = torch.tensor([head[done:]], dtype=torch.long, device=self.model.device)
        self.model.base_model(input_ids=ids, cache=cache, use_cache=True)
        return _Entry(head, [(layer.keys, layer.values) for layer in cache.layers])

    def _reusable(self, key, ids: list[int]) -> _Entry | None:
        """The episode's cache if ``ids`` extends what it holds, else None (and it is
        dropped)."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        if len(entry.ids) < len(ids) and ids[:len(entry.ids)] == entry.ids:
            return entry
        self.entries.pop(key)
        self.rebuilt += 1
        return None

    def _joined(self, entries: list[_Entry | None], width: int, capacity: int):
        """One cache for the batch, in buffers of ``capacity`` positions reserved for the call
        (``_reserved_layer``): each row's keys and values left-padded with zeros (masked
        positions) to ``width``; rows without a cache are all zeros."""
        from transformers import DynamicCache

        shape = next(e for e in entries if e).layers
        reserved = _reserved_layer()
        layers = []
        for layer, (k0, v0) in enumerate(shape):
            heads, dim = k0.shape[1], k0.shape[3]
            keys = k0.new_empty(len(entries), heads, capacity, dim)
            values = v0.new_empty(len(entries), heads, capacity, dim)
            for row, entry in enumerate(entries):
                k, v = entry.layers[layer] if entry else (k0[:, :, :0], v0[:, :, :0])
                gap = width - k.shape[2]
                keys[row, :, :gap] = 0  # masked, but a NaN left in memory would still spread
                values[row, :, :gap] = 0
                keys[row, :, gap:width] = k[0]
                values[row, :, gap:width] = v[0]
            layers.append(reserved(keys, values, width))
        cache = DynamicCache(config=self.model.config)
        cache.layers = layers
        return cache


@functools.cache
def _reserved_layer():
    """transformers' ``DynamicLayer`` over buffers reserved in advance: ``update`` writes the new
    positions in place and hands out views of the filled part (the same values as a
    concatenated cache, so the same logits), and concatenates only past the reservation. Made
    on first use so that importing this module needs no transformers."""
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        def __init__(self, keys, values, filled: int):
            super().__init__()
            self._keys, self._values, self.filled = keys, values, filled
            self.device, self.is_initialized = keys.device, True
            self.keys, self.values = keys[:, :, :filled], values[:, :, :filled]

        def update(self, key_states, value_states, *args, **kwargs):
            end = self.filled + key_states.shape[-2]
            if end > self._keys.shape[-2]:
                return super().update(key_states, value_states, *args, **kwargs)
            self._keys[:, :, self.filled:end] = key_states
            self._values[:, :, self.filled:end] = value_states
            self.filled = end
            self.keys, self.values = self._keys[:, :, :end], self._values[:, :, :end]
            return self.keys, self.values

    return ReservedLayer


def eos_ids(tokenizer, model) -> list[int]:
    """The tokens that end a reply: the model's generation config's end of sequence, the
    tokenizer's, and ChatML's end of turn when the tokenizer has it."""
    ids = []
    values = (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id,
              tokenizer.convert_tokens_to_ids("<|im_end|>"))
    for value in values:
        for i in (value if isinstance(value, (list, tuple)) else [value]):
            if i is not None and i != tokenizer.unk_token_id and int(i) not in ids:
                ids.append(int(i))
    return ids


class ModelGenerator:
    """An HF model and its tokenizer as the generator ``a2rl_envs.GeneratorPolicy`` plays with:
    ``generate`` for rewrite-style prompts (one left-padded batch), ``generate_episodes`` and
    ``release`` for append-style ones (``EpisodeCaches``); greedy at temperature 0, else
    sampled from the whole distribution at ``temperature``."""

    def __init__(self, model, tokenizer, temperature: float = 0.0):
        from transformers import GenerationConfig

        self.model, self.tokenizer, self.temperature = model, tokenizer, temperature
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.eos = eos_ids(tokenizer, model)
        sample = temperature > 0
        self.config = GenerationConfig(
            do_sample=sample, temperature=temperature if sample else None,
            top_k=0 if sample else None, top_p=1.0 if sample else None,
            eos_token_id=self.eos, pad_token_id=tokenizer.pad_token_id)
        self.episodes = EpisodeCaches(model)

    def _config(self, max_new_tokens: int):
        config = copy.deepcopy(self.config)
        config.max_new_tokens = max_new_tokens
        return config

    def _text(self, ids: list[int]) -> str:
        for pos, tok in enumerate(ids):
            if tok in self.eos:
                ids = ids[:pos]
                break
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def generate(self, prompts: list[str], max_new_tokens: int = 24) -> list[str]:
        import torch

        side, self.tokenizer.padding_side = self.tokenizer.padding_side, "left"
        bos = self.tokenizer.bos_token
        ids = [self.tokenizer(p, add_special_tokens=not (bos and p.startswith(bos)))["input_ids"]
               for p in prompts]
        batch = self.tokenizer.pad({"input_ids": ids}, padding=True, return_tensors="pt")
        self.tokenizer.padding_side = side
        with torch.no_grad():
            out = self.model.generate(**batch.to(self.model.device),
                                      generation_config=self._config(max_new_tokens))
        return [self._text(row) for row in out[:, batch["input_ids"].shape[1]:].tolist()]

    def generate_episodes(self, requests: list[tuple[object, list[int]]],
                          max_new_tokens: int = 24) -> list[str]:
        import torch

        with torch.no_grad():
            new = self.episodes.generate(requests, self._config(max_new_tokens))
        return [self._text(ids) for ids in new]

    def release(self, episode) -> None:
        self.episodes.release(episode)
