"""One interface for "generate completions for these prompts".

``load_generator(model_dir, cfg)`` returns a Generator: HF transformers batched generation with
left padding (CPU and GPU) or vLLM when ``cfg.backend`` is ``vllm`` (or ``auto`` with vLLM and a
GPU present). Greedy unless ``cfg.temperature > 0``.

Both backends tokenize prompts the same way (``encode_prompt``) and stop at the model's end of
sequence tokens, so they differ only in numerics.
"""

from __future__ import annotations

import copy
import gc
import importlib.util
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from a2rl.common.hardware import resolve_precision, torch_dtype
from a2rl.common.progress import progress
from a2rl.config.types import InferenceConfig
from a2rl.task import batching
from a2rl.task.prompts import encode_prompt, render_chat

__all__ = ["Generator", "encode_prompt", "format_chat", "load_generator"]

# vLLM shares the GPU with the agent's own training: take a bounded slice, not vLLM's default 90%.
VLLM_GPU_MEMORY_UTILIZATION = 0.35


class Generator(Protocol):
    tokenizer: object

    def generate(self, prompts: list[str], max_new_tokens: int | None = None) -> list[str]:
        """Completions (new text only, special tokens stripped) for already-formatted prompts,
        in prompt order."""

    def generate_episodes(self, requests: list[tuple[int, list[int]]],
                          max_new_tokens: int | None = None) -> list[str]:
        """Completions for (episode, prompt token ids) pairs whose ids only grow from one call
        to the next (append-style episode prompts): what an episode's earlier prompts computed
        is reused (HF: its KV cache; vLLM: prefix caching)."""

    def release(self, episode: int) -> None:
        """Free what is kept for a finished episode."""


def format_chat(tokenizer, user: str, system: str | None = None) -> str:
    """The prompt string for one user turn: the tokenizer's chat template when it has one
    (with the generation prompt added), else the plain text."""
    messages = [{"role": "system", "content": system}] if system else []
    return render_chat(tokenizer, messages + [{"role": "user", "content": user}], True)


def chat_replies(model_dir: Path, cfg: InferenceConfig, turns: list[tuple[str, str | None]],
                 max_new_tokens: int | None = None) -> tuple[list[str], list[str]]:
    """Load the model with the backend ``cfg`` asks for, format each (user, system) turn with
    its chat template and generate one reply each; returns the prompts and the replies, in
    order, and releases the generator (a vLLM engine holds the GPU until closed)."""
    generator = load_generator(Path(model_dir), cfg)
    try:
        prompts = [format_chat(generator.tokenizer, user, system) for user, system in turns]
        return prompts, generator.generate(prompts, max_new_tokens=max_new_tokens)
    finally:
        close = getattr(generator, "close", None)
        if close:
            close()


def load_generator(model_dir: Path, cfg: InferenceConfig) -> Generator:
    """The generator ``cfg.backend`` asks for (``auto``: vLLM when installed and a GPU is
    present, else HF transformers)."""
    if cfg.backend == "vllm":
        if importlib.util.find_spec("vllm") is None:
            raise RuntimeError("inference.backend=vllm but vllm is not installed; install it "
                               "(pip install vllm, needs a CUDA GPU) or use backend=hf or auto")
        return VLLMGenerator(model_dir, cfg)
    if cfg.backend == "auto" and importlib.util.find_spec("vllm") is not None:
        import torch

        if torch.cuda.is_available():
            return VLLMGenerator(model_dir, cfg)
    return HFGenerator(model_dir, cfg)


def full_attention_only(config) -> bool:
    """Whether every layer of the model attends to the whole sequence: the bucketed prompt pass
    joins plain KV caches, which a sliding-window layer's would not be."""
    from transformers.cache_utils import get_layer_types_and_kwargs

    types, _ = get_layer_types_and_kwargs(config.get_text_config(decoder=True))
    return all(t == "full_attention" for t in types)


