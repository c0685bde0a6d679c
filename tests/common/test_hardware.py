"""Precision by hardware (a2rl.common.hardware), as the reference agents' scripts receive it,
the hardware record, and the job's GPUs reaching the agent."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

from a2rl.agents.dpo import method_args as dpo_args
from a2rl.agents.grpo import method_args
from a2rl.agents.settings import DpoSettings, GrpoSettings
from a2rl.common import hardware
from a2rl.config.compose import compose
from a2rl.config.types import ConfigError

AGENTS = Path(hardware.__file__).parents[1] / "agents"
AVX2_ONLY = frozenset({"avx2", "fma", "sse4_2"})  # an AMD EPYC of this machine kind
AVX512_BF16 = frozenset({"avx2", "avx512f", "avx512_bf16"})
AMX = frozenset({"avx2", "avx512f", "amx_bf16", "amx_tile"})


@pytest.fixture
def cpu(monkeypatch):
    """Pretend to be a CPU with the given flags and no GPU."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def use(flags):
        monkeypatch.setattr(hardware, "cpu_flags", lambda: flags)
    return use


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"script_{name}", AGENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("flags, expected", [(AVX2_ONLY, "fp32"), (frozenset(), "fp32"),
                                             (AVX512_BF16, "bf16"), (AMX, "bf16")])
def test_auto_picks_bf16_only_where_the_cpu_computes_it_natively(cpu, flags, expected):
    cpu(flags)
    assert hardware.resolve_precision("auto") == expected
    assert hardware.resolve_precision("fp32") == "fp32"  # an explicit setting is obeyed
    assert hardware.resolve_precision("bf16") == "bf16"


def test_unknown_precision_is_refused_at_compose_time():
    with pytest.raises(ValueError, match="precision='fp16'"):
        hardware.resolve_precision("fp16")
    with pytest.raises(ConfigError, match="precision='half'"):
        compose(["agent=sft", "agent.precision=half"])
    with pytest.raises(ConfigError, match="inference.precision='half'"):
        compose(["++task.inference.precision=half"])


def agent_precision_env(cfg) -> str:
    from a2rl.isolation.sandbox import Sandbox
    from a2rl.pipeline.runner import agent_env

    box = Sandbox("none", Path("/nonexistent/ws"), Path("/nonexistent/tools"),
                  Path("/nonexistent/grader"))
    return agent_env(cfg, box, "unix:/x", "http://x", "token", 60)["A2RL_PRECISION"]


def sft_training_config(monkeypatch, precision_env: str, tmp_path: Path):
    """The TRL config the ``sft`` agent's script builds when the harness hands it
    ``precision_env`` (its default comes from $A2RL_PRECISION)."""
    monkeypatch.setenv("A2RL_PRECISION", precision_env)
    script = load_script("sft_train")
    args = script.arguments().parse_args(["--model", "m", "--data", "d", "--out",
                                          str(tmp_path / "out"), "--steps", "2", "--batch", "8",
                                          "--lr", "5e-5", "--max-len", "512"])
    return script.training_config(args, args.precision)


def dpo_training_config(monkeypatch, precision_env: str, tmp_path: Path):
    """The DPO config the ``dpo`` agent's script builds under ``precision_env``."""
    monkeypatch.setenv("A2RL_PRECISION", precision_env)
    monkeypatch.syspath_prepend(str(AGENTS))  # dpo_train imports sft_train from its folder
    script = load_script("dpo_train")
    args = script.arguments().parse_args(["--model", "m", "--data", "d", "--out",
                                          str(tmp_path / "out"), *dpo_args(DpoSettings())])
    return script.training_config(args, args.precision, args.steps)


def test_without_native_bf16_the_agents_train_in_fp32_without_checkpointing(cpu, monkeypatch,
                                                                           tmp_path):
    cpu(AVX2_ONLY)
    for agent in ("sft", "sft_grpo", "grpo", "dpo"):
        assert agent_precision_env(compose([f"agent={agent}"])) == "fp32"
    config = sft_training_config(monkeypatch, "fp32", tmp_path)
    assert config.bf16 is False and config.fp16 is False
    assert config.gradient_checkpointing is False and config.activation_checkpointing is False
    dpo = dpo_training_config(monkeypatch, "fp32", tmp_path)
    assert dpo.bf16 is False and dpo.activation_checkpointing is False  # TRL's default: on
    monkeypatch.setenv("A2RL_PRECISION", "fp32")
    grpo = load_script("grpo_train").arguments().parse_args(
        ["--model", "m", "--data", "d", "--out", "o", *method_args(GrpoSettings())])
    assert grpo.precision == "fp32"


def test_agents_train_for_the_cpu_even_on_a_gpu_machine(cpu, monkeypatch):
    """The sandbox exposes no GPU, so the agents' precision follows the CPU: a GPU with bf16
    next to an AVX2-only CPU must not make them train in emulated bf16."""
    import torch

    cpu(AVX2_ONLY)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert agent_precision_env(compose(["agent=sft"])) == "fp32"
    assert hardware.resolve_precision("auto", "cuda") == "bf16"  # the grader's GPU generation


