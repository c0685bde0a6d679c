"""The ``dpo`` reference agent's TRL script (src/a2rl/agents/dpo_train.py), run as the agent
runs it: a separate Python process on a model folder and a training file."""

import json
import os
import subprocess
import sys
from dataclasses import replace

from a2rl.agents.dpo import method_args
from a2rl.agents.settings import DpoSettings
from checkout import REPO


def test_dpo_script_builds_pairs_and_trains_with_trl(tiny_model, tmp_path):
    """The dpo agent's real script: samples rejected replies from the model, trains two DPO
    steps, saves a model folder and its report."""
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Count to {i}.",
                                        "completion": " ".join(map(str, range(1, i + 2)))})
                            + "\n" for i in range(8)))
    out = tmp_path / "dpo"
    agents = REPO / "src" / "a2rl" / "agents"
    done = subprocess.run(
        [sys.executable, str(agents / "dpo_train.py"), "--model", str(tiny_model), "--data",
         str(data), "--out", str(out),
         *method_args(replace(DpoSettings(), steps=2, batch=2, max_len=64, sample_tokens=8)),
         "--precision", "fp32"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "train_log.json").read_text())
    assert report["steps"] == 2 and report["pairs"] >= 4 and report["precision"] == "fp32"
    # the shared TRL arguments (trainer_args.py) keep the saved model's KV cache on
    assert json.loads((out / "config.json").read_text())["use_cache"] is True