def _eos_ids(tokenizer, generation_config) -> list[int]:
    ids = []
    for value in (getattr(generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if value is None:
            continue
        for i in (value if isinstance(value, (list, tuple)) else [value]):
            if i is not None and int(i) not in ids:
                ids.append(int(i))
    return ids


class HFGenerator:
    """Batched HF transformers generation, so that batched greedy output equals one-at-a-time
    output: prompts sorted by length and decoded in chunks of ``cfg.batch_size``, each laid out
    as [prefix][pads][rest] with the pads masked and position ids from the mask. The token
    prefix all prompts of a call share is run through the model once and its KV cache kept
    (``cfg.prefix_cache``) and copied into each batch. With ``cfg.pad_budget`` below 1 a batch's
    prompt pass runs in length buckets that pad at most that share, and their KV caches are
    joined for one decoding of the whole batch (on a CPU a decoding step costs about as much
    for a few rows as for a batch, so the decoding is never split). ``stats`` counts prompt,
    padded and generated tokens and the seconds of the prompt pass and the decoding."""

    def __init__(self, model_dir: Path, cfg: InferenceConfig):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

        if cfg.torch_threads > 0:
            torch.set_num_threads(cfg.torch_threads)
        self.cfg = cfg
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.precision = resolve_precision(cfg.precision, self.device.type)
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(model_dir,
                                                          dtype=torch_dtype(self.precision))
        self.model.to(self.device).eval()
        self.eos_ids = _eos_ids(self.tokenizer, self.model.generation_config)
        # generate() fills every unset option from model.generation_config; a submission's
        # generation_config.json must not change the decoding (only which tokens end a text).
        self.model.generation_config = GenerationConfig(
            eos_token_id=self.eos_ids or None, pad_token_id=self.tokenizer.pad_token_id,
            bos_token_id=self.model.generation_config.bos_token_id)
        self._clock = _ForwardClock(self.model, self.device)
        self._full_attention = full_attention_only(self.model.config)
        self.reset()

    def _generation_config(self, max_new_tokens: int):
        from transformers import GenerationConfig

        sample = self.cfg.temperature > 0
        return GenerationConfig(
            max_new_tokens=max_new_tokens, do_sample=sample,
            temperature=self.cfg.temperature if sample else None,
            top_k=0 if sample else None, top_p=1.0 if sample else None,
            eos_token_id=self.eos_ids or None, pad_token_id=self.tokenizer.pad_token_id,
            bos_token_id=self.model.generation_config.bos_token_id)

    def generate(self, prompts: list[str], max_new_tokens: int | None = None) -> list[str]:
        import torch

        max_new_tokens = max_new_tokens or self.cfg.max_new_tokens
        encoded = [encode_prompt(self.tokenizer, p) for p in prompts]
        gen_cfg = self._generation_config(max_new_tokens)
        results: list[str | None] = [None] * len(prompts)
        with progress(total=len(prompts), desc="generate", unit="prompt",
                      leave=False) as bar, \
                torch.inference_mode():
            prefix = self._shared_prefix(encoded) if self.cfg.prefix_cache else ()
            lengths = [len(e) - len(prefix) for e in encoded]
            for idx in batching.buckets(lengths, self.cfg.batch_size, 1.0):
                new = self._generate_batch([encoded[i] for i in idx], prefix, gen_cfg)
                for i, ids in zip(idx, new):
                    results[i] = self._decode(ids)
                bar.update(len(idx))
        return [r if r is not None else "" for r in results]

    def generate_episodes(self, requests: list[tuple[int, list[int]]],
                          max_new_tokens: int | None = None) -> list[str]:
        """Append-style episode prompts in one batch, each episode from its own KV cache
        (``episode_cache.EpisodeCaches``): only the tokens added since its last step are
        encoded."""
        import torch

        if not requests:
            return []
        gen_cfg = self._generation_config(max_new_tokens or self.cfg.max_new_tokens)
        before = self.episodes.counts()
        with torch.inference_mode(), self._clock.timing():
            new = self.episodes.generate(requests, gen_cfg)
        after = self.episodes.counts()
        self.stats.batches += 1
        self.stats.prefill_batches += 1
        self.stats.prompts += len(requests)
        self.stats.prompt_tokens += sum(len(ids) for _, ids in requests)
        self.stats.prefix_reused_tokens += after["reused"] - before["reused"]
        self.stats.prefill_s += after["prefill_s"] - before["prefill_s"]
        return [self._decode(ids) for ids in new]

    def release(self, episode: int) -> None:
        self.episodes.release(episode)

    def _shared_prefix(self, encoded: list[list[int]]) -> tuple[int, ...]:
        """The token prefix whose cached KV this call's batches start from: the prefix all its
        prompts share (at least one token of each left over to generate from), else the longest
        cached prefix they all start with; computed and cached when new. One prompt alone
        never makes a new entry: nothing says its prefix will come again."""
        if not encoded:
            return ()
        shared = min(batching.common_prefix_len(encoded), min(len(e) for e in encoded) - 1)
        if len(encoded) > 1 and shared >= batching.MIN_PREFIX_TOKENS:
            prefix = tuple(encoded[0][:shared])
            if self.prefixes.get(prefix) is None:
                self.prefixes.put(prefix, self._prefix_kv(prefix))
            return prefix
        cached = self.prefixes.longest_match(encoded[0])
        if cached and all(tuple(e[:len(cached)]) == cached and len(e) > len(cached)
                          for e in encoded):
            self.prefixes.get(cached)
            return cached
        return ()

    def _prefix_kv(self, prefix: tuple[int, ...]):
        """The KV cache of ``prefix`` alone (batch of one), from one forward pass."""
        import torch

        ids = torch.tensor([prefix], dtype=torch.long, device=self.device)
        with self._clock.timing():
            out = self.model(input_ids=ids, use_cache=True)
        self.stats.prefix_computed_tokens += len(prefix)
        return out.cache

    def _generate_batch(self, rows: list[list[int]], prefix: tuple[int, ...],
                        gen_cfg) -> list[list[int]]:
        """Generated ids per row of one batch: [prefix][pads][rest] with the pads masked. The
        cache generate starts from holds the prefix's KV (a copy of the cached one, repeated per
        row: the cached one stays as is) or, with length buckets, every row's prompt but its last
        token (``_prefill_buckets``)."""
        import torch

        cut = len(prefix)
        rests = [r[cut:] for r in rows]
        width = max(len(r) for r in rests)
        pad = self.tokenizer.pad_token_id
        ids = [list(prefix) + [pad] * (width - len(r)) + r for r in rests]
        mask = [[1] * cut + [0] * (width - len(r)) + [1] * len(r) for r in rests]
        self.stats.batches += 1
        self.stats.prompts += len(rows)
        self.stats.prompt_tokens += sum(len(r) for r in rows)
        self.stats.prefix_reused_tokens += cut * len(rows)
        kwargs = {}
        if self.cfg.pad_budget < 1 and self._full_attention and len(rows) > 1 and \
                min(map(len, rests)) > 1:
            kwargs["cache"] = self._prefill_buckets(rests, prefix, width)
        else:
            self.stats.prefill_batches += 1
            self.stats.padded_tokens += sum(width - len(r) for r in rests)
            if cut:
                kwargs["cache"] = self._prefix_copy(prefix, len(rows))
        with self._clock.timing():
            out = self.model.generate(
                input_ids=torch.tensor(ids, dtype=torch.long, device=self.device),
                attention_mask=torch.tensor(mask, dtype=torch.long, device=self.device),
                generation_config=gen_cfg, **kwargs)
        return out[:, cut + width:].tolist()

    def _prefix_copy(self, prefix: tuple[int, ...], rows: int):
        """A copy of ``prefix``'s cached KV, repeated for ``rows`` rows."""
        past = copy.deepcopy(self.prefixes.get(prefix))
        past.batch_repeat_interleave(rows)
        return past

    def _prefill_buckets(self, rests: list[list[int]], prefix: tuple[int, ...], width: int):
        """The KV cache of every row's prompt but its last token, as generate expects it for the
        whole batch ([prefix][pads up to ``width``][rest]), computed in length buckets that pad
        at most ``cfg.pad_budget``: a bucket's gap to ``width`` is zeros at masked positions."""
        import torch
        from transformers import DynamicCache

        heads = [r[:-1] for r in rests]
        groups = batching.buckets([len(h) for h in heads], len(heads), self.cfg.pad_budget)
        # the rows come longest first (generate sorts them), so the buckets are consecutive
        # rows and their caches join in row order
        if [i for g in groups for i in g] != list(range(len(heads))):
            raise ValueError("_prefill_buckets needs its rows longest first")
        parts = [self._prefill_bucket([heads[i] for i in g], prefix, width - 1) for g in groups]
        return DynamicCache([tuple(torch.cat(tensors) for tensors in zip(*layer))
                             for layer in zip(*parts)], config=self.model.config)

    def _prefill_bucket(self, heads: list[list[int]], prefix: tuple[int, ...], full: int):
        """One bucket's prompt pass from the prefix's cached KV: per layer (keys, values) laid
        out as [prefix][zeros up to ``full``][pads][head] (the zeros and pads are masked)."""
        import torch
        from transformers import DynamicCache

        cut, longest = len(prefix), max(len(h) for h in heads)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (longest - len(h)) + h for h in heads], device=self.device)
        mask = torch.tensor([[1] * cut + [0] * (longest - len(h)) + [1] * len(h) for h in heads],
                            device=self.device)
        past = self._prefix_copy(prefix, len(heads)) if cut else \
            DynamicCache(config=self.model.config)
        started = self._clock.now()
        self.model.base_model(input_ids=ids, attention_mask=mask, cache=past, use_cache=True,
                              position_ids=(mask.cumsum(-1) - 1).clamp(min=0)[:, cut:])
        self.stats.prefill_s += self._clock.now() - started
        self.stats.prefill_batches += 1
        self.stats.padded_tokens += sum(longest - len(h) for h in heads)

        def widened(t):
            gap = t.new_zeros(t.shape[0], t.shape[1], full - longest, t.shape[3])
            return torch.cat([t[:, :, :cut], gap, t[:, :, cut:]], dim=2)

        return [(widened(layer.keys), widened(layer.values)) for layer in past.layers]

    def reset(self) -> None:
        """Zero the counters and drop the cached prefixes and episodes (between
        measurements)."""
        from a2rl.task.episode_cache import EpisodeCaches

        self.stats = self._clock.stats = batching.GenerationStats()
        self.prefixes = batching.PrefixCache()
        self.episodes = EpisodeCaches(self.model)

    def _decode(self, ids: list[int]) -> str:
        """New text up to (not including) the first end-of-sequence token."""
        for pos, tok in enumerate(ids):
            if tok in self.eos_ids:
                ids = ids[:pos]
                break
        self.stats.new_tokens += len(ids)
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def close(self) -> None:
        """Free the model's memory (GPU memory included)."""
        import torch

        self.model = None
        self.prefixes = batching.PrefixCache()
        self.episodes = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