def test_gpus_that_only_emulate_bf16_get_fp32(cpu, monkeypatch):
    import torch

    cpu(AVX2_ONLY)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    # a pre-Ampere GPU: bf16 tensors work (emulated), native bf16 does not
    monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                        lambda including_emulation=True: including_emulation)
    assert hardware.resolve_precision("auto", "cuda") == "fp32"


def test_with_native_bf16_the_agents_train_in_bf16_without_checkpointing(cpu, monkeypatch,
                                                                        tmp_path):
    cpu(AVX512_BF16)
    assert agent_precision_env(compose(["agent=sft"])) == "bf16"
    config = sft_training_config(monkeypatch, "bf16", tmp_path)
    assert config.bf16 is True and config.activation_checkpointing is False
    dpo = dpo_training_config(monkeypatch, "bf16", tmp_path)
    assert dpo.bf16 is True and dpo.gradient_checkpointing is False
    assert config.gradient_checkpointing is False
    # the config's override wins over the hardware
    assert agent_precision_env(compose(["agent=sft", "agent.precision=fp32"])) == "fp32"


def test_grader_generates_in_the_configured_precision(cpu, tiny_model):
    import torch

    from a2rl.config.types import InferenceConfig
    from a2rl.task.inference import HFGenerator

    cpu(AVX2_ONLY)
    auto = HFGenerator(tiny_model, InferenceConfig(backend="hf", precision="auto"))
    assert auto.precision == "fp32" and auto.model.dtype == torch.float32
    forced = HFGenerator(tiny_model, InferenceConfig(backend="hf", precision="bf16"))
    assert forced.precision == "bf16" and forced.model.dtype == torch.bfloat16
    # the smoke and ci grids grade in fp32 whatever the CPU; the paper grid (GPUs) in auto
    assert compose(["grid=smoke"]).task.inference.precision == "fp32"
    assert compose(["grid=paper", "task=gsm8k"]).task.inference.precision == "auto"


def test_hardware_record_names_cpu_flags_torch_and_precision(cpu):
    cpu(AVX2_ONLY)
    record = hardware.describe(agent="fp32", inference="fp32")
    assert record["cpu_flags"] == ["avx2", "fma"] and record["cpu_native_bf16"] is False
    assert record["cpu_cores"] >= 1 and record["cpu_model"]
    assert record["torch_cpu_capability"] and record["gpus"] == []
    assert record["precision"] == {"agent": "fp32", "inference": "fp32"}
    json.dumps(record)
    line = hardware.one_line(record)
    assert "avx2 fma" in line and "no GPU" in line and "agent fp32" in line


def test_grpo_iterations_start_only_if_they_end_before_the_deadline():
    fits = load_script("grpo_train").fits_before
    now = time.time()
    assert fits(0.0, [{"seconds": 1e6}], 0.0)  # no deadline
    assert fits(now + 10, [], 0.0)  # nothing measured yet: the first iteration runs ...
    assert not fits(now - 1, [], 0.0)  # ... unless the deadline has passed
    assert not fits(now + 10, [], 60.0)  # an earlier round's estimate says it will not fit
    assert fits(now + 100, [{"seconds": 30}, {"seconds": 50, "save_s": 5}], 0.0)
    # the longest iteration with its save decides, not the mean (40 s)
    assert not fits(now + 52, [{"seconds": 30}, {"seconds": 50, "save_s": 5}], 0.0)


def test_sft_script_stops_at_the_deadline_and_saves(tiny_model, tmp_path):
    """A deadline already past: the script trains one step, stops, saves and says so."""
    import subprocess

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i} + {i} =", "completion": str(2 * i)})
                            + "\n" for i in range(16)))
    out = tmp_path / "ckpt"
    result = subprocess.run(
        [sys.executable, str(AGENTS / "sft_train.py"), "--model", str(tiny_model), "--data",
         str(data), "--out", str(out), "--steps", "50", "--batch", "2", "--lr", "5e-5",
         "--max-len", "512", "--precision", "fp32", "--deadline", str(time.time() - 1)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((out / "train_log.json").read_text())
    assert report["steps"] == 1 and report["skipped_steps"] == 49
    assert report["precision"] == "fp32" and "49 of 50 steps skipped" in report["stopped"]
    # the Trainer writes use_cache into the saved config: the base model's setting stays
    saved = json.loads((out / "config.json").read_text())
    assert saved["use_cache"] == json.loads((tiny_model / "config.json").read_text())["use_cache"]


def test_agent_gets_the_jobs_gpus_only(monkeypatch):
    """CUDA_VISIBLE_DEVICES, set by the scheduler for the job, reaches the agent's cleared
    environment, so the agent uses the GPUs the job was given and no others."""
    from a2rl.config.compose import compose
    from a2rl.isolation.sandbox import Sandbox
    from a2rl.pipeline.runner import agent_env

    box = Sandbox("none", Path("/nonexistent/ws"), Path("/nonexistent/tools"),
                  Path("/nonexistent/grader"))
    cfg = compose(["agent=sft"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert "CUDA_VISIBLE_DEVICES" not in agent_env(cfg, box, "unix:/x", "http://x", "t", 60)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    env = agent_env(cfg, box, "unix:/x", "http://x", "t", 60)
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"
