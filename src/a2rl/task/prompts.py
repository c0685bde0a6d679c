"""The prompt of an episode's step and the action in a model's reply: the half of the policy
runner (``a2rl.task.envs``) that speaks to a model, kept in a module of its own so that each
stays small. Standard library only, like the runner: it ships beside it into an agent's data
folder as ``a2rl_prompts.py`` (``a2rl.task.base.ship_envs``), where the runner imports it by
that name.

The prompt a model sees comes in two styles (``PromptFormat.style``):

- ``append`` (the default): a chat that only grows. The system turn holds the instructions, the
  first user turn the goal and the first observation, and every step appends the action taken
  (an assistant turn) and what followed (a user turn: the observation and the actions admissible
  now). So step t's prompt is step t-1's plus new turns, token for token (``ChatTokens`` encodes
  turn by turn), and a model keeps each episode's KV cache across its steps and encodes only the
  new tokens (``a2rl.task.episode_cache``; vLLM's prefix caching does the same). This is how
  ReAct-style agents and the ALFWorld / WebShop literature prompt. When an episode outgrows
  ``window_chars`` the oldest whole (action, observation) pairs after the first user turn are
  dropped until it is under half of it (``PromptFormat.window``): deterministic, and the prefix
  breaks only at those steps, where the cache is rebuilt.
- ``rewrite`` (the format before): one user turn rewritten every step (instructions, goal, the
  last ``history`` steps, the current observation, the admissible actions); kept so that earlier
  baselines stay reproducible (``task.params.prompt_format: rewrite``).

A reply is parsed into one action by ``parse_action`` (first line, prose and quotes stripped,
then the closest admissible action, or the line itself for free-text actions); with
``actions="own"`` (ALFWorld's ReAct-style protocol) a reply that is not an admissible action is
not mapped: it is an invalid action (the runner answers it itself).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

DEFAULT_INSTRUCTIONS = ("Text game: reach the goal. Reply with one action from the list of "
                        "available actions, nothing else.")
PROMPT_STYLES = ("append", "rewrite")
# append: which admissible actions a step's user turn lists (see observation_turn), and how
# the data folder's README says it
STEP_ACTIONS_SAID = {"all": "", "changes": "; after the first turn, a turn lists only the "
                     "actions that became admissible and those that no longer are",
                     "first": "; only the first turn lists the admissible actions"}
STEP_ACTIONS = tuple(STEP_ACTIONS_SAID)
ACTION_PROTOCOLS = ("closest", "own")


# ---- prompts and parsing ------------------------------------------------------------------

@dataclass
class PromptFormat:
    """How an episode's state becomes a chat prompt: an append-only chat (``style="append"``)
    or one user turn rewritten every step (``"rewrite"``); see the module's docstring."""

    instructions: str = DEFAULT_INSTRUCTIONS
    history: int = 2  # rewrite: previous steps shown (action + observation)
    max_observation_chars: int = 300
    # rewrite: earlier steps' observations are clipped to this (None: as the current one); a
    # task with long pages (WebShop's results) keeps the prompt short this way
    max_history_chars: int | None = None
    style: str = "append"
    # append: the chat's characters (all turns) above which the oldest steps are dropped; about
    # 4 characters a token, so 16,000 stays well inside a 8k-token context
    window_chars: int = 16_000
    # append: the actions a step's turn lists: all admissible ones, only what changed since the
    # last step, or none after the first turn (which lists them all, showing their syntax)
    step_actions: str = "all"

    def __post_init__(self) -> None:
        if self.history < 0:
            raise ValueError(f"PromptFormat.history={self.history}; expected >= 0")
        if self.style not in PROMPT_STYLES:
            raise ValueError(f"PromptFormat.style={self.style!r}; expected one of "
                             f"{PROMPT_STYLES}")
        if self.step_actions not in STEP_ACTIONS:
            raise ValueError(f"PromptFormat.step_actions={self.step_actions!r}; expected one of "
                             f"{STEP_ACTIONS}")
        if self.window_chars < 1000:
            raise ValueError(f"PromptFormat.window_chars={self.window_chars}; expected >= 1000")
        for name in ("max_observation_chars", "max_history_chars"):
            value = getattr(self, name)
            if value is not None and value < 4:
                raise ValueError(f"PromptFormat.{name}={value}; expected >= 4")

    def _clip(self, text: str, limit: int | None = None) -> str:
        text = " ".join(text.split())
        limit = limit or self.max_observation_chars
        return text if len(text) <= limit else text[:limit - 3] + "..."

    def user_prompt(self, goal: str, history: list[tuple[str, str]], observation: str,
                    admissible: list[str]) -> str:
        parts = [self.instructions.strip(), f"Goal: {goal.strip()}"]
        recent = history[-self.history:] if self.history else []
        if recent:  # the last step's observation is the current one, shown once under "Now"
            lines = [f"> {action}\n{self._clip(obs, self.max_history_chars)}"
                     for action, obs in recent[:-1]]
            parts.append("Recent steps:\n" + "\n".join(lines + [f"> {recent[-1][0]}"]))
        parts.append(f"Now: {self._clip(observation)}")
        if admissible:  # free-text environments state their syntax in the instructions
            parts.append("Available actions:\n" + "\n".join(admissible))
        parts.append("Your action:")
        return "\n\n".join(parts)

    # ---- append style ---------------------------------------------------------------------

    def observation_turn(self, observation: str, admissible: list[str],
                         goal: str | None = None, before: list[str] | None = None) -> str:
        """The user turn of one step in the append style: the observation and the actions
        admissible now (they change every step, so they are part of the step's turn, never of
        a header); the first turn starts with the goal. ``before``: the actions admissible at
        the last step (None for the first turn), which ``step_actions="changes"`` lists the
        difference from."""
        parts = [f"Goal: {goal.strip()}"] if goal is not None else []
        parts.append(self._clip(observation))
        if self.step_actions == "all" or before is None:
            if admissible:
                parts.append("Available actions:\n" + "\n".join(admissible))
        elif self.step_actions == "changes":
            was, now = set(before), set(admissible)
            added = [a for a in admissible if a not in was]
            gone = [a for a in before if a not in now]
            if added:
                parts.append("New actions:\n" + "\n".join(added))
            if gone:
                parts.append("No longer available:\n" + "\n".join(gone))
        return "\n\n".join(parts)

    def describe(self) -> str:
        """What a model is sent each step, in words (for the data folder's README)."""
        if self.style == "rewrite":
            return ("one user turn, rewritten every step (the model's chat template, generation "
                    "prompt added, no system turn)")
        return ("the episode's chat so far, which only grows (the model's chat template: a "
                "system turn with the instructions, a user turn per observation with the "
                "actions admissible then, an assistant turn per action taken; generation prompt "
                f"added; past {self.window_chars} characters the oldest steps are dropped)"
                + STEP_ACTIONS_SAID[self.step_actions])

    def first_prompt(self, goal: str, observation: str, admissible: list[str]
                     ) -> str | list[dict[str, str]]:
        """The prompt of an episode's first step (what ``EpisodeView.prompt`` holds)."""
        if self.style == "rewrite":
            return self.user_prompt(goal, [], observation, admissible)
        return self.window([{"role": "user", "content": self.observation_turn(
            observation, admissible, goal)}])

    def example(self, goal: str, steps: list[tuple[str, str]], now: str,
                admissible: list[str]) -> str:
        """The prompt of a step after ``steps`` (action, what it did), for a README: rewrite:
        the user turn; append: the chat's turns under their roles."""
        if self.style == "rewrite":
            return self.user_prompt(goal, steps, now, admissible)
        turns = [{"role": "user", "content": self.observation_turn(
            "<first observation>" if steps else now, admissible, goal)}]
        for i, (action, result) in enumerate(steps):
            turns += [{"role": "assistant", "content": action},
                      {"role": "user", "content": self.observation_turn(
                          now if i == len(steps) - 1 else result, admissible,
                          before=admissible)}]
        return "\n\n".join(f"[{t['role']}]\n{t['content']}" for t in self.window(turns))

    def window(self, turns: list[dict[str, str]]) -> list[dict[str, str]]:
        """The chat a model sees: the system turn (instructions), then ``turns`` (the first
        user turn, then (assistant, user) pairs), without the oldest pairs when the whole would
        pass ``window_chars``. Deterministic in ``turns``: walking the pairs in order, whenever
        the kept ones pass the budget the oldest are dropped until they fill at most half of
        it, so the kept chat is extended step after step and breaks (a cache rebuilt) only once
        per half window."""
        system = {"role": "system", "content": self.instructions.strip()}
        head, pairs = turns[:1], [turns[i:i + 2] for i in range(1, len(turns), 2)]
        budget = self.window_chars - sum(len(t["content"]) for t in [system, *head])
        sizes = [sum(len(t["content"]) for t in pair) for pair in pairs]
        start, kept = 0, 0
        for i, size in enumerate(sizes):
            kept += size
            if kept > budget:
                while start < i and kept > budget // 2:
                    kept -= sizes[start]
                    start += 1
        return [system, *head, *(t for pair in pairs[start:] for t in pair)]