class _ForwardClock:
    """Splits generation time into the prompt pass (a generate call's first forward, and a
    prefix's own pass) and the decoding steps, with hooks on the model's forward."""

    def __init__(self, model, device):
        self.stats, self.device = batching.GenerationStats(), device
        self._first = False
        self._started = 0.0
        model.register_forward_pre_hook(self._before)
        model.register_forward_hook(self._after)

    def now(self) -> float:
        if self.device.type == "cuda":
            import torch
            torch.cuda.synchronize()
        return time.perf_counter()

    def _before(self, module, args):
        self._started = self.now()

    def _after(self, module, args, output):
        elapsed = self.now() - self._started
        if self._first:
            self.stats.prefill_s += elapsed
            self._first = False
        else:
            self.stats.decode_s += elapsed

    @contextmanager
    def timing(self):
        """Time the forward passes inside: the first is the prompt pass, the rest decoding."""
        self._first = True
        yield


class VLLMGenerator:
    """vLLM offline generation (GPU). Prompts go in as token ids from ``encode_prompt`` so the
    tokenization matches the HF backend."""

    def __init__(self, model_dir: Path, cfg: InferenceConfig):
        try:
            from vllm import LLM
        except ImportError as err:
            raise RuntimeError(
                f"inference.backend=vllm but vllm cannot be imported: {err}") from err
        self.cfg = cfg
        self.precision = resolve_precision(cfg.precision, "cuda")
        self.llm = LLM(model=str(model_dir), tokenizer=str(model_dir), seed=0,
                       dtype={"bf16": "bfloat16", "fp32": "float32"}[self.precision],
                       gpu_memory_utilization=VLLM_GPU_MEMORY_UTILIZATION, enforce_eager=True,
                       # the instructions every prompt of an evaluation starts with, and
                       # each append-style episode's earlier steps, computed once
                       enable_prefix_caching=True)
        self.tokenizer = self.llm.get_tokenizer()

    def generate(self, prompts: list[str], max_new_tokens: int | None = None) -> list[str]:
        return self._generate_ids([encode_prompt(self.tokenizer, p) for p in prompts],
                                  max_new_tokens)

    def generate_episodes(self, requests: list[tuple[int, list[int]]],
                          max_new_tokens: int | None = None) -> list[str]:
        """The same token ids the HF backend gets; vLLM's automatic prefix caching finds each
        episode's earlier blocks itself (``enable_prefix_caching``), so nothing is kept here."""
        return self._generate_ids([ids for _, ids in requests], max_new_tokens)

    def release(self, episode: int) -> None:
        """Nothing to free: vLLM evicts cached blocks itself."""

    def _generate_ids(self, prompts: list[list[int]], max_new_tokens: int | None) -> list[str]:
        from vllm import SamplingParams

        if not prompts:
            return []
        params = SamplingParams(temperature=self.cfg.temperature,
                                max_tokens=max_new_tokens or self.cfg.max_new_tokens,
                                skip_special_tokens=True)
        outputs = self.llm.generate([{"prompt_token_ids": ids} for ids in prompts], params,
                                    use_tqdm=True)
        return [o.outputs[0].text for o in outputs]

    def close(self) -> None:
        """Free the engine and its GPU memory."""
        import torch

        self.llm = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
