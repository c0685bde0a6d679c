"""DeepSearchQA's online parts against real HTTP servers on loopback: the web backend against a
fake search provider that speaks Brave's (GET) and Serper's (POST) formats and serves pages,
the request cache (a second grading makes no network call), the LLM judge protocol through the
judge's recording proxy against a fake OpenAI-compatible judge, and a whole evaluation of the
real-question task with both."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from a2rl.common.files import iter_jsonl
from a2rl.common.layout import Layout
from a2rl.config.types import DriverConfig, InferenceConfig, PricesConfig, TaskConfig
from a2rl.llm.loopback import LoopbackServer
from a2rl.pipeline.harness import PipelineHarness
from a2rl.task.base import GradingBudgetExhausted, GradingUnavailable, load_task
from checkout import prepare_in

KEY = "fake-search-key"
PAGE = """<html><head><title>{title}</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About us</a> | menu menu menu</nav>
<article><h1>{title}</h1>
<p>{title} is described on this page. The city of Tarsk was founded on the river Vel in the year
1204, and it has been the seat of the regional council ever since that time.</p>
<p>Its population grew quickly during the nineteenth century, when the railway reached the
valley and the textile mills opened along the river banks.</p>
</article><footer>Copyright notice</footer></body></html>"""


class FakeSearch:
    """Search results for any query (three pages, a dead link, a PDF), the pages themselves,
    and a count of every request by route."""

    def __init__(self):
        self.hits: dict[str, int] = {}
        self.fail_next = 0
        app = FastAPI()

        def count(route: str) -> None:
            self.hits[route] = self.hits.get(route, 0) + 1

        def results(q: str, n: int) -> list[dict[str, str]]:
            base = self.server.url
            items = [(f"{q} page {i}", f"{base}/page/{i}", f"Snippet {i} about {q}.")
                     for i in range(1, 4)]
            items += [("Dead link", f"{base}/dead", "gone"), ("A PDF", f"{base}/pdf", "pdf")]
            return [{"title": t, "url": u, "description": d} for t, u, d in items][:n]

        def refuse(token: str | None):
            if token != KEY:
                return JSONResponse({"error": "bad key"}, 401)
            if self.fail_next:
                self.fail_next -= 1
                return JSONResponse({"error": "overloaded"}, 503)
            return None

        @app.get("/res/v1/web/search")
        def brave(request: Request, q: str, count_: int = 5):
            count("search")
            bad = refuse(request.headers.get("x-subscription-token"))
            n = int(request.query_params.get("count", count_))
            return bad or {"type": "search", "web": {"results": results(q, n)}}

        @app.post("/search")
        async def serper(request: Request):
            count("search")
            body = await request.json()
            bad = refuse(request.headers.get("x-api-key"))
            found = [{"title": r["title"], "link": r["url"], "snippet": r["description"]}
                     for r in results(body["q"], body["num"])]
            return bad or {"organic": found}

        @app.get("/page/{n}")
        def page(n: int):
            count("page")
            return Response(PAGE.format(title=f"Page {n}"), media_type="text/html")

        @app.get("/dead")
        def dead():
            count("page")
            return JSONResponse({"error": "not found"}, 404)

        @app.get("/pdf")
        def pdf():
            count("page")
            return Response(b"%PDF-1.4 binary", media_type="application/pdf")

        self.server = LoopbackServer(app, "fake-search")

    @property
    def total(self) -> int:
        return sum(self.hits.values())


@pytest.fixture(scope="module")
def fake_search():
    fake = FakeSearch()
    fake.server.start()
    yield fake
    fake.server.stop()


def web_params(fake: FakeSearch, **extra):
    from a2rl_tasks.deepsearchqa.params import WebParams

    return WebParams(provider="brave", endpoint=f"{fake.server.url}/res/v1/web/search",
                     key_env="FAKE_SEARCH_KEY", **extra)


def backend(fake, cache, **extra):
    from a2rl_tasks.deepsearchqa.web import WebBackend

    return WebBackend.from_params(web_params(fake, **extra), cache)


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv("FAKE_SEARCH_KEY", KEY)


# ---- the web backend -------------------------------------------------------------------------

def test_search_maps_the_providers_json_and_pages_are_extracted(fake_search, keyed, tmp_path):
    from a2rl_tasks.deepsearchqa.search_env import DocumentUnavailable

    web = backend(fake_search, tmp_path)
    results = web.search("capital of Velmora", 4)
    assert [r.title for r in results[:3]] == [f"capital of Velmora page {i}" for i in (1, 2, 3)]
    assert results[0].snippet == "Snippet 1 about capital of Velmora." and len(results) == 4
    title, text = web.read(results[0].key)
    assert title == "capital of Velmora page 1"
    assert "founded on the river Vel in the year 1204" in text and "menu menu" not in text
    with pytest.raises(DocumentUnavailable, match="HTTP 404"):
        web.read(f"{fake_search.server.url}/dead")
    with pytest.raises(DocumentUnavailable, match="no readable text"):
        web.read(f"{fake_search.server.url}/pdf")
    calls = list(iter_jsonl(tmp_path / "web_calls.jsonl"))
    assert [c["kind"] for c in calls] == ["search", "fetch", "fetch", "fetch"]
    assert calls[0]["cost_usd"] == 0.005 and calls[0]["status"] == 200
    assert all(c["latency_s"] >= 0 and c["provider"] == "brave" for c in calls)
    assert web.usage()["web_calls"] == 4 and web.usage()["web_cost_usd"] == pytest.approx(0.005)


def test_a_second_grading_makes_no_network_call(fake_search, keyed, tmp_path):
    first = backend(fake_search, tmp_path)
    before = fake_search.total
    seen = [(r.key, r.title, r.snippet) for r in first.search("the Vel river", 5)]
    pages = [first.read(key) for key, _, _ in seen[:3]]
    with pytest.raises(Exception):
        first.read(seen[3][0])  # the dead link: its 404 is cached too
    made = fake_search.total - before
    assert made == 5
    again = backend(fake_search, tmp_path)  # a new process reading the same cache
    assert [(r.key, r.title, r.snippet) for r in again.search("the  Vel river", 5)] == seen
    assert [again.read(key) for key, _, _ in seen[:3]] == pages
    with pytest.raises(Exception, match="HTTP 404"):
        again.read(seen[3][0])
    assert fake_search.total - before == made  # nothing new reached the network
    assert again.usage()["web_calls"] == 0 and again.usage()["web_cache_hits"] == 5


def test_failures_retry_then_make_grading_unavailable(fake_search, keyed, tmp_path,
                                                      monkeypatch):
    from a2rl_tasks.deepsearchqa.web import SearchUnavailable

    web = backend(fake_search, tmp_path, retries=2)
    web.sleep = lambda s: None
    fake_search.fail_next = 1
    assert web.search("retry once", 2)  # 503, then the answer
    assert [c["outcome"] for c in iter_jsonl(tmp_path / "web_calls.jsonl")] == ["error", "ok"]
    fake_search.fail_next = 5
    with pytest.raises(SearchUnavailable, match="HTTP 503"):
        web.search("always down", 2)
    fake_search.fail_next = 0
    assert web.search("always down", 2)  # the failure was not cached
    monkeypatch.setenv("FAKE_SEARCH_KEY", "wrong")
    before = fake_search.hits["search"]
    with pytest.raises(SearchUnavailable, match="HTTP 401"):
        web.search("bad key", 2)
    assert fake_search.hits["search"] == before + 1  # a refused key is not retried
    monkeypatch.delenv("FAKE_SEARCH_KEY")
    with pytest.raises(SearchUnavailable, match=r"\$FAKE_SEARCH_KEY"):
        web.search("no key", 2)


def test_a_search_budget_stops_searching(fake_search, keyed, tmp_path):
    """web.max_usd: the search that reaches it is made, the next is refused before any call,
    and a later grading of the run, carrying the spending over, calls nothing."""
    from a2rl_tasks.deepsearchqa.web import SearchBudgetExhausted, SearchUnavailable

    web = backend(fake_search, tmp_path, max_usd=0.01)  # two searches at 0.005 USD
    before = fake_search.hits.get("search", 0)
    web.search("first budgeted", 2)
    web.search("second budgeted", 2)
    with pytest.raises(SearchBudgetExhausted, match=r"task.params.web.max_usd"):
        web.search("third budgeted", 2)
    assert issubclass(SearchBudgetExhausted, SearchUnavailable)
    assert web.search("first budgeted", 2)  # a cached answer costs nothing: still served
    assert fake_search.hits.get("search", 0) == before + 2
    from a2rl_tasks.deepsearchqa.web import WebBackend
    later = WebBackend.from_params(web_params(fake_search, max_usd=0.01), tmp_path,
                                   spent_usd=web.usage()["web_cost_usd"])
    with pytest.raises(SearchBudgetExhausted):
        later.search("fourth budgeted", 2)
    assert fake_search.hits.get("search", 0) == before + 2


def test_serper_preset_posts_and_reads_organic_results(fake_search, monkeypatch, tmp_path):
    from a2rl_tasks.deepsearchqa.params import WebParams
    from a2rl_tasks.deepsearchqa.web import WebBackend, provider_spec

    monkeypatch.setenv("SERPER_API_KEY", KEY)
    params = WebParams(provider="serper", endpoint=f"{fake_search.server.url}/search")
    spec = provider_spec(params)
    assert (spec.method, spec.key_header, spec.results_path) == ("POST", "X-API-KEY", "organic")
    results = WebBackend.from_params(params, tmp_path).search("ferries", 2)
    assert [r.title for r in results] == ["ferries page 1", "ferries page 2"]
    with pytest.raises(ValueError, match="missing"):
        provider_spec(WebParams(provider="custom", endpoint="http://x"))


# ---- the judge ---------------------------------------------------------------------------------

class FakeJudge:
    """An OpenAI-compatible chat server that follows the judging protocol: it reads the
    expected answer and the response from the prompt and answers the protocol's JSON."""

    def __init__(self):
        self.calls = 0
        self.fail_next = 0
        self.malformed_next = 0
        self.answer_with: str | None = None  # this text instead of the protocol's verdict
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            self.calls += 1
            body = await request.json()
            if self.fail_next:
                self.fail_next -= 1
                return JSONResponse({"error": {"message": "overloaded"}}, 503)
            prompt = body["messages"][-1]["content"]
            content = self.answer_with or self.verdict(prompt)
            if self.malformed_next:
                self.malformed_next -= 1
                content = "The response looks right to me."
            return {"id": "x", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20,
                              "total_tokens": 120}}

        self.server = LoopbackServer(app, "fake-judge")

    @staticmethod
    def verdict(prompt: str) -> str:
        kind = re.search(r'Answer type: "([^"]+)"', prompt).group(1)
        expected = re.search(r"<answer>\n(.*?)\n</answer>", prompt, re.S).group(1)
        response = re.search(r"<response>\n(.*?)\n</response>", prompt, re.S).group(1)
        items = [x.strip() for x in expected.split(",")] if kind == "Set Answer" \
            else [expected]
        given = [x.strip() for x in re.split(r",| and ", response) if x.strip()]
        found = {item: item.lower() in response.lower() for item in items}
        extra = [g for g in given if not any(i.lower() in g.lower() for i in items)]
        return "```json\n" + json.dumps({"explanation": "checked", "correctness_details": found,
                                         "excessive_answers": extra}) + "\n```"


