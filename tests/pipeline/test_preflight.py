"""``a2rl doctor --llm`` (a2rl.pipeline.preflight) with each kind of missing piece, and the
spending estimate and grading-budget check behind it and ``a2rl plan`` (a2rl.pipeline.spend).

The providers are played by a local server speaking their protocols over a real socket, with
one right key: a wrong key is answered 401 as the provider answers it."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from a2rl.config.checks import ConfigError
from a2rl.config.compose import compose
from a2rl.config.prices import PricesConfig
from a2rl.config.types import DriverConfig
from a2rl.llm.loopback import LoopbackServer
from a2rl.pipeline import preflight, spend
from a2rl.task.base import PaidApi, load_task
from checkout import REPO

RIGHT_KEY = "sk-the-right-key"
PRICES = PricesConfig(input_per_mtok=2.0, cached_input_per_mtok=0.5, output_per_mtok=8.0,
                      as_of="2026-12-01", source="https://provider.test/pricing")


def provider_app(seen: list[dict]) -> FastAPI:
    """OpenAI chat completions, Anthropic messages and Gemini generateContent, each checking
    its key where the provider reads it and refusing a wrong one as the provider does."""
    app = FastAPI()

    def refuse(body: dict) -> JSONResponse:
        return JSONResponse(body, 401)

    @app.post("/v1/chat/completions")
    async def openai(request: Request):
        body = await request.json()
        seen.append(body)
        if request.headers.get("authorization") != f"Bearer {RIGHT_KEY}":
            return refuse({"error": {"message": "Incorrect API key provided",
                                     "type": "invalid_request_error",
                                     "code": "invalid_api_key"}})
        return {"id": "c", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "length",
                             "message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}

    @app.post("/v1/messages")
    async def anthropic(request: Request):
        body = await request.json()
        seen.append(body)
        if (request.headers.get("x-api-key") != RIGHT_KEY
                or not request.headers.get("anthropic-version")):
            return refuse({"type": "error", "error": {"type": "authentication_error",
                                                      "message": "invalid x-api-key"}})
        return {"id": "m", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "text", "text": "ok"}], "stop_reason": "max_tokens",
                "usage": {"input_tokens": 9, "output_tokens": 1}}

    @app.post("/v1beta/models/{call}")
    async def gemini(call: str, request: Request):
        body = await request.json()
        seen.append(body)
        if request.headers.get("x-goog-api-key") != RIGHT_KEY:
            return refuse({"error": {"code": 401, "message": "API key not valid",
                                     "status": "UNAUTHENTICATED"}})
        return {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                                "finishReason": "MAX_TOKENS"}],
                "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 1}}

    return app


@pytest.fixture(scope="module")
def provider():
    seen: list[dict] = []
    with LoopbackServer(provider_app(seen), "fake-provider") as server:
        yield server.url, seen


def driver_at(url: str, provider: str) -> DriverConfig:
    base = url + "/v1" if provider == "openai" else url
    return DriverConfig(name=f"fake_{provider}", provider=provider, model="model-x",
                        base_url=base, api_key_env="A2RL_TEST_PROVIDER_KEY", prices=PRICES)


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_a_wrong_key_is_refused_and_a_right_one_answers(provider, kind, monkeypatch):
    url, seen = provider
    driver = driver_at(url, kind)
    monkeypatch.setenv("A2RL_TEST_PROVIDER_KEY", "sk-wrong")
    wrong = preflight.check_driver_key(driver, "driver fake")
    assert not wrong.ok and "refused the key in $A2RL_TEST_PROVIDER_KEY (HTTP 401" in wrong.detail
    assert "set a valid key" in wrong.detail
    monkeypatch.setenv("A2RL_TEST_PROVIDER_KEY", RIGHT_KEY)
    right = preflight.check_driver_key(driver, "driver fake")
    assert right.ok and "answered a one-token call" in right.detail
    # one token asked, in the protocol's own words
    limit = {"openai": seen[-1].get("max_completion_tokens"),
             "anthropic": seen[-1].get("max_tokens"),
             "gemini": (seen[-1].get("generationConfig") or {}).get("maxOutputTokens")}[kind]
    assert limit == 1


def test_a_missing_key_says_which_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    check = preflight.check_driver_key(compose(["driver=gpt_4o"]).driver, "driver gpt_4o")
    assert not check.ok and check.detail.startswith("$OPENAI_API_KEY is not set")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-anything")
    assert preflight.check_driver_key(compose(["driver=gpt_4o"]).driver, "d", call=False).ok
    # keyless drivers need nothing; the local one says what it will serve
    assert preflight.check_driver_key(compose(["driver=replay"]).driver, "d").ok
    local = preflight.check_driver_key(compose(["driver=local"]).driver, "d")
    assert local.ok and "smollm2-135m-instruct" in local.detail


def test_an_unreachable_provider_is_one_line(monkeypatch):
    monkeypatch.setenv("A2RL_TEST_PROVIDER_KEY", RIGHT_KEY)
    check = preflight.check_driver_key(driver_at("http://127.0.0.1:9", "openai"), "d")
    assert not check.ok and "could not be reached" in check.detail


def test_an_agent_cli_not_installed(tmp_path):
    cfg = compose(["agent=codex", f"paths.resources={tmp_path}"])
    check = preflight.check_cli(cfg)
    assert not check.ok and "python scripts/install_agents.py codex" in check.detail


def test_task_data_absent(tmp_path):
    cfg = compose(["task=deepsearchqa", f"paths.data={tmp_path}"])
    task = load_task(cfg.task, Path(cfg.paths.data))
    check = preflight.check_data(cfg, task)
    assert not check.ok and check.detail.startswith("missing: ")
    assert "DSQA-full" in check.detail and "a2rl data fetch deepsearchqa" in check.detail
    shipped = compose(["task=gsm8k_arith"])
    assert preflight.check_data(shipped, load_task(shipped.task, REPO / "data")).ok


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_no_gpu_where_the_grid_asks_for_one():
    cfg = compose(["grid=paper", "task=gsm8k", "agent=sft"])
    [gpu, *rest] = preflight.check_gpu([cfg])
    assert not gpu.ok and "asks 1 GPU(s)" in gpu.detail and "torch sees 0" in gpu.detail
    assert not rest  # inference auto: vLLM is used where present, not required
    assert preflight.check_gpu([compose(["task=gsm8k_arith"])]) == []
    if importlib.util.find_spec("vllm") is None:
        vllm = compose(["task=gsm8k_arith", "++task.inference.backend=vllm"])
        [check] = preflight.check_gpu([vllm])
        assert not check.ok and "pip install vllm" in check.detail


def test_paid_graders_keys(monkeypatch):
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    cfg = compose(["grid=paper", "task=deepsearchqa"])
    checks = preflight.check_paid_apis(cfg, load_task(cfg.task, Path("data")), call=True)
    assert [(c.name, c.ok) for c in checks] == [("judge of deepsearchqa", False),
                                                ("search of deepsearchqa", False)]
    assert "$GEMINI_API_KEY is not set" in checks[0].detail
    assert "$BRAVE_API_KEY is not set" in checks[1].detail


def test_the_preflight_of_a_grid(monkeypatch, capsys):
    """The whole report: a missing driver key fails it, with the spend estimate after."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = preflight.main(["--llm", "grid=ci", "grid.tasks=[gsm8k_arith]",
                           "grid.agents=[noop,mini_swe_agent]", "grid.drivers=[gpt_4o]"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL      driver gpt_4o: $OPENAI_API_KEY is not set" in out
    assert "a2rl plan: grid ci, 2 runs" in out and "driver gpt_4o: 1 x" in out
    assert "assumes   an LLM agent makes" in out


