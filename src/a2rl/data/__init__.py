"""The tasks' official data: what each task reads, where it comes from, and its checksums
(``manifest``: one ``data.yaml`` per task package), downloading and checking it (``transfer``),
laying it out under ``paths.data`` and reporting what is there (``install``), and the ``a2rl
data`` command (``command``). docs/data.md lists every dataset."""

from .command import main
from .install import Options, fetch, grid_data_problems, read_record
from .manifest import DataError, Manifests, load_manifests

__all__ = ["DataError", "Manifests", "Options", "fetch", "grid_data_problems", "load_manifests",
           "main", "read_record"]