@pytest.fixture
def fake_judge():
    fake = FakeJudge()
    fake.server.start()
    yield fake
    fake.server.stop()


def judge_driver(fake: FakeJudge, **extra) -> DriverConfig:
    """A conf/driver/-style config of the fake judge (prices of 1 and 10 USD per M tokens)."""
    return DriverConfig(**{"name": "fake_judge", "provider": "openai_compatible",
                           "model": "judge-1", "base_url": f"{fake.server.url}/v1",
                           "prices": PricesConfig(input_per_mtok=1.0, cached_input_per_mtok=1.0,
                                                  output_per_mtok=10.0, as_of="2026-12-01",
                                                  source="https://judge.test/pricing"),
                           **extra})


def make_judge(fake: FakeJudge, tmp_path: Path, driver: DriverConfig | None = None, **params):
    """The task's judge with its proxy from the pipeline's harness, as evaluate builds it."""
    from a2rl_tasks.deepsearchqa.judge import DeepSearchJudge
    from a2rl_tasks.deepsearchqa.params import JudgeParams

    driver = driver or judge_driver(fake)
    harness = PipelineHarness(Layout(results=tmp_path / "results",
                                     resources=tmp_path / "resources"))
    calls = tmp_path / "judge_calls.jsonl"
    return DeepSearchJudge(JudgeParams(**{"concurrency": 2, **params}), driver, tmp_path,
                           lambda left: harness.recording_proxy(driver, calls, left, 30.0))


