"""The data manifests: one ``data.yaml`` in each task plugin's package, beside its
``conf/task/``. A manifest lives with its task, not in one file under src/, because tasks are
plugins: a task installed from another package brings its own data entry, and nothing in a2rl
names a task.

A manifest holds ``datasets`` (name -> entry) and ``variants`` (task id -> what the offline
variant makes instead). A dataset entry::

    webshop:
      title: ...
      tasks: [webshop]                  # task ids whose official configs read it
      source: https://...               # the upstream project
      version: ...                      # the commit, release or Hub revision the URLs name
      licence: MIT
      files:
        - path: webshop/items_shuffle_1000.json     # where it goes, relative to paths.data
          url: https://...                          # the URL the upstream's own script uses
          sha256: <hex> | null                      # null: not pinned yet (see install)
          size: 4467013                             # bytes, when known
          archive: zip                              # optional: unpacks to `path` (a folder)
          copies:                                   # other published forms `--from` accepts
            - {path: deepsearchqa/DSQA-full.json, sha256: <hex>, note: ...}
            - {path: <installed as>, found_as: <its name in the folder>, ...}

A folder's checksum (an unpacked archive, a copy of one) is ``tree_sha256``: the sha256 of its
``MANIFEST.sha256`` lines (``<sha256>  <path>``, paths relative to the folder's parent,
sorted), the file ``a2rl data export`` writes beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from a2rl.common.plugins import PluginError, usable

MANIFEST = "data.yaml"


class DataError(RuntimeError):
    """A dataset that cannot be fetched, installed or read as its manifest says."""


@dataclass(frozen=True)
class Copy:
    """A published form other than the official file that ``--from`` accepts, found in the
    folder as ``found_as`` (default: ``path``) and installed at ``path`` (the official path
    when the form is the same, else its own, which the task reads too), with its own
    checksum."""

    path: str
    found_as: str | None = None
    sha256: str | None = None
    tree_sha256: str | None = None
    note: str = ""


@dataclass(frozen=True)
class DataFile:
    path: str
    url: str | None = None
    sha256: str | None = None
    size: int | None = None
    archive: str | None = None
    copies: tuple[Copy, ...] = ()

    @property
    def mirror_path(self) -> str:
        """Where a mirror (``--mirror URL``) holds it: the file's own path, or for an archive
        its file name in the folder it unpacks into."""
        if self.archive and self.url:
            return str(PurePosixPath(self.path).parent / PurePosixPath(self.url).name)
        return self.path

    @property
    def pinned(self) -> bool:
        return bool(self.sha256)


@dataclass(frozen=True)
class Dataset:
    name: str
    package: str
    title: str
    tasks: tuple[str, ...]
    source: str
    version: str
    licence: str
    files: tuple[DataFile, ...]
    note: str = ""

    def paths(self) -> list[str]:
        """Every path (official and accepted copies) this dataset installs."""
        return list(dict.fromkeys(p for f in self.files
                                  for p in (f.path, *(c.path for c in f.copies))))


@dataclass
class Manifests:
    datasets: dict[str, Dataset] = field(default_factory=dict)
    variants: dict[str, str] = field(default_factory=dict)  # task id -> what it makes instead

    def find(self, name: str) -> Dataset:
        """The dataset ``name``, or the one a task id ``name`` reads."""
        if name in self.datasets:
            return self.datasets[name]
        for dataset in self.datasets.values():
            if name in dataset.tasks:
                return dataset
        if name in self.variants:
            raise DataError(f"{name!r} is an offline variant, nothing to fetch: "
                            f"{self.variants[name]}")
        raise DataError(f"no dataset or task {name!r} in the installed tasks' data manifests "
                        f"(known: {', '.join(sorted(self.datasets))})")

    def providing(self, relative: str) -> Dataset | None:
        """The dataset that installs ``relative`` (a path under paths.data), or one of its
        parents or children."""
        target = PurePosixPath(relative)
        for dataset in self.datasets.values():
            for path in map(PurePosixPath, dataset.paths()):
                if target == path or path in target.parents or target in path.parents:
                    return dataset
        return None


def parse(raw: dict[str, Any], package: str, where: str) -> Manifests:
    """A manifest's YAML as dataclasses; a malformed one is a DataError naming ``where``."""
    try:
        datasets = {name: _dataset(name, package, entry)
                    for name, entry in (raw.get("datasets") or {}).items()}
        variants = {str(k): str(v) for k, v in (raw.get("variants") or {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise DataError(f"{where}: malformed data manifest ({type(err).__name__}: {err})") \
            from err
    return Manifests(datasets, variants)


def _dataset(name: str, package: str, entry: dict[str, Any]) -> Dataset:
    files = tuple(_file(f) for f in entry.get("files") or [])
    return Dataset(name=name, package=package, title=str(entry["title"]),
                   tasks=tuple(entry.get("tasks") or [name]), source=str(entry["source"]),
                   version=str(entry["version"]), licence=str(entry["licence"]), files=files,
                   note=str(entry.get("note") or ""))


def _file(entry: dict[str, Any]) -> DataFile:
    path = str(entry["path"])
    if PurePosixPath(path).is_absolute() or ".." in PurePosixPath(path).parts:
        raise ValueError(f"path {path!r} must be relative to paths.data, without '..'")
    copies = tuple(Copy(path=str(c["path"]), found_as=c.get("found_as"), sha256=c.get("sha256"),
                        tree_sha256=c.get("tree_sha256"), note=str(c.get("note") or ""))
                   for c in entry.get("copies") or [])
    return DataFile(path=path, url=entry.get("url"), sha256=entry.get("sha256"),
                    size=entry.get("size"), archive=entry.get("archive"), copies=copies)


def load_manifests() -> Manifests:
    """Every usable task plugin's manifest merged; two plugins naming one dataset is an
    error."""
    merged = Manifests()
    for plugin in usable("tasks").values():
        try:
            path = plugin.folder() / MANIFEST
        except PluginError:
            continue  # `a2rl tasks` reports it
        if not path.is_file():
            continue
        found = parse(yaml.safe_load(path.read_text(encoding="utf-8")) or {}, plugin.package,
                      str(path))
        for name in found.datasets:
            if name in merged.datasets:
                raise DataError(f"{path}: dataset {name!r} is also in package "
                                f"{merged.datasets[name].package!r}")
        merged.datasets |= found.datasets
        merged.variants |= found.variants
    return merged


def relative_to_data(path: Path, data_root: Path) -> str | None:
    """``path`` as a path under ``data_root`` (posix), or None when it lies elsewhere."""
    try:
        return Path(path).resolve().relative_to(Path(data_root).resolve()).as_posix()
    except ValueError:
        return None