# ------------------------------------------------------------------------ spend, budgets


def alpacaeval_cell(*overrides: str):
    cfg = compose(["grid=paper", "task=alpacaeval", "agent=sft", *overrides])
    return cfg, load_task(cfg.task, Path("data"))


def test_the_judge_cap_is_checked_against_the_submission_limit():
    cfg, task = alpacaeval_cell()
    [judge] = task.paid_apis()
    per_eval = spend.usd_per_eval(judge)  # 1,610 GPT-4 Turbo calls of ~1,000 tokens
    assert per_eval == pytest.approx(1610 * (1000 * 10.0 + 1 * 30.0) / 1e6)
    assert spend.funded_evaluations(judge) == math.floor(50 / per_eval) == 3
    assert spend.budget_disagreements(cfg, task) == []  # the paper grid allows three
    spend.check_grading_budget(cfg, task)
    more, task = alpacaeval_cell("budget.max_submissions=10")
    [problem] = spend.budget_disagreements(more, task)
    assert "funds 3 graded submission(s)" in problem and "budget.max_submissions=10" in problem
    assert "set budget.max_submissions=3" in problem
    assert f"task.params.judge.max_usd={math.ceil(per_eval * 10)}" in problem
    with pytest.raises(ConfigError, match="funds 3"):
        spend.check_grading_budget(more, task)


def test_the_estimate_follows_budgets_and_caps():
    cfg = compose(["task=gsm8k_arith", "agent=mini_swe_agent", "driver=gpt_5_4",
                   "budget.time_limit_s=3600"])
    hour = spend.driver_usd_per_run(cfg)
    assert hour == pytest.approx(spend.driver_usd_per_hour(cfg.driver)) and hour > 0
    double = replace(cfg, budget=replace(cfg.budget, time_limit_s=7200))
    assert spend.driver_usd_per_run(double) == pytest.approx(2 * hour)
    capped = replace(cfg, budget=replace(cfg.budget, llm_max_usd=hour / 4))
    assert spend.driver_usd_per_run(capped) == pytest.approx(hour / 4)
    free = compose(["task=gsm8k_arith", "agent=mini_swe_agent", "driver=local"])
    assert spend.driver_usd_per_run(free) == 0.0
    # judges: noop grades nothing past the baseline; the cap bounds a run's spending
    sft, task = alpacaeval_cell()
    noop = replace(sft, agent=compose(["agent=noop"]).agent)
    lines = {s.what: s for s in spend.estimate([(sft, task, 2), (noop, task, 3)])}
    judge = lines["judge gpt_4_turbo (alpacaeval)"]
    [api] = task.paid_apis()
    assert judge.runs == 5 and judge.usd == pytest.approx(2 * 3 * spend.usd_per_eval(api),
                                                          abs=0.02)
    assert lines["judge gpt_4_turbo (alpacaeval baseline)"].runs == 1
    search = PaidApi("search", key_env="X", calls_per_eval=100, usd_per_call=0.01)
    assert spend.usd_per_eval(search) == pytest.approx(1.0)
    assert spend.funded_evaluations(search) is None  # no cap


def test_an_unfundable_cell_is_refused_before_its_baseline_is_graded(tmp_path):
    """The baseline stage refuses before the paid judge grades anything (nothing prepared)."""
    from a2rl.pipeline.stages import measure_baseline

    cfg = compose(["grid=paper", "task=alpacaeval", "budget.max_submissions=10",
                   f"paths.root={tmp_path}"])
    with pytest.raises(ConfigError, match="funds 3 graded submission"):
        measure_baseline(cfg)
    assert not (tmp_path / "results").exists()