ROWS = [{"question": "Which city?", "answer": "Tarsk", "answer_type": "Single Answer"},
        {"question": "Which two rivers?", "answer": "Vel, Osk", "answer_type": "Set Answer"},
        {"question": "Which three?", "answer": "A1, B2, C3", "answer_type": "Set Answer"}]


def test_judge_protocol_through_the_recording_proxy(fake_judge, tmp_path):
    judge = make_judge(fake_judge, tmp_path)
    grades, usage = judge.grade(ROWS + ROWS[:1], ["It is Tarsk.", "Vel and Osk and Lune",
                                                  "A1", ""])
    judge.close()
    assert [g.outcome for g in grades] == ["fully_correct", "correct_with_extraneous",
                                           "partially_correct", "fully_incorrect"]
    assert grades[1].excessive == ["Lune"] and grades[2].recall == pytest.approx(1 / 3)
    assert fake_judge.calls == 3  # the empty response is never sent
    assert usage["calls"] == 3 and usage["input_tokens"] == 300
    assert usage["cost_usd"] == pytest.approx(3 * (100 * 1.0 + 20 * 10.0) / 1e6)
    logged = list(iter_jsonl(tmp_path / "judge_calls.jsonl"))  # the proxy's llm_calls format
    assert len(logged) == 3 and {c["outcome"] for c in logged} == {"ok"}
    assert {c["model"] for c in logged} == {"judge-1"} and all("latency_s" in c for c in logged)
    again = make_judge(fake_judge, tmp_path)
    regraded, usage = again.grade(ROWS, ["It is Tarsk.", "Vel and Osk and Lune", "A1"])
    again.close()
    assert fake_judge.calls == 3 and usage["cache_hits"] == 3 and usage["calls"] == 0
    assert [g.outcome for g in regraded] == [g.outcome for g in grades[:3]]


