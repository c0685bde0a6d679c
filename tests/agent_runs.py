"""Running a real LLM agent stack with ``a2rl run`` on the ci grid, for the end-to-end tests of
the replay driver (tests/llm/test_replay_e2e.py) and the local driver
(tests/llm/test_local_e2e.py): which stacks are installed, the run itself, its JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from a2rl.config.compose import compose
from a2rl.llm.stacks import TOOLS_ENV, AgentNotInstalled, stack_of, tools_dir
from checkout import REPO, child_env

# a real-looking key in the harness's environment: the sandbox must never see it
HARNESS_SECRET = "sk-harness-only-secret"


def installed(stack: str) -> bool:
    cfg = compose([f"agent={stack}"])
    folder = tools_dir(REPO / "resources", stack, cfg.agent.version)
    try:
        stack_of(stack).check_installed(folder, cfg.agent.version)
        return True
    except AgentNotInstalled:
        return False


def needs(stack: str):
    return pytest.mark.skipif(not installed(stack), reason=(
        f"{stack} is not installed: python scripts/install_agents.py {stack}"))


def a2rl_run(root: Path, stack: str, driver: str, *overrides: str,
             timeout: float = 900) -> tuple[Path, str]:
    """``a2rl run grid=ci agent=<stack> driver=<driver>`` under ``root``; the run folder and
    the tail of its agent.log. The run must end with exit code 0 (whatever its status)."""
    env = child_env(**{"A2RL_CONF": str(REPO / "conf"),
                       TOOLS_ENV: os.environ.get(TOOLS_ENV, str(REPO / "resources" / "tools")),
                       "ANTHROPIC_API_KEY": HARNESS_SECRET, "OPENAI_API_KEY": HARNESS_SECRET})
    command = [sys.executable, "-c",
               "import sys; from a2rl.pipeline.cli import main; sys.exit(main())",
               "run", "grid=ci", f"agent={stack}", f"driver={driver}", f"paths.root={root}",
               *overrides]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    run = root / "results" / "ci" / "runs" / "gsm8k_arith" / stack / driver / "seed0"
    agent_log = (run / "agent.log").read_text(errors="replace")[-4000:] \
        if (run / "agent.log").exists() else ""
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}\n{agent_log}"
    return run, agent_log


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
