"""Installing a dataset under ``paths.data`` as its manifest lays it out, from its official URLs
(or a mirror of them) or from a folder the user already has, and saying what is installed.

Every file is checked against the manifest's sha256 before it takes its place (``transfer``);
a file whose manifest has no checksum yet is refused unless the user accepts it
(``accept_unpinned``), and then its checksum is recorded. An archive is unpacked into a
temporary folder beside its destination and renamed into place whole. What was installed, from
where, with which checksums, is kept in ``<paths.data>/.a2rl-data/<dataset>.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from a2rl.common.files import utc_now, write_json_atomic

from .manifest import Copy, DataError, DataFile, Dataset, Manifests, relative_to_data
from .transfer import download, part_of, sha256_of, verify_and_place

RECORDS = ".a2rl-data"
MIRROR_ENV = "A2RL_DATA_MIRROR"


def record_path(data_root: Path, name: str) -> Path:
    return Path(data_root) / RECORDS / f"{name}.json"


def read_record(data_root: Path, name: str) -> dict[str, Any] | None:
    path = record_path(data_root, name)
    return json.loads(path.read_text()) if path.is_file() else None


def tree_digest(folder: Path) -> str:
    """sha256 of the folder's ``MANIFEST.sha256`` lines (``<sha256>  <path>``, paths relative to
    the folder's parent, sorted): one checksum for a tree of files."""
    files = sorted((p.relative_to(folder.parent).as_posix(), p)
                   for p in folder.rglob("*") if p.is_file())
    lines = "".join(f"{sha256_of(p)}  {rel}\n" for rel, p in files)
    return hashlib.sha256(lines.encode()).hexdigest()


@dataclass
class Options:
    """Where files come from: ``mirror`` (a base URL holding them under their mirror paths) or
    ``source`` (a folder), else the official URLs; ``accept_unpinned`` installs a file the
    manifest has no checksum for and records the one it has."""

    mirror: str | None = None
    source: Path | None = None
    accept_unpinned: bool = False


class NotInFolder(DataError):
    """A ``--from`` folder lacks one of a dataset's files."""


def fetch(dataset: Dataset, data_root: Path, options: Options) -> dict[str, Any]:
    """Install every file of ``dataset``; returns (and writes) its install record. From a
    folder, the files it has are installed and those it lacks listed under ``missing`` (a
    shared copy may hold part of a dataset); none at all is an error."""
    data_root = Path(data_root)
    installed, missing = {}, []
    try:
        for entry in dataset.files:
            if options.source is None:
                installed[entry.path] = _from_url(entry, data_root, options)
                continue
            try:
                installed[entry.path] = _from_folder(entry, data_root, options)
            except NotInFolder as err:
                if len(missing) + 1 == len(dataset.files):
                    raise
                missing.append(str(err))
    finally:  # what did get installed is recorded, also when a later file fails
        record = {"dataset": dataset.name, "version": dataset.version,
                  "licence": dataset.licence, "installed_at": utc_now(), "files": installed,
                  "missing": missing}
        if installed:
            write_json_atomic(record_path(data_root, dataset.name), record)
    return record


def _refuse_unpinned(entry: DataFile, checksum: str | None, options: Options,
                     where: str) -> None:
    if not checksum and not options.accept_unpinned:
        raise DataError(
            f"{entry.path}: the manifest records no checksum for {where} yet, so it cannot be "
            f"verified; pass --accept-unpinned to install it anyway (its sha256 is then recorded "
            f"in {RECORDS}/ and shown by `a2rl data status`)")


def _from_url(entry: DataFile, data_root: Path, options: Options) -> dict[str, Any]:
    mirror = options.mirror or os.environ.get(MIRROR_ENV)
    url = f"{mirror.rstrip('/')}/{entry.mirror_path}" if mirror else entry.url
    if not url:
        raise DataError(f"{entry.path}: no URL (the manifest names none; use --from DIR)")
    _refuse_unpinned(entry, entry.sha256, options, "the official file")
    if not entry.archive:
        digest = download(url, data_root / entry.path, entry.sha256, entry.size)
        return {"from": url, "sha256": digest, "pinned": entry.pinned, "form": "official"}
    archive = data_root / entry.mirror_path
    digest = download(url, archive, entry.sha256, entry.size)
    return {"from": url, "sha256": digest, "tree_sha256": _unpack(archive, entry, data_root),
            "pinned": entry.pinned, "form": "official"}