def test_judge_retries_then_fails_as_infrastructure(fake_judge, tmp_path):
    judge = make_judge(fake_judge, tmp_path, retries=2, concurrency=1)
    judge._client().backoff_s = 0.0
    fake_judge.fail_next, fake_judge.malformed_next = 1, 1
    grades, usage = judge.grade(ROWS[:1], ["Tarsk"])
    assert grades[0].correct and usage["retries"] == 2 and fake_judge.calls == 3
    fake_judge.fail_next = 10
    with pytest.raises(GradingUnavailable, match="after 3 attempts"):
        judge.grade(ROWS[1:2], ["Vel"])
    judge.close()


def test_judge_budget_and_missing_key_stop_grading(fake_judge, tmp_path, monkeypatch):
    judge = make_judge(fake_judge, tmp_path, max_usd=1e-6, concurrency=1)
    with pytest.raises(GradingBudgetExhausted, match="budget"):
        judge.grade(ROWS, ["Tarsk", "Vel", "A1"])
    judge.close()
    assert fake_judge.calls == 1  # the call that reached the limit; the next was refused
    # the budget is the run's: a later grading with the spent carried over calls nothing
    spent = make_judge(fake_judge, tmp_path / "s", max_usd=1e-6)
    spent.spent_usd = judge.spent_usd
    with pytest.raises(GradingBudgetExhausted, match="budget is used up"):
        spent.grade(ROWS[1:2], ["Vel"])
    assert fake_judge.calls == 1
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    gemini = judge_driver(fake_judge, provider="gemini", api_key_env="GEMINI_API_KEY")
    keyless = make_judge(fake_judge, tmp_path / "k", driver=gemini)
    with pytest.raises(GradingUnavailable, match=r"\$GEMINI_API_KEY"):
        keyless.grade(ROWS[:1], ["Tarsk"])
    assert fake_judge.calls == 1


def test_verdict_parsing_accepts_the_protocols_shapes_only():
    from a2rl_tasks.deepsearchqa.judge import parse_verdict

    listed = parse_verdict('{"explanation": "", "correctness_details": [{"key": "A", '
                           '"value": true}], "excessive_answers": ["B"]}')
    assert listed.found == {"A": True} and listed.excessive == ["B"]
    for bad in ("no json here", '{"explanation": "no details"}', "[1, 2]",
                '{"correctness_details": {"A": "yes"}, "excessive_answers": []}',
                '{"correctness_details": {"A": true}, "excessive_answers": "B"}',
                '{"Answer Correctness": {"Correctness Details": {"A": 1}}}'):
        with pytest.raises(ValueError):
            parse_verdict(bad)


