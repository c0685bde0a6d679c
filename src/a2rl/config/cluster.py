"""What the grid's jobs ask a cluster for (``task.resources``, ``agent.resources``) and where
they run (``cluster``, conf/cluster/). a2rl.pipeline.resources turns them into each Snakemake
rule's resources; the profile in profiles/ chooses the executor. A local run ignores them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from a2rl.config.checks import require, require_choice

GPU_MANUFACTURERS = ("nvidia", "amd")


@dataclass
class ResourcesConfig:
    """What one job asks a cluster for (Snakemake's ``cpus_per_task``, ``gpu``, ``mem_mb``)."""

    cpus: int = 2
    """CPU cores."""
    gpus: int = 0
    """GPUs; the job's processes see only these (CUDA_VISIBLE_DEVICES)."""
    mem_mb: int = 8000
    """Memory in MB."""

    def __post_init__(self) -> None:
        require(self.cpus >= 1, f"resources.cpus={self.cpus}; expected >= 1")
        require(self.gpus >= 0, f"resources.gpus={self.gpus}; expected >= 0")
        require(self.mem_mb >= 1, f"resources.mem_mb={self.mem_mb}; expected >= 1")


@dataclass
class ClusterConfig:
    """Where the grid's jobs run, for Snakemake's executor plugins (conf/cluster/<name>.yaml)."""

    name: str = "default"
    """Names the option; equals the file name."""
    partition: Optional[str] = None
    """Slurm partition of jobs without GPUs (null: the cluster's default)."""
    gpu_partition: Optional[str] = None
    """Slurm partition of jobs that take GPUs (null: the cluster's default)."""
    slurm_extra: Optional[str] = None
    """More sbatch flags for every job, e.g. "--qos=normal"."""
    start_s: float = 600.0
    """Seconds a job needs besides its work (start-up, imports, loading the model), added to every
    job's time limit."""
    gpu_manufacturer: str = "nvidia"
    """Kubernetes' GPU resource: nvidia (nvidia.com/gpu) or amd (amd.com/gpu)."""

    def __post_init__(self) -> None:
        require(self.start_s >= 0, f"cluster.start_s={self.start_s}; expected >= 0")
        require_choice(self.gpu_manufacturer, GPU_MANUFACTURERS, "cluster.gpu_manufacturer")