def _unpack(archive: Path, entry: DataFile, data_root: Path) -> str:
    """Unpack ``archive`` (it holds ``<name of entry.path>/...``) into a temporary folder
    beside ``entry.path``, rename it into place and delete the archive (also when unpacking
    fails); returns the tree's checksum."""
    try:
        return _unpack_zip(archive, entry, data_root)
    finally:
        archive.unlink(missing_ok=True)


def _unpack_zip(archive: Path, entry: DataFile, data_root: Path) -> str:
    if entry.archive != "zip":
        raise DataError(f"{entry.path}: archive kind {entry.archive!r} is not supported (zip)")
    dest = data_root / entry.path
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}.unpack-") as tmp:
        with zipfile.ZipFile(archive) as zipped:
            for member in zipped.namelist():
                parts = PurePosixPath(member).parts
                if PurePosixPath(member).is_absolute() or ".." in parts:
                    raise DataError(f"{archive.name}: member {member!r} leaves the folder")
                if parts and parts[0] != dest.name:
                    raise DataError(f"{archive.name}: member {member!r} is not under "
                                    f"{dest.name}/ (the manifest's layout)")
            zipped.extractall(tmp)
        _replace_tree(Path(tmp) / dest.name, dest)
    return tree_digest(dest)


def _replace_tree(new: Path, dest: Path) -> None:
    """Put the folder ``new`` at ``dest``; an older ``dest`` is moved aside first and deleted
    after, so ``dest`` is the old tree or the new one, whole."""
    old = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        os.replace(dest, old)
    os.replace(new, dest)
    if old is not None:
        shutil.rmtree(old)


def _candidates(folder: Path, path: str) -> list[Path]:
    """Where a folder may hold ``path``: at the same place as under paths.data, or by name at
    its top (a folder of downloads)."""
    return [folder / path, folder / PurePosixPath(path).name]


def _from_folder(entry: DataFile, data_root: Path, options: Options) -> dict[str, Any]:
    """The official file (or archive, or its unpacked tree) from the folder, else a known copy;
    an official file without a checksum only with ``accept_unpinned`` (a known copy is
    checked by its own)."""
    folder = options.source
    official = [f for f in _candidates(folder, entry.mirror_path if entry.archive
                                       else entry.path) if f.is_file()]
    if official and (entry.pinned or options.accept_unpinned):
        return _install_file(official[0], entry, data_root, options)
    for copy in entry.copies:
        for found in _candidates(folder, copy.found_as or copy.path):
            if found.is_dir():
                return _install_tree(found, entry, data_root, options, copy)
            if found.is_file():
                return _install_copy(found, copy, entry, data_root, options)
    if official:
        return _install_file(official[0], entry, data_root, options)  # refused: unpinned
    if entry.archive:
        for found in _candidates(folder, entry.path):
            if found.is_dir():
                return _install_tree(found, entry, data_root, options)
    names = [entry.mirror_path if entry.archive else entry.path,
             *(c.found_as or c.path for c in entry.copies)]
    raise NotInFolder(f"{folder}: none of {', '.join(names)} (nor their file names at its "
                      f"top) is there")