def test_the_starter_notebooks_nested_verdict_is_read():
    """The official starter notebook asks for {"Answer Correctness": {"Explanation",
    "Correctness Details", "Excessive Answers"}}; a judge answering so is not retried."""
    from a2rl_tasks.deepsearchqa.judge import parse_verdict

    grade = parse_verdict('```json\n{"Answer Correctness": {"Explanation": "Italy is extra.", '
                          '"Correctness Details": {"Belgium": true, "France": true}, '
                          '"Excessive Answers": ["Italy"]}}\n```')
    assert grade.found == {"Belgium": True, "France": True} and grade.excessive == ["Italy"]
    assert grade.outcome == "correct_with_extraneous"


def test_every_listed_excessive_answer_counts_blank_ones_too():
    from a2rl_tasks.deepsearchqa.judge import parse_verdict

    grade = parse_verdict('{"correctness_details": {"A": true}, "excessive_answers": ["", " "]}')
    assert grade.excessive == ["", " "] and grade.outcome == "correct_with_extraneous"
    assert grade.precision == pytest.approx(1 / 3)


def test_an_empty_correctness_object_is_a_verdict_that_finds_nothing(fake_judge, tmp_path):
    """Not retried (the judge would answer the same), and not fully correct as the official
    metric would count it: the judge checked no expected item."""
    from a2rl_tasks.deepsearchqa.scoring import summarise

    fake_judge.answer_with = '{"explanation": "", "correctness_details": {}, ' \
                             '"excessive_answers": []}'
    judge = make_judge(fake_judge, tmp_path, concurrency=1)
    grades, usage = judge.grade(ROWS[:1], ["Tarsk"])
    judge.close()
    assert fake_judge.calls == 1 and usage["retries"] == 0
    assert grades[0].found == {} and grades[0].outcome == "fully_incorrect"
    assert not grades[0].correct and grades[0].f1 == 0.0
    assert summarise(grades)["unchecked_pct"] == 100.0


def test_a_lone_article_is_an_answer_and_is_judged(fake_judge, tmp_path):
    from a2rl_tasks.deepsearchqa.scoring import is_blank

    assert is_blank("") and is_blank(" \n\t") and not is_blank("A") and not is_blank("The")
    row = {"question": "Which blood group?", "answer": "A", "answer_type": "Single Answer"}
    judge = make_judge(fake_judge, tmp_path, concurrency=1)
    grades, usage = judge.grade([row, row], ["A", "  "])
    judge.close()
    assert fake_judge.calls == 1 and usage["calls"] == 1  # the blank one is never sent
    assert [g.outcome for g in grades] == ["fully_correct", "fully_incorrect"]


def test_the_prompt_asks_for_excessive_answers_whatever_the_answer_type():
    """The official prompt lists excessive answers for every question, so a single answer
    hedged with another ("X or Y") cannot be fully correct; the rule is not the set answers'
    alone."""
    from a2rl_tasks.deepsearchqa.judge import judge_request

    prompt = judge_request(ROWS[0], "Tarsk or Velmora", 100)["messages"][0]["content"]
    rules = prompt.split("Return only")[0]
    set_rule = next(line for line in rules.splitlines() if line.startswith("- Set Answer"))
    assert "not expected" not in set_rule
    assert "Whatever the answer type" in rules and '("X or Y")' in rules


# ---- a whole evaluation of the real-question task ------------------------------------------------

class ScriptedGenerator:
    """Stands in for a model: searches the question, opens the first result, then answers with
    the gold answer written in the question ("... (gold: X)")."""

    class Tok:
        chat_template = None

    tokenizer = Tok()
    ACTION = re.compile(r"^(search\[|open\[|next page|answer\[)")

    @classmethod
    def now(cls, prompt: str) -> str:
        """What the last action returned: after "Now: " in a rewrite-style prompt; in an
        append-style chat (its turns' text, no chat template) the turns after the last action."""
        if "Now: " in prompt:
            return prompt.rsplit("Now: ", 1)[-1]
        turns = prompt.split("\n\n")
        acted = [i for i, turn in enumerate(turns) if cls.ACTION.match(turn)]
        return "\n\n".join(turns[acted[-1] + 1:]) if acted else turns[-1]

    def generate(self, prompts, max_new_tokens):
        out = []
        for prompt in prompts:
            now = self.now(prompt)
            gold = re.search(r"\(gold: ([^)]*)\)", prompt).group(1)
            if now.startswith("No results"):
                out.append("search[" + re.search(r"Goal: (.*?)\(", prompt).group(1) + "]")
            elif now.startswith("Results for"):
                out.append("open[1]")
            else:
                out.append(f"answer[{gold}]")
        return out


