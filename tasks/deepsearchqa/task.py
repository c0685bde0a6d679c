"""DeepSearchQA (L3, search and judge): the model answers multi-step questions by acting in a
search environment (``search_env.SearchEnv``: search[...], open[n], next page, answer[...]) for
at most ``max_steps`` actions; the item scores 1 when its answer is fully correct (every
expected item, nothing else: DeepSearchQA's headline, stricter than the paper's reference code,
docs/deviations.md), or, with ``headline: f1``, the answer's F1. The breakdown holds F1,
precision, recall and the four outcome buckets (``scoring.py``).

Two sources:

* ``world`` (offline): questions over a procedural knowledge world (``world.py``), the local
  BM25 backend, the deterministic set matcher. Train questions come with expert trajectories;
  the sealed test questions ask about entities no train question asks about.
* ``dsqa`` (the paper's cell): the 900 real questions (shuffled with seed 42: 100 train items
  for the agent, 200 sealed), the web backend with its request cache, the LLM judge.

The grader plays all test questions in lockstep (``a2rl.task.envs.play``), one batched greedy
generation per step; each reply's first line is the action.
"""

from __future__ import annotations

import re
import shutil
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from a2rl.task import (
    ConfigError,
    EvalResult,
    ExpertPolicy,
    GeneratorPolicy,
    GradingBudgetExhausted,
    GradingUnavailable,
    InferenceConfig,
    PaidApi,
    PreparedTaskPaths,
    ReplyScore,
    Task,
    TaskConfig,
    iter_jsonl,
    play,
    render_readme,
    ship_episode_modules,
    text_key,
    write_jsonl_atomic,
)

from . import scoring
from .dsqa_data import dsqa_file
from .params import DeepSearchParams
from .search_env import INSTRUCTIONS, EnvSettings, LocalBackend, SearchEnv, parse_action

HERE = Path(__file__).parent
SEARCH_DIR = "search"   # the world's corpus and BM25 index, in data/ and in sealed/
CACHE_DIR = "cache"     # the web and judge caches and call logs, in sealed/
# a judge call's prompt and verdict tokens, as the README measures them (more when the judge
# thinks); for pricing (a2rl.pipeline.spend)
JUDGE_CALL_TOKENS = (600, 150)