_PREFIX = re.compile(r"^\s*(?:>|action\s*:|my action\s*:|next action\s*:|answer\s*:|\d+[.)])\s*",
                     re.IGNORECASE)


def clean_reply(text: str, lower: bool = True) -> str:
    """The first non-empty line of a reply, without an "Action:" / ">" prefix, quotes, markup
    and a final period, with single spaces, lower-cased unless ``lower`` is false."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = _PREFIX.sub("", line)
    line = line.strip().strip("`*\"'").strip().rstrip(".!").strip().strip("`*\"'")
    return " ".join((line.lower() if lower else line).split())


# an admissible action ``verb[<what>]`` is a template: any ``verb[text]`` is allowed
# (WebShop's ``search[<query>]``)
_TEMPLATE = re.compile(r"^(\w+)\[<[^\[\]<>]*>\]$")


def is_template(action: str) -> bool:
    """Whether an admissible action is a template for free text (``search[<query>]``)."""
    return bool(_TEMPLATE.match(action))


def _fill_template(cleaned: str, admissible: list[str]) -> str | None:
    """The reply as a filled-in template (``search[red shoes]``), if it is one."""
    verbs = {m.group(1).lower() for a in admissible if (m := _TEMPLATE.match(a))}
    m = re.match(r"^(\w+)\s*\[\s*([^\[\]]*?)\s*\]?$", cleaned)
    if not m or m.group(1) not in verbs or not m.group(2) or m.group(2).startswith("<"):
        return None
    return f"{m.group(1)}[{m.group(2)}]"


def parse_action(reply: str, admissible: list[str], actions: str = "closest") -> tuple[str, str]:
    """One action from a model reply, and how it was found: ``exact`` (the cleaned reply is an
    admissible action), ``template`` (it fills in a template action such as
    ``search[<query>]``: the filled-in text is kept), ``prefix`` (the reply starts with one, the
    longest wins), ``contains`` (one appears in the reply), ``closest`` (highest string
    similarity), or ``free`` (no list to match against: the cleaned reply itself, case kept,
    since free text carries names and queries). With ``actions="own"`` (ReAct-style) a reply
    that is neither an admissible action nor a filled-in template is ``invalid``: the cleaned
    reply itself, never mapped onto the list."""
    if actions not in ACTION_PROTOCOLS:
        raise ValueError(f"actions={actions!r}; expected one of {ACTION_PROTOCOLS}")
    if not admissible:
        return clean_reply(reply, lower=False), "free"
    cleaned = clean_reply(reply)
    filled = _fill_template(cleaned, admissible)
    if filled:
        return filled, "template"
    lowered = {a.lower(): a for a in admissible}
    if cleaned in lowered:
        return lowered[cleaned], "exact"
    if actions == "own":
        return cleaned, "invalid"
    starts = [a for a in lowered if cleaned.startswith((a + " ", a + ","))]
    if starts:
        return lowered[max(starts, key=len)], "prefix"
    flat = " ".join(reply.lower().split())
    inside = [a for a in lowered if re.search(rf"(?<!\w){re.escape(a)}(?!\w)", flat)]
    if inside:
        return lowered[max(inside, key=len)], "contains"
    best = max(lowered, key=lambda a: (difflib.SequenceMatcher(None, cleaned, a).ratio(), -len(a)))
    return lowered[best], "closest"


# ---- chat text and token ids ----------------------------------------------------------------

def render_chat(tokenizer, messages: list[dict[str, str]], generation_prompt: bool) -> str:
    """``messages`` in the tokenizer's chat template (the generation prompt added when asked),
    or without one the turns' texts separated by blank lines."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=generation_prompt)
    return "\n\n".join(m["content"] for m in messages)