def test_real_task_evaluation_is_reproducible_from_its_caches(fake_search, fake_judge, keyed,
                                                              tmp_path, monkeypatch):
    import a2rl.task

    rows = [{"example_id": str(i), "problem": f"Which item {i}? (gold: Item {i})",
             "problem_category": "Other", "answer": f"Item {i}",
             "answer_type": "Single Answer"} for i in range(8)]
    (tmp_path / "dsqa.json").write_text(json.dumps(rows))
    params = {"source": "dsqa", "backend": "web", "grader": "judge", "max_steps": 4,
              "dsqa": {"path": "dsqa.json", "train_size": 3, "test_size": 5},
              "web": {"endpoint": f"{fake_search.server.url}/res/v1/web/search",
                      "key_env": "FAKE_SEARCH_KEY"},
              "judge": {"driver": "openai_compatible"}}
    # conf/driver/openai_compatible.yaml reads its server and model from the environment
    monkeypatch.setenv("A2RL_OPENAI_BASE_URL", f"{fake_judge.server.url}/v1")
    monkeypatch.setenv("A2RL_OPENAI_MODEL", "judge-1")
    task = load_task(TaskConfig(id="dsqa_test", package="deepsearchqa", level="L3",
                                params=params), tmp_path)
    task.harness = PipelineHarness(Layout(results=tmp_path / "results",
                                          resources=tmp_path / "resources"))
    task.grading_calls = tmp_path / "run" / "judge_calls.jsonl"  # as the runner sets it
    out, _ = prepare_in(task, tmp_path / "prepared")
    # the task takes load_generator from a2rl.task, the face that re-exports it
    monkeypatch.setattr(a2rl.task, "load_generator", lambda model, cfg: ScriptedGenerator())
    infer = InferenceConfig(backend="hf")
    before = (fake_search.total, fake_judge.calls)
    first = task.evaluate(Path("unused"), out.test, infer)
    assert first.score == 100.0 and first.n == 5
    assert first.breakdown["correct_other"] == 100.0  # per category, as a plain key
    # five searches, and one page fetch: every question's first result is the same page, which
    # the first reading cached
    assert first.usage["web_calls"] == 6 and first.usage["calls"] == 5
    assert first.usage["web_cache_hits"] == 4
    assert fake_search.total - before[0] == 6 and fake_judge.calls - before[1] == 5
    assert all(r["actions"][:2] == [r["actions"][0], "open[1]"] for r in first.records)
    middle = (fake_search.total, fake_judge.calls)
    second = task.evaluate(Path("unused"), out.test, infer)
    assert (fake_search.total, fake_judge.calls) == middle  # no network call the second time
    assert second.usage["web_cache_hits"] == 10 and second.usage["calls"] == 0
    assert second.per_item == first.per_item and second.records == first.records
    # the caches and call logs stay with the sealed data, never in the agent's data/
    assert (out.sealed / "cache" / "web.sqlite").exists()
    assert (out.sealed / "cache" / "judge.sqlite").exists()
    # the judge's calls are logged in the run (task.grading_calls), priced by the proxy
    logged = list(iter_jsonl(tmp_path / "run" / "judge_calls.jsonl"))
    assert len(logged) == 5 and {c["model"] for c in logged} == {"judge-1"}
    assert not (out.sealed / "cache" / "judge_calls.jsonl").exists()
    assert not list(out.data.rglob("*.sqlite"))
    # with the search API down and nothing cached, grading is unavailable, not a zero
    monkeypatch.setenv("FAKE_SEARCH_KEY", "revoked")
    (out.sealed / "cache" / "web.sqlite").unlink()
    with pytest.raises(GradingUnavailable, match="HTTP 401"):
        task.evaluate(Path("unused"), out.test, infer)
    # with the run's search budget spent by its earlier gradings (five searches at 0.005 USD),
    # the grader is told so (grading_budget_exhausted), before any call
    assert task.search_spent_usd == pytest.approx(0.025)
    monkeypatch.setenv("FAKE_SEARCH_KEY", KEY)
    task.params.web.max_usd = 0.025
    calls = fake_search.total
    with pytest.raises(GradingBudgetExhausted, match="search budget is used up"):
        task.evaluate(Path("unused"), out.test, infer)
    assert fake_search.total == calls
