"""A search-and-answer episode behind the ``a2rl.task.envs.TextEnv`` interface.

The model acts in free text, one action a turn:

* ``search[query]``: a ranked list of results, each ``[n] title: snippet``;
* ``open[n]``: the first page of result ``n`` (truncated to ``page_chars``);
* ``next page``: the next page of the open document;
* ``answer[text]``: the final answer; the episode ends.

A malformed action costs its step and gets an error observation that repeats the syntax. Result
numbers belong to the episode: a document keeps its number when a later search shows it again.

Search backends share one interface (``SearchBackend``: ``search`` and ``read``): ``LocalBackend``
here (a ``bm25s`` index over a corpus, built by ``LocalBackend.build``) and the web backend in
``web.py``. When a question carries its expert plan (the offline world's questions do),
``info["expert"]`` is the expert's next action from the current state, like TextWorld's policy
commands, and ``info["won"]`` says whether the answer matched (``scoring.match_answer``).

Self-contained apart from ``bm25s`` and the two modules it imports: the task copies this file
(as ``dsqa_env.py``), ``scoring.py`` (as ``dsqa_scoring.py``) and ``a2rl/task/envs.py`` (as
``a2rl_envs.py``) into the agent's data folder, so an agent can play the train questions::

    import sys; sys.path.insert(0, "data")
    from dsqa_env import LocalBackend, SearchEnv, load_questions, PROMPT
    from a2rl_envs import play, ExpertPolicy
    questions = load_questions("data/train_questions.jsonl")
    backend = LocalBackend.load("data/search")
    episodes = play(list(questions), lambda: SearchEnv(questions, backend), ExpertPolicy(),
                    max_steps=10, fmt=PROMPT)
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    from a2rl_tasks.deepsearchqa.scoring import match_answer

    from a2rl.task import Observation, PromptFormat, Step, TextEnv
except ImportError:  # inside an agent's sandbox: the copies next to this file
    from a2rl_envs import Observation, PromptFormat, Step, TextEnv
    from dsqa_scoring import match_answer

INSTRUCTIONS = (
    "Answer the question by searching. Reply with exactly one action:\n"
    "search[query] - search the web\n"
    "open[n] - read result n\n"
    "next page - read on in the open document\n"
    "answer[your answer] - give the final answer (list every item, separated by commas)")
# the grader's prompt: the syntax above, the last 2 steps, observations clipped
PROMPT = PromptFormat(instructions=INSTRUCTIONS, history=2, max_observation_chars=900)
SYNTAX = "Use search[query], open[n], next page or answer[your answer]."
_ACTION = re.compile(r"\s*(search|open|answer)\s*([\[(])", re.IGNORECASE)
_NEXT = re.compile(r"\s*next(?:\s*page)?\s*(?:[\[(]\s*(?:page)?\s*[\])])?\s*", re.IGNORECASE)


class DocumentUnavailable(RuntimeError):
    """A result could not be read (a dead link, a page that is not text)."""


@dataclass
class SearchResult:
    key: str  # what ``read`` takes: a document id, or a URL for the web
    title: str
    snippet: str


class SearchBackend(ABC):
    @abstractmethod
    def search(self, query: str, k: int) -> list[SearchResult]:
        """At most ``k`` results, best first."""

    @abstractmethod
    def read(self, key: str) -> tuple[str, str]:
        """(title, text) of a result; raises DocumentUnavailable."""


@dataclass
class EnvSettings:
    results: int = 5          # results per search
    page_chars: int = 700     # characters of a document shown per page
    max_steps: int = 10       # the episode's step limit (the env warns on the last step)


def parse_action(text: str) -> tuple[str, str]:
    """(verb, argument) of a free-text action, e.g. ``search[the query]`` -> ("search", "the
    query"); ``next page`` -> ("next", ""). ValueError with the reason when it is none."""
    if _NEXT.fullmatch(text or ""):
        return "next", ""
    match = _ACTION.match(text or "")
    if not match:
        raise ValueError(f"not an action: {text[:80]!r}")
    # the argument runs to the last closing bracket (answers may hold brackets of their own);
    # a missing one is forgiven, text after it ignored
    rest, closer = text[match.end():], "]" if match.group(2) == "[" else ")"
    verb, arg = match.group(1).lower(), (rest[:rest.rfind(closer)] if closer in rest
                                         else rest).strip()
    if not arg and verb != "answer":
        raise ValueError(f"{verb}[...] needs an argument")
    return verb, arg


def paginate(text: str, page_chars: int) -> list[str]:
    """``text`` in pages of at most ``page_chars`` characters, cut at line ends or spaces."""
    pages, rest = [], text.strip()
    while len(rest) > page_chars:
        cut = rest.rfind("\n", 0, page_chars)
        if cut < page_chars // 2:
            cut = rest.rfind(" ", 0, page_chars)
        if cut <= 0:
            cut = page_chars
        pages.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    return pages + [rest] if rest or not pages else pages


def load_questions(path: str | Path) -> dict[str, dict[str, Any]]:
    """Question rows of a jsonl file by id (``id``, ``question``, ``answers``, ``plan``...)."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return {row["id"]: row for row in rows}


# ---- the local backend ----------------------------------------------------------------------

class LocalBackend(SearchBackend):
    """BM25 (``bm25s``) over a corpus of ``{"id", "title", "text"}`` documents: ``build`` writes
    the corpus and the index to a folder, ``load`` reads them back."""

    def __init__(self, docs: list[dict[str, Any]], retriever, snippet_chars: int = 160):
        self.docs = docs
        self.by_id = {d["id"]: d for d in docs}
        self.retriever = retriever
        self.snippet_chars = snippet_chars

    @staticmethod
    def _tokens(texts: list[str]) -> list[list[str]]:
        import bm25s

        return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)

    @classmethod
    def build(cls, docs: list[dict[str, Any]], folder: str | Path) -> LocalBackend:
        import bm25s

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        # b=0.4 (Lucene uses 0.75): a long page (a university with its alumni) is penalised
        # less for its length, so a query naming it still ranks it above short pages that
        # merely mention it
        retriever = bm25s.BM25(b=0.4)
        # the title three times: a page whose title is the query outranks the many short
        # pages that only mention it (as a search engine ranks an entity's own page first)
        texts = [f"{d['title']}\n{d['title']}\n{d['title']}\n{d['text']}" for d in docs]
        retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False),
                        show_progress=False)
        retriever.save(str(folder / "bm25"), show_progress=False)
        (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
        return cls(docs, retriever)

    @classmethod
    def load(cls, folder: str | Path, snippet_chars: int = 160) -> LocalBackend:
        import bm25s

        folder = Path(folder)
        if not (folder / "corpus.jsonl").is_file():
            raise FileNotFoundError(f"{folder}: no corpus.jsonl (build the index first)")
        docs = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
        return cls(docs, bm25s.BM25.load(str(folder / "bm25"), show_progress=False),
                   snippet_chars)

    def search(self, query: str, k: int) -> list[SearchResult]:
        tokens = self._tokens([query])
        if not tokens[0]:
            return []
        found, scores = self.retriever.retrieve(tokens, k=min(k, len(self.docs)),
                                                show_progress=False)
        out = []
        for index, score in zip(found[0], scores[0]):
            if score > 0:
                doc = self.docs[int(index)]
                out.append(SearchResult(doc["id"], doc["title"], self.snippet(doc["text"])))
        return out

    def snippet(self, text: str) -> str:
        flat = " ".join(text.split())
        return flat if len(flat) <= self.snippet_chars else \
            flat[:self.snippet_chars].rsplit(" ", 1)[0] + " ..."

    def read(self, key: str) -> tuple[str, str]:
        doc = self.by_id.get(key)
        if doc is None:
            raise DocumentUnavailable(f"no document {key!r}")
        return doc["title"], doc["text"]


# ---- the environment ------------------------------------------------------------------------

@dataclass
class _State:
    numbers: dict[str, int] = field(default_factory=dict)  # result key -> its number
    keys: list[str] = field(default_factory=list)          # number - 1 -> result key
    open_key: str | None = None
    pages: list[str] = field(default_factory=list)
    page: int = 0
    seen: dict[str, set[int]] = field(default_factory=dict)  # key -> pages shown
    steps: int = 0
    answer: str | None = None
    searches: int = 0
    opens: int = 0
    errors: int = 0


class SearchEnv(TextEnv):
    """One question per episode (``reset(question_id)``), answered with the backend's help."""

    def __init__(self, questions: dict[str, dict[str, Any]], backend: SearchBackend,
                 settings: EnvSettings | None = None):
        self.questions = questions
        self.backend = backend
        self.settings = settings or EnvSettings()
        self.row: dict[str, Any] = {}
        self.state = _State()

    def reset(self, game: str) -> Observation:
        if game not in self.questions:
            raise KeyError(f"no question {game!r}")
        self.row, self.state = self.questions[game], _State()
        text = f"No results yet. You have {self.settings.max_steps} actions. {SYNTAX}"
        return self._observation(text)

    def step(self, action: str) -> Step:
        s = self.state
        s.steps += 1
        try:
            verb, arg = parse_action(action)
            text = getattr(self, f"_{verb}")(arg)
        except ValueError as err:
            s.errors += 1
            text = f"Invalid action: {err}. {SYNTAX}"
        done = s.answer is not None
        won = done and self._graded_correct(s.answer)
        if not done and s.steps == self.settings.max_steps - 1:
            text += "\n(One action left: answer now with answer[...].)"
        info = {"won": won, "score": float(won), "answer": s.answer, "searches": s.searches,
                "opens": s.opens, "errors": s.errors}
        return Step(self._observation(text), float(won), done, info)

    # ---- actions ------------------------------------------------------------------------

    def _search(self, query: str) -> str:
        s = self.state
        s.searches += 1
        results = self.backend.search(query, self.settings.results)
        if not results:
            return f"search[{query}]: no results. Try other words."
        lines = [f"Results for {query!r}:"]
        for r in results:
            if r.key not in s.numbers:
                s.keys.append(r.key)
                s.numbers[r.key] = len(s.keys)
            lines.append(f"[{s.numbers[r.key]}] {r.title}: {r.snippet}")
        return "\n".join(lines)

    def _open(self, arg: str) -> str:
        s = self.state
        number = arg.strip().lstrip("#").strip()
        if not number.isdigit() or not 1 <= int(number) <= len(s.keys):
            shown = f"1-{len(s.keys)}" if s.keys else "none yet: search first"
            raise ValueError(f"no result [{arg}] to open (results shown: {shown})")
        key = s.keys[int(number) - 1]
        s.opens += 1
        try:
            title, text = self.backend.read(key)
        except DocumentUnavailable as err:
            return f"[{number}] cannot be read: {err}"
        s.open_key, s.pages, s.page = key, self._pages(text), 0
        return self._show_page(number, title)

    def _next(self, _: str) -> str:
        s = self.state
        if s.open_key is None:
            raise ValueError("no document is open")
        if s.page + 1 >= len(s.pages):
            raise ValueError("the open document has no more pages")
        s.page += 1
        return self._show_page(str(s.numbers[s.open_key]), "")

    def _answer(self, text: str) -> str:
        self.state.answer = text
        return "Answer recorded."

    def _pages(self, text: str) -> list[str]:
        return paginate(text, self.settings.page_chars)

    def _show_page(self, number: str, title: str) -> str:
        s = self.state
        s.seen.setdefault(s.open_key, set()).add(s.page)
        head = f"[{number}] {title} " if title else f"[{number}] "
        more = "\n(more: next page)" if s.page + 1 < len(s.pages) else ""
        return f"{head}(page {s.page + 1} of {len(s.pages)})\n{s.pages[s.page]}{more}"

    # ---- grading and the expert ---------------------------------------------------------

    def _graded_correct(self, answer: str) -> bool:
        answers = self.row.get("answers")
        return bool(answers) and match_answer(answers, answer).correct

    def _observation(self, text: str) -> Observation:
        info = {"question_id": self.row.get("id"), "expert": self.expert_action()}
        return Observation(text, self.row.get("question", ""), [], info)

    def expert_action(self) -> str | None:
        """The expert's next action: search for the plan's targets whose queries the question
        gives away (so their result numbers are shown together), then, target by target, open
        it (searching first if it is not among the results) and page on until every name it
        must read there has been shown; finally the gold answer. None without a plan."""
        plan, s = self.row.get("plan"), self.state
        if not plan or s.answer is not None:
            return None
        for target in plan:
            if target.get("known") and target["page"] not in s.numbers:
                return f"search[{target['query']}]"
        for target in plan:
            needed = self._needed_pages(target)
            if needed <= s.seen.get(target["page"], set()):
                continue
            if s.open_key == target["page"] and max(needed) > s.page:
                return "next page"
            if target["page"] in s.numbers:
                return f"open[{s.numbers[target['page']]}]"
            return f"search[{target['query']}]"
        return f"answer[{', '.join(self.row['answers'])}]"

    def _needed_pages(self, target: dict[str, Any]) -> set[int]:
        """The pages of the target's document on which its needed names appear (page 1 when
        a name is split across pages or absent)."""
        _, text = self.backend.read(target["page"])
        pages = self._pages(text)
        needed = set()
        for name in target["needs"]:
            hits = [i for i, page in enumerate(pages) if name in page]
            needed.add(hits[0] if hits else 0)
        return needed or {0}
