"""How the HF generator groups prompts and what it counts while generating.

Pure helpers on token id lists, so the grouping rules are testable without a model:
``buckets`` groups length-sorted prompts so that left-padding stays within a budget,
``common_prefix_len`` finds the token prefix a batch shares (its KV cache is computed once), and
``PrefixCache`` keeps those caches across calls, bounded.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields

# A shared prefix shorter than this is not worth a separate forward pass and a cache entry.
MIN_PREFIX_TOKENS = 16


def buckets(lengths: list[int], batch_size: int, pad_budget: float) -> list[list[int]]:
    """Indices of ``lengths`` grouped into batches of at most ``batch_size``, longest first: a
    batch takes the next-longest prompt only while its padding (tokens added to left-pad every
    row to the batch's longest) stays within ``pad_budget`` of the padded batch's tokens.
    ``pad_budget >= 1`` gives fixed chunks of ``batch_size`` (the old grouping)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    for i in order:
        group = groups[-1] if groups else None
        if group is not None and len(group) < batch_size:
            longest = lengths[group[0]]
            pads = sum(longest - lengths[j] for j in group) + longest - lengths[i]
            if pad_budget >= 1 or pads <= pad_budget * longest * (len(group) + 1):
                group.append(i)
                continue
        groups.append([i])
    return groups


def common_prefix_len(seqs: list[list[int]]) -> int:
    """Length of the longest token prefix all of ``seqs`` share."""
    if not seqs:
        return 0
    first, n = seqs[0], min(len(s) for s in seqs)
    for pos in range(n):
        token = first[pos]
        if any(s[pos] != token for s in seqs):
            return pos
    return n


class PrefixCache:
    """The KV caches of recently used shared prefixes, keyed by their token ids; the least
    recently used goes first beyond ``capacity``. Entries are read-only: a batch generates
    from a copy."""

    def __init__(self, capacity: int = 4):
        self.capacity = capacity
        self._entries: OrderedDict[tuple[int, ...], object] = OrderedDict()

    def get(self, prefix: tuple[int, ...]):
        cache = self._entries.get(prefix)
        if cache is not None:
            self._entries.move_to_end(prefix)
        return cache

    def put(self, prefix: tuple[int, ...], cache) -> None:
        self._entries[prefix] = cache
        self._entries.move_to_end(prefix)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def longest_match(self, ids: list[int]) -> tuple[int, ...] | None:
        """The longest cached prefix that ``ids`` starts with (and extends by at least one)."""
        best = None
        for prefix in self._entries:
            if len(prefix) < len(ids) and tuple(ids[:len(prefix)]) == prefix and \
                    (best is None or len(prefix) > len(best)):
                best = prefix
        return best

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class GenerationStats:
    """What a generator has computed so far. ``batches``: decoded batches;
    ``prefill_batches``: forward passes of the prompt pass (more with length buckets);
    ``prompt_tokens``: real prompt tokens asked for;
    ``prefix_reused_tokens``: of those, tokens whose KV came from a shared prefix (computed once
    per prefix, counted in ``prefix_computed_tokens``) or, for append-style episode prompts,
    from the episode's own cache of its earlier steps; ``padded_tokens``: pad positions the
    prompt pass computed; ``new_tokens``: generated tokens kept (up to end of sequence);
    ``prefill_s`` / ``decode_s``: seconds in the prompt pass and in the token-by-token steps."""

    prompts: int = 0
    batches: int = 0
    prefill_batches: int = 0
    prompt_tokens: int = 0
    prefix_reused_tokens: int = 0
    prefix_computed_tokens: int = 0
    padded_tokens: int = 0
    new_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0

    @property
    def padded_share(self) -> float:
        """Pad positions among the positions the prompt pass computed."""
        computed = self.prompt_tokens - self.prefix_reused_tokens + self.padded_tokens
        return self.padded_tokens / computed if computed else 0.0

    def as_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["padded_share"] = round(self.padded_share, 4)
        out["prompt_tokens_per_s"] = round(self.prompt_tokens / self.prefill_s, 1) \
            if self.prefill_s else None
        out["new_tokens_per_s"] = round(self.new_tokens / self.decode_s, 1) \
            if self.decode_s else None
        return out