def encode_prompt(tokenizer, prompt: str) -> list[int]:
    """Token ids of a formatted prompt. A chat template usually writes the BOS token itself; it
    is added only when the prompt does not already start with it."""
    bos = getattr(tokenizer, "bos_token", None)
    add_special = not (bos and prompt.startswith(bos))
    return list(tokenizer(prompt, add_special_tokens=add_special)["input_ids"])


class ChatTokens:
    """Token ids of one episode's growing chat (append style), encoded turn by turn: a turn's
    text is what the chat template adds for it after the chat's first turn (templates of the
    ChatML kind render each turn alone; a template that does not is refused), and only that
    text is encoded, never the whole chat again. So each step's ids extend the last step's
    exactly; an assistant turn's ids start with the generation prompt's ids the step before
    ended with. A chat that does not extend the last one (the window slid) is encoded again
    from its start (``rebuilds``)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.turns: list[dict[str, str]] = []
        self.base: list[int] = []
        self.rebuilds = 0
        self._rendered: dict[tuple, str] = {}

    def ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The ids of ``messages`` with the generation prompt after them."""
        if messages[:len(self.turns)] != self.turns:
            self.turns, self.base = [], []
            self.rebuilds += 1
        for turn in messages[len(self.turns):]:
            self.base += self._encode_turn(turn)
            self.turns.append(turn)
        return self.base + self._encode(self._generation_prompt())

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool = False) -> str:
        key = (tuple((m["role"], m["content"]) for m in messages), generation_prompt)
        if key not in self._rendered:
            if len(self._rendered) > 8:  # only the first turn's renderings come again
                self._rendered.clear()
            self._rendered[key] = render_chat(self.tokenizer, messages, generation_prompt)
        return self._rendered[key]

    def _added(self, before: str, after: str) -> str:
        if not after.startswith(before):
            raise ValueError("the chat template rewrites earlier turns when one is added, so "
                             "its prompts cannot grow append-only; use prompt_format=rewrite")
        return after[len(before):]

    def _generation_prompt(self) -> str:
        anchor = self.turns[:1]
        return self._added(self._render(anchor), self._render(anchor, True))

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def _encode_turn(self, turn: dict[str, str]) -> list[int]:
        if not self.turns:
            return encode_prompt(self.tokenizer, self._render([turn]))
        anchor = self.turns[:1]
        text = self._added(self._render(anchor), self._render([*anchor, turn]))
        opening = self._generation_prompt()
        if turn["role"] == "assistant" and opening and text.startswith(opening):
            return self._encode(opening) + self._encode(text[len(opening):])
        return self._encode(text)

