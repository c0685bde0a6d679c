"""What machine this is, and which floating-point precision to train and generate in on it.

One place decides precision for the whole project: the reference agents' SFT and GRPO scripts
(the harness resolves ``agent.precision`` here and hands the result to the agent as
``A2RL_PRECISION``), the grader's generation (``task.inference.precision``) and ``a2rl doctor``.

bf16 is chosen only where the device computes it natively: a CUDA GPU that supports bf16, or a
CPU with AVX512-BF16 or AMX. Elsewhere (an AVX2-only AMD EPYC, say) bf16 is emulated and
measured 4-11x *slower* than fp32 (a SmolLM2-135M forward pass on 8 x 400 tokens: 48.6 s in bf16,
10.6 s in fp32), so ``auto`` picks fp32 there.

``describe()`` is the hardware record every run, baseline and benchmark report carries, so a
score or a wall time can be read against the machine that produced it.
"""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from pathlib import Path
from typing import Any

PRECISIONS = ("auto", "bf16", "fp32")
# the reference agents train on the CPU: the sandbox exposes no GPU device to them
AGENT_DEVICE = "cpu"
# the CPU flags (as /proc/cpuinfo spells them) that matter for training and generation speed
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni", "fma")
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@lru_cache(maxsize=1)
def cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (Linux; empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``Features`` on ARM)."""
    info = cpuinfo()
    return frozenset((info.get("flags") or info.get("Features") or "").split())


def cpu_model() -> str:
    return cpuinfo().get("model name") or platform.processor() or platform.machine()


def cpu_count() -> int:
    """Cores this process may use (the affinity mask, which containers and Slurm narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_has_native_bf16(flags: frozenset[str] | None = None) -> bool:
    return any(f in (cpu_flags() if flags is None else flags) for f in NATIVE_BF16_FLAGS)


def cuda_has_bf16() -> bool:
    """Native bf16 on the GPU (Ampere and later); torch's default check also counts emulation,
    which is slow on older GPUs (and vLLM refuses bf16 there)."""
    import torch

    return bool(torch.cuda.is_available()
                and torch.cuda.is_bf16_supported(including_emulation=False))


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def native_bf16(device: str | None = None) -> bool:
    """Whether ``device`` (``cuda`` or ``cpu``; default: the one torch would use) computes bf16
    natively rather than emulating it."""
    device = device or default_device()
    return cuda_has_bf16() if device.startswith("cuda") else cpu_has_native_bf16()


def resolve_precision(setting: str = "auto", device: str | None = None) -> str:
    """``bf16`` or ``fp32`` for a setting of ``auto``, ``bf16`` or ``fp32``. An explicit setting
    is obeyed, even where it is slow: it is the user's override."""
    if setting not in PRECISIONS:
        raise ValueError(f"precision={setting!r}; expected one of {PRECISIONS}")
    if setting != "auto":
        return setting
    return "bf16" if native_bf16(device) else "fp32"


def torch_dtype(precision: str):
    import torch

    return {"bf16": torch.bfloat16, "fp32": torch.float32}[precision]


def gpus() -> list[dict[str, Any]]:
    import torch

    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        out.append({"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                    "bf16": cuda_has_bf16()})
    return out


def describe(**precision: str) -> dict[str, Any]:
    """The hardware record: CPU model, cores, the flags that matter, torch's CPU capability, the
    GPUs, and (given as keyword arguments, e.g. ``agent="bf16", inference="fp32"``) the precision
    each part actually used."""
    import torch

    flags = cpu_flags()
    record: dict[str, Any] = {
        "cpu_model": cpu_model(), "cpu_cores": cpu_count(), "machine": platform.machine(),
        "cpu_flags": [f for f in CPU_FLAGS if f in flags],
        "cpu_native_bf16": cpu_has_native_bf16(flags),
        "torch": torch.__version__,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "gpus": gpus(),
    }
    if precision:
        record["precision"] = dict(precision)
    return record


def one_line(record: dict[str, Any]) -> str:
    """``describe()`` as one line for logs and report tables."""
    gpu = ", ".join(g["name"] for g in record.get("gpus") or []) or "no GPU"
    flags = " ".join(record.get("cpu_flags") or []) or "no listed flags"
    text = (f"{record['cpu_model']}, {record['cpu_cores']} cores ({flags}; torch "
            f"{record['torch_cpu_capability']}), {gpu}")
    if record.get("precision"):
        text += "; precision " + ", ".join(f"{k} {v}" for k, v in record["precision"].items())
    return text