def _copy_to_part(found: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_of(dest)
    shutil.copyfile(found, part)
    return part


def _install_file(found: Path, entry: DataFile, data_root: Path,
                  options: Options) -> dict[str, Any]:
    _refuse_unpinned(entry, entry.sha256, options, "the official file")
    if not entry.archive:
        dest = data_root / entry.path
        digest = verify_and_place(_copy_to_part(found, dest), dest, entry.sha256, entry.size,
                                  str(found))
        return {"from": str(found), "sha256": digest, "pinned": entry.pinned, "form": "official"}
    archive = data_root / entry.mirror_path
    digest = verify_and_place(_copy_to_part(found, archive), archive, entry.sha256, entry.size,
                              str(found))
    return {"from": str(found), "sha256": digest, "tree_sha256": _unpack(archive, entry,
                                                                         data_root),
            "pinned": entry.pinned, "form": "official"}


def _install_copy(found: Path, copy: Copy, entry: DataFile, data_root: Path,
                  options: Options) -> dict[str, Any]:
    _refuse_unpinned(entry, copy.sha256, options, f"the copy {copy.path}")
    dest = data_root / copy.path
    digest = verify_and_place(_copy_to_part(found, dest), dest, copy.sha256, None, str(found))
    return {"from": str(found), "path": copy.path, "sha256": digest,
            "pinned": bool(copy.sha256), "form": "copy", "note": copy.note}


def _install_tree(found: Path, entry: DataFile, data_root: Path, options: Options,
                  copy: Copy | None = None) -> dict[str, Any]:
    """A folder copied whole and checked by its tree checksum: the official archive's unpacked
    tree, or a known copy of it."""
    dest = data_root / (copy.path if copy else entry.path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}.copy-") as tmp:
        staged = Path(tmp) / dest.name
        shutil.copytree(found, staged)
        digest = tree_digest(staged)
        known = {c.tree_sha256: c for c in entry.copies if c.tree_sha256}
        match = digest in known
        if not match and not options.accept_unpinned:
            raise DataError(f"{found}: tree sha256 {digest} matches none the manifest knows "
                            f"({', '.join(sorted(known)) or 'none'}); nothing installed (pass "
                            f"--accept-unpinned to install it anyway, recording its checksum)")
        _replace_tree(staged, dest)
    return {"from": str(found), "path": str(dest.relative_to(data_root)), "tree_sha256": digest,
            "pinned": match, "form": "copy" if match else "unpacked tree",
            "note": known[digest].note if match else ""}


def missing_files(dataset: Dataset, data_root: Path) -> list[str]:
    """The dataset's files that are absent: for each entry, neither the official path nor any
    accepted copy is there."""
    return [f.path for f in dataset.files
            if not any((Path(data_root) / p).exists() for p in (f.path, *(c.path
                                                                        for c in f.copies)))]


def dataset_row(dataset: Dataset, data_root: Path) -> dict[str, Any]:
    """One dataset's state for ``a2rl data status``."""
    missing = missing_files(dataset, data_root)
    record = read_record(data_root, dataset.name) or {}
    files = record.get("files", {})
    state = ("no files to fetch" if not dataset.files else
             "missing" if len(missing) == len(dataset.files) else
             "partial" if missing else
             "installed" if files else "present (not installed by a2rl data)")
    return {"dataset": dataset.name, "tasks": list(dataset.tasks), "state": state,
            "where": str(Path(data_root)), "version": dataset.version,
            "licence": dataset.licence, "missing": missing,
            "unpinned": sorted(p for p, f in files.items() if not f.get("pinned")),
            "forms": sorted({f.get("form", "") for f in files.values()}),
            "package": dataset.package}


def export(dataset: Dataset, data_root: Path, out: Path) -> list[str]:
    """Copy the installed files of ``dataset`` (official or accepted copies) into ``out`` in the
    same layout, for ``--from`` elsewhere; returns what was written."""
    written = []
    for path in dataset.paths():
        src = Path(data_root) / path
        if not src.exists():
            continue
        dest = Path(out) / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest, dirs_exist_ok=True)
        else:
            shutil.copyfile(src, dest)
        written.append(path)
    record = record_path(data_root, dataset.name)
    if record.is_file():
        (Path(out) / RECORDS).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(record, record_path(out, dataset.name))
    if dataset.files and not written:
        raise DataError(f"{dataset.name}: nothing installed under {data_root} to export "
                        f"(run `a2rl data fetch {dataset.name}` first)")
    return written


def data_problems(task, manifests: Manifests) -> list[str]:
    """What ``task`` (a built Task) reads that is missing, one line per dataset with the
    command that gets it: the one check behind `a2rl data status`, the workflow's planning and
    `a2rl doctor`."""
    missing: dict[str | None, list[str]] = {}
    for path in task.data_files():
        if not Path(path).exists():
            relative = relative_to_data(path, task.data_root)
            dataset = manifests.providing(relative) if relative else None
            missing.setdefault(dataset.name if dataset else None, []).append(str(path))
    return [f"task {task.cfg.id}: {', '.join(paths)} missing; "
            + (f"run `a2rl data fetch {name}`" if name else
               "no data manifest provides it; see the task's docs")
            for name, paths in missing.items()]


def grid_data_problems(cfgs) -> list[str]:
    """``data_problems`` of each task the composed configs ``cfgs`` name (once per task id);
    a task configured but not implemented is left to its prepare job."""
    from a2rl.task.base import TaskNotImplemented, load_task

    from .manifest import load_manifests

    manifests = load_manifests()
    problems: dict[str, list[str]] = {}
    for cfg in cfgs:
        if cfg.task.id in problems or not cfg.task.implemented:
            continue
        try:
            task = load_task(cfg.task, Path(cfg.paths.root) / cfg.paths.data)
        except TaskNotImplemented:
            continue
        problems[cfg.task.id] = data_problems(task, manifests)
    return [p for found in problems.values() for p in found]
