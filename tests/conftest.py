"""Shared fixtures. Tests run offline on the tiny generated model, one torch thread, and read
task data from the repository's fixtures (``tests/checkout.py`` says where things are).

Tests marked ``heavy`` (the real SmolLM2-135M model) are skipped unless selected with
``-m heavy`` (or ``-m "heavy or not heavy"`` for everything).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

import ci_runs
from checkout import AGENT_PYTHON, FIXTURE_GSM8K, FULL_GSM8K, OFFLINE_ENV, GSM8KData

# huggingface_hub reads these when it is first imported, which can happen while test modules are
# collected, before any fixture runs; so set them at import time too.
os.environ.update(OFFLINE_ENV)
# runs in scratch folders use the checkout's agent environment (tests/checkout.py)
os.environ["A2RL_AGENT_PYTHON"] = str(AGENT_PYTHON)
# the project environment's commands (dvc, snakemake, a2rl) first on PATH, as in an activated
# venv: the README runs the tests as .venv/bin/python -m pytest, without activating it
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])


def pytest_collection_modifyitems(config, items):
    """Heavy tests (real SmolLM2 runs) are left out of the default run, not skipped inside it:
    select them with ``-m heavy``."""
    if "heavy" in (config.getoption("-m") or ""):
        return
    heavy = [item for item in items if "heavy" in item.keywords]
    if heavy:
        config.hook.pytest_deselected(items=heavy)
        items[:] = [item for item in items if "heavy" not in item.keywords]


@pytest.fixture(scope="session", autouse=True)
def offline_single_thread():
    """No Hub access, no tokenizer thread pools, one torch thread (the machines are shared)."""
    os.environ.update(OFFLINE_ENV)
    import torch

    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def agent_python() -> Path:
    """The agents' Python environment (resources/agent-python), built by scripts/setup.sh."""
    from a2rl.isolation.agent_python import AgentPythonMissing, interpreter

    try:
        interpreter(AGENT_PYTHON)
    except AgentPythonMissing as err:
        pytest.fail(str(err))
    return AGENT_PYTHON


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """The tiny random Qwen2 model with its ChatML tokenizer, built once per session. Treat it as
    read-only: copy it before changing anything."""
    from a2rl.models.provision import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny")


def _gsm8k_params() -> list:
    params = [pytest.param(FIXTURE_GSM8K, id="fixtures")]
    if FULL_GSM8K is not None:
        params.append(pytest.param(FULL_GSM8K, id="A2RL_DATA"))
    return params


@pytest.fixture(scope="session", params=_gsm8k_params())
def gsm8k_data(request) -> GSM8KData:
    """GSM8K in jsonl: the repository's sample, and the full copy too when A2RL_DATA is set."""
    data: GSM8KData = request.param
    if data is FULL_GSM8K and not (data.root / "gsm8k" / "test.jsonl").is_file():
        pytest.skip(f"A2RL_DATA={data.root} has no gsm8k/test.jsonl (the full GSM8K copy); "
                    "unset A2RL_DATA to test on the sample in tests/fixtures only")
    return data


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """The real ci-grid run directories of ``tests/ci_runs.py``, built once per session."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (scripts/setup.sh installs it)")
    return ci_runs.build(tmp_path_factory.getbasetemp() / "ci_runs")


@pytest.fixture
def blank_summary():
    """A RunSummary of a run that left nothing: change fields with dataclasses.replace."""
    from a2rl.common.records import Budget, ProcessMetrics, RunSummary, Submissions

    return RunSummary(
        grid="ci", task="a", task_name="a", level="L1", agent="sft", driver="none", seed=0,
        feedback="test", model="tiny-qwen2", sandbox="bwrap", hardware=None,
        budget=Budget(name="ci", time_limit_s=120, max_submissions=6), status="completed",
        exit_code=0, agent_seconds=1.0, baseline=None, baseline_stderr=None,
        best_feedback_score=None, final_score=None, final_stderr=None, final_n=None,
        final_from="final", improvement=None, selected_submission=None,
        submissions=Submissions(total=0, valid=0, invalid=0, items=[]),
        process=ProcessMetrics(valid_rate=None, time_to_first_valid_s=None,
                               time_to_first_improvement_s=None, time_to_best_s=None,
                               monotonic_ratio=None, budget_used=None, deadline_gap_s=None,
                               copy_of_base=0),
        route={"methods": [], "techniques": []}, lineage=[], code={}, llm=None, cost_usd=0.0,
        integrity=None, failures=[], timeline=[], files={})