class DeepSearchTask(Task):
    metric = "accuracy: fully correct answers (every expected item, nothing else)"
    item_fields = ("id", "question", "answers", "answer_type")

    def __init__(self, cfg: TaskConfig, data_root: Path):
        super().__init__(cfg, data_root)
        self.params = DeepSearchParams.from_dict(cfg.params)
        if self.params.headline == "f1":
            self.metric = "F1: mean over items of the answer's F1 of precision and recall"
        if cfg.feedback != "test":
            raise ConfigError(f"task.feedback={cfg.feedback!r}: the {cfg.id} task has no "
                              "validation split; use feedback=test")
        p = self.params
        self.fmt = p.episode_prompt(instructions=INSTRUCTIONS, history=p.history,
                                    max_observation_chars=p.max_observation_chars)
        self.settings = EnvSettings(results=p.results_per_search, page_chars=p.page_chars,
                                    max_steps=p.max_steps)
        self.judge_spent_usd = 0.0  # over this task object's evaluations (one run)
        self.search_spent_usd = 0.0  # likewise

    # ---- data -------------------------------------------------------------------------------

    def data_files(self) -> list[Path]:
        d = self.params.dsqa
        if self.params.source != "dsqa" or d.hf_id:
            return []
        return [dsqa_file(d, self.data_root)]

    def prepare(self, out: PreparedTaskPaths) -> dict[str, Any]:
        started = time.monotonic()
        if self.params.source == "world":
            facts = self._prepare_world(out)
        else:
            facts = self._prepare_dsqa(out)
        ship_episode_modules(out.data)
        for name, source in (("dsqa_env.py", HERE / "search_env.py"),
                             ("dsqa_scoring.py", HERE / "scoring.py"),
                             ("dsqa_web.py", HERE / "web.py")):
            shutil.copyfile(source, out.data / name)
        out.validation.unlink(missing_ok=True)
        return {"task": self.cfg.package, "task_id": self.cfg.id, **facts,
                "seconds": round(time.monotonic() - started, 1),
                "params": self.params.to_dict()}

    def _prepare_world(self, out: PreparedTaskPaths) -> dict[str, Any]:
        from .policies import names_by_kind
        from .questions import world_questions

        p = self.params
        world, test, train = world_questions(p)
        asked = {e for q in test for e in q.entities}
        docs = [{"id": page.id, "title": page.title, "text": page.text, "kind": page.kind}
                for page in world.pages.values()]
        for folder in (out.data / SEARCH_DIR, out.sealed / SEARCH_DIR):
            shutil.rmtree(folder, ignore_errors=True)
        LocalBackend.build(docs, out.sealed / SEARCH_DIR)
        shutil.copytree(out.sealed / SEARCH_DIR, out.data / SEARCH_DIR)
        test_rows = [q.to_dict() for q in test]
        train_rows = [q.to_dict() for q in train]
        write_jsonl_atomic(out.test, test_rows)
        write_jsonl_atomic(out.data / "train_questions.jsonl", train_rows)
        demos = self._demonstrations(train_rows, out.data / SEARCH_DIR)
        write_jsonl_atomic(out.data / "trajectories.jsonl", demos["trajectories"])
        write_jsonl_atomic(out.data / "train.jsonl", demos["pairs"])
        (out.data / "README.md").write_text(self._data_readme(len(train_rows),
                                                              len(demos["pairs"])))
        backend = LocalBackend.load(out.sealed / SEARCH_DIR, p.snippet_chars)
        return {
            "source": {"kind": "world", "world_seed": p.world_seed, "test_seed": p.test_seed,
                       "train_seed": p.train_seed, "pages": len(docs),
                       "entities": dict(Counter(d["kind"] for d in docs))},
            "sizes": {"train": len(train_rows), "test": len(test_rows),
                      "train_pairs": len(demos["pairs"]),
                      "trajectories": len(demos["trajectories"])},
            "test_templates": dict(Counter(r["template"] for r in test_rows)),
            "test_entities_kept_from_train": len(asked),
            "expert_success_train": demos["expert_success"],
            "policies": self.policy_scores(test_rows, backend, names_by_kind(docs)),
        }

    def twin_split(self, prepared: PreparedTaskPaths, folder: Path, seed: int) -> Path | None:
        """As many questions as the test split from the same world, drawn from ``seed``: none
        of train's or test's, and, as train's, none about an entity a test question asks
        about; answered from a copy of the sealed search index. Train's questions cover most
        of the world, so most twin questions ask about entities train asks about too, and a
        template train has used up (founder_country, 4 hops, at the default sizes) is rarer
        than in test: if anything the twin is easier for a model that learnt train, and the
        check errs towards not flagging. The real questions are a fixed pool: None."""
        if self.params.source != "world":
            return None
        from .questions import make_questions
        from .world import World

        p = self.params
        test = self._rows(prepared.test)
        train = list(iter_jsonl(prepared.data / "train_questions.jsonl"))
        twin = make_questions(World.build(p.world_seed, p.world), len(test), seed, "twin",
                              avoid={e for row in test for e in row["entities"]},
                              taken={text_key(row["question"]) for row in test + train})
        shutil.rmtree(folder / SEARCH_DIR, ignore_errors=True)
        shutil.copytree(prepared.sealed / SEARCH_DIR, folder / SEARCH_DIR)
        write_jsonl_atomic(folder / "twin.jsonl", [q.to_dict() for q in twin])
        return folder / "twin.jsonl"

    def _prepare_dsqa(self, out: PreparedTaskPaths) -> dict[str, Any]:
        from .dsqa_data import load_dsqa, split_dsqa

        p = self.params.dsqa
        rows, source = load_dsqa(p, self.data_root)
        train, test, excluded = split_dsqa(rows, p)
        write_jsonl_atomic(out.test, test)
        write_jsonl_atomic(out.data / "train_questions.jsonl", train)
        # no expert plays the real web: the pairs teach the answer format, closed-book
        pairs = [{"id": r["id"], "prompt": self.first_prompt(r["question"]),
                  "completion": f"answer[{r['answer']}]"} for r in train]
        write_jsonl_atomic(out.data / "train.jsonl", pairs)
        (out.data / "README.md").write_text(self._data_readme(len(train), len(pairs)))
        from .web import provider_spec, spec_dict

        return {"source": source, "web": spec_dict(provider_spec(self.params.web)),
                "judge": {"driver": self.params.judge.driver},
                "sizes": {"train": len(train), "test": len(test), "train_pairs": len(pairs)},
                "excluded_empty_answer": excluded,
                "test_answer_types": dict(Counter(r["answer_type"] for r in test))}

    def _data_readme(self, n_questions: int, n_pairs: int) -> str:
        example = self.fmt.example("<the question>", [("<previous action>", "<its result>")],
                                   "<what the last action showed>", [])
        return render_readme(Path(__file__).with_name("data_readme.md.j2"), {
            "n_questions": n_questions, "n_pairs": n_pairs, "p": self.params,
            "sends": self.fmt.describe(), "example": example})

    def grading_settings(self) -> dict[str, Any]:
        return {"prompt": asdict(self.fmt)}

    def first_prompt(self, question: str) -> str | list[dict[str, str]]:
        env = SearchEnv({"q": {"id": "q", "question": question}}, _NoBackend(), self.settings)
        first = env.reset("q")
        return self.fmt.first_prompt(first.goal, first.text, [])

    def _demonstrations(self, rows: list[dict[str, Any]], search: Path) -> dict[str, Any]:
        """The expert's episodes in the train questions and their step-level prompt ->
        expert-action pairs in the grader's prompt format."""
        questions = {r["id"]: r for r in rows}
        backend = LocalBackend.load(search, self.params.snippet_chars)
        episodes = play(list(questions), lambda: SearchEnv(questions, backend, self.settings),
                        ExpertPolicy(), self.params.max_steps, self.fmt, keep_prompts=True)
        trajectories, pairs = [], []
        for ep in episodes:
            row = questions[ep.game]
            trajectories.append({"id": ep.game, "question": row["question"],
                                 "template": row["template"], "won": ep.won,
                                 "actions": [s["action"] for s in ep.steps],
                                 "observations": [s["observation"] for s in ep.steps]})
            pairs += [{"id": f"{ep.game}-{i}", "question_id": ep.game, "step": i,
                       "prompt": s["prompt"], "completion": s["action"]}
                      for i, s in enumerate(ep.steps)]
        won = sum(ep.won for ep in episodes)
        return {"trajectories": trajectories, "pairs": pairs,
                "expert_success": 100.0 * won / max(1, len(episodes))}

    def policy_scores(self, rows: list[dict[str, Any]], backend: LocalBackend,
                      names: dict[str, list[str]]) -> dict[str, Any]:
        """Oracle, closed-book and search-only scores on ``rows`` (see policies.py)."""
        from .policies import ClosedBookPolicy, SearchOnlyPolicy

        questions = {r["id"]: r for r in rows}
        policies = {"oracle": ExpertPolicy(), "closed_book": ClosedBookPolicy(questions, names),
                    "search_only": SearchOnlyPolicy(questions, names)}
        out = {}
        for name, policy in policies.items():
            episodes = play(list(questions), lambda: SearchEnv(questions, backend,
                                                               self.settings),
                            policy, self.params.max_steps, self.fmt, keep_prompts=True)
            grades = [self._match(questions[ep.game], ep) for ep in episodes]
            result = self._result(rows, episodes, grades, 0.0)
            out[name] = {"score": result.score, "stderr": result.stderr,
                         "f1": result.breakdown["f1"]}
        return out

    # ---- scoring ----------------------------------------------------------------------------

    def evaluate(self, model_dir: Path, split: Path, inference: InferenceConfig) -> EvalResult:
        from a2rl.task import load_generator

        started = time.perf_counter()
        rows = self._rows(split)
        questions = {r["id"]: r for r in rows}
        backend = self._backend(split)
        generator = load_generator(Path(model_dir), inference)
        try:
            policy = GeneratorPolicy(generator, self.params.max_new_tokens)
            episodes = play(list(questions), lambda: SearchEnv(questions, backend,
                                                               self.settings),
                            policy, self.params.max_steps, self.fmt,
                            live=inference.live_episodes)
        except _search_unavailable() as err:  # the search API, not the model, failed
            from .web import SearchBudgetExhausted

            spent = isinstance(err, SearchBudgetExhausted)
            raise (GradingBudgetExhausted if spent else GradingUnavailable)(str(err)) from err
        finally:
            self.search_spent_usd += getattr(backend, "counts", {}).get("web_cost_usd", 0.0)
            for thing in (generator, backend):
                close = getattr(thing, "close", None)
                if close:
                    close()
        answers = [_answer_of(ep) for ep in episodes]
        usage: dict[str, Any] = {}
        if self.params.grader == "match":
            grades = [self._match(questions[ep.game], ep) for ep in episodes]
        else:
            grades, usage = self._judge(split, rows, answers)
        web = getattr(backend, "usage", lambda: {})()
        if web:  # the search API's calls are grading's cost too: cost_usd counts both
            usage = usage | web
            usage["cost_usd"] = round(usage.get("cost_usd", 0.0) + web["web_cost_usd"], 6)
        return self._result(rows, episodes, grades, time.perf_counter() - started, usage)

    def _rows(self, split: Path) -> list[dict[str, Any]]:
        rows = list(iter_jsonl(split))
        if not rows:
            raise ValueError(f"{split}: no questions to evaluate")
        return rows

    def _backend(self, split: Path):
        if self.params.backend == "local":
            return LocalBackend.load(split.parent / SEARCH_DIR, self.params.snippet_chars)
        from .web import WebBackend

        return WebBackend.from_params(self.params.web, split.parent / CACHE_DIR,
                                      self.params.snippet_chars, self.search_spent_usd)

    def _match(self, row: dict[str, Any], episode) -> scoring.Grade:
        return scoring.match_answer(row["answers"], _answer_of(episode))

    def _judge(self, split: Path, rows: list[dict[str, Any]],
               answers: list[str]) -> tuple[list[scoring.Grade], dict[str, Any]]:
        from .judge import DeepSearchJudge

        j = self.params.judge
        if self.harness is None:
            raise ConfigError("the LLM judge needs the harness (a2rl.task.base.Harness), "
                              "which sets task.harness; a task built alone has none")
        driver = self.harness.driver(j.driver)
        cache = split.parent / CACHE_DIR
        calls = self.grading_calls or cache / "judge_calls.jsonl"

        def open_proxy(max_usd: float | None):
            calls.parent.mkdir(parents=True, exist_ok=True)  # the proxy appends to it
            return self.harness.recording_proxy(driver, calls, max_usd, j.timeout_s)

        judge = DeepSearchJudge(j, driver, cache, open_proxy, self.judge_spent_usd)
        try:
            return judge.grade(rows, answers)
        finally:
            self.judge_spent_usd = judge.spent_usd
            judge.close()

    def _result(self, rows: list[dict[str, Any]], episodes, grades: list[scoring.Grade],
                seconds: float, usage: dict[str, Any] | None = None) -> EvalResult:
        # per template (world) or category (real): "Politics & Government" -> politics_government
        groups = [re.sub(r"\W+", "_", str(r.get("template") or r.get("category") or "all"))
                  .strip("_").lower() for r in rows]
        breakdown = scoring.summarise(grades, groups)
        types = [r["answer_type"].split()[0].lower() for r in rows]
        for kind in sorted(set(types)):
            mine = [g for g, t in zip(grades, types) if t == kind]
            breakdown[f"correct_{kind}_answer"] = 100.0 * sum(g.correct for g in mine) / len(mine)
        n = len(episodes)
        counts = [_verbs(ep) for ep in episodes]
        breakdown["answered_pct"] = 100.0 * sum(c["answer"] > 0 for c in counts) / n
        breakdown["mean_steps"] = sum(ep.n_steps for ep in episodes) / n
        for verb in ("search", "open", "next", "invalid"):
            breakdown[f"mean_{verb}"] = sum(c[verb] for c in counts) / n
        records = [{"id": r["id"], "question": r["question"], "expected": r.get("answers"),
                    "answer": _answer_of(ep), "steps": ep.n_steps, **g.to_dict(),
                    "actions": [s["action"] for s in ep.steps],
                    "replies": [s["reply"] for s in ep.steps]}
                   for r, ep, g in zip(rows, episodes, grades, strict=True)]
        return EvalResult(per_item=[g.score(self.params.headline) for g in grades],
                          seconds=seconds,
                          records=records, breakdown=breakdown, usage=usage or {})

    # ---- replies without a model (a2rl score) -----------------------------------------------

    def find_item(self, item_id: str) -> dict[str, Any]:
        if self.params.source != "world":
            raise NotImplementedError("a2rl score for the real questions needs the judge; "
                                      "grade a model instead")
        from .questions import world_questions

        _, test, train = world_questions(self.params)
        for q in train if item_id.startswith("train-") else test:
            if q.id == item_id:
                return q.to_dict()
        raise KeyError(f"task {self.cfg.id!r} has no item {item_id!r}")

    def score_each(self, items: list[dict[str, Any]], replies: list[str]) -> list[ReplyScore]:
        """A reply is the final answer (``answer[...]`` or bare text), matched as the grader
        matches an episode's answer."""
        if self.params.grader != "match":
            raise NotImplementedError("a2rl score for the real questions needs the judge")
        out = []
        for item, reply in zip(items, replies, strict=True):
            text = reply.strip()
            verb, arg = _parsed(text)
            if verb == "answer":
                text = arg
            grade = scoring.match_answer(item["answers"], text)
            out.append(ReplyScore(grade.score(self.params.headline), grade.outcome,
                                  f"found {grade.n_found}/{len(grade.found)}, "
                                  f"{len(grade.excessive)} excessive"))
        return out

    # ---- agent-facing -----------------------------------------------------------------------

    def paid_apis(self) -> list[PaidApi]:
        """The real questions' judge (grader judge) and search API (backend web), for the sealed
        questions of one evaluation; cached searches and verdicts are free, which this
        ignores."""
        p = self.params
        items = p.dsqa.test_size if p.source == "dsqa" else p.test_questions
        apis = []
        if p.grader == "judge":
            tokens_in, tokens_out = JUDGE_CALL_TOKENS
            apis.append(PaidApi("judge", driver=p.judge.driver, calls_per_eval=items,
                                input_tokens_per_call=tokens_in,
                                output_tokens_per_call=tokens_out, max_usd=p.judge.max_usd,
                                cap_key="task.params.judge.max_usd",
                                assumption=f"{items} questions, one verdict each of "
                                           f"~{tokens_in} prompt and ~{tokens_out} written "
                                           f"tokens, no cache hits"))
        if p.backend == "web":
            from .web import provider_spec

            spec = provider_spec(p.web)
            apis.append(PaidApi("search", name=spec.name, key_env=spec.key_env,
                                calls_per_eval=items * p.max_steps,
                                usd_per_call=spec.price_per_search_usd, max_usd=p.web.max_usd,
                                cap_key="task.params.web.max_usd",
                                assumption=f"{items} questions x {p.max_steps} actions, every "
                                           f"action a search ({spec.name}, "
                                           f"{spec.price_per_search_usd} USD each), no cache "
                                           f"hits: an upper bound"))
        return apis

    def description(self) -> str:
        name = "description.md" if self.params.source == "world" else "description_dsqa.md"
        return (HERE / name).read_text()


def _parsed(action: str) -> tuple[str, str]:
    try:
        return parse_action(action)
    except ValueError:
        return "invalid", ""


def _answer_of(episode) -> str:
    """The episode's final answer ("" when it never answered): an answer ends the episode, so
    it is the last action or none."""
    verb, arg = _parsed(episode.steps[-1]["action"]) if episode.steps else ("", "")
    return arg if verb == "answer" else ""


def _verbs(episode) -> Counter:
    """How many actions of each kind (search, open, next, answer, invalid) the episode took."""
    return Counter(_parsed(s["action"])[0] for s in episode.steps)


def _search_unavailable() -> type[Exception]:
    """web.SearchUnavailable, imported only when asked (httpx and trafilatura are lazy)."""
    from .web import SearchUnavailable

    return SearchUnavailable


class _NoBackend:
    def search(self, query, k):
        return []

    def read(self, key):
        raise KeyError(key)
