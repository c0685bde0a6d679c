"""bubblewrap command lines, built mount by mount, and what of the host's Python a sandbox sees.

Both sandboxes of a2rl build their command here: the agent's (``a2rl.isolation.sandbox``) and
the code checker's (``a2rl.isolation.codeexec``). bwrap applies its arguments in order, so a
later mount covers an earlier one at the same path or above it; ``BwrapCommand`` keeps the
order its methods are called in.
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

# /bin, /lib, ... as the host has them: links into /usr on merged-/usr systems, folders elsewhere
ROOT_LINKS = ["/bin", "/lib", "/lib64", "/sbin", "/lib32", "/libx32"]
# what an agent's programs need of /etc besides /usr: certificates, name resolution, git and pip
# configuration (its passwd and group are its own, written by a2rl.isolation.sandbox)
AGENT_SYSTEM = ["/usr", "/etc/ssl", "/etc/ca-certificates", "/etc/resolv.conf", "/etc/hosts",
                "/etc/nsswitch.conf", "/etc/localtime", "/etc/ld.so.cache", "/etc/alternatives",
                "/etc/gitconfig", "/etc/pip.conf", "/etc/xdg/pip"]
# a checked program gets the least that runs Python: no network, users or configuration
PROGRAM_SYSTEM = ["/usr", "/etc/ld.so.cache", "/etc/localtime"]


class BwrapCommand:
    """One ``bwrap`` command line; each method appends its arguments and returns the builder."""

    def __init__(self, *flags: str, open_parents: bool = False):
        self.args: list[str] = ["bwrap", *flags]
        # bwrap makes the missing parents of a mount point 0700, root's under a root caller;
        # an agent that bwrap does not map to their owner needs them traversable
        self.open_parents = open_parents

    def add(self, *args: str) -> BwrapCommand:
        self.args += args
        return self

    def identity(self, uid: int) -> BwrapCommand:
        return self.add("--uid", str(uid), "--gid", str(uid))

    def ro_bind(self, host: str | Path, view: str | Path | None = None) -> BwrapCommand:
        view = view if view is not None else host
        return self._parents(view).add("--ro-bind", str(host), str(view))

    def bind(self, host: str | Path, view: str | Path) -> BwrapCommand:
        return self._parents(view).add("--bind", str(host), str(view))

    def _parents(self, view: str | Path) -> BwrapCommand:
        """Create the folders above ``view`` 0755 (a folder that exists already is kept)."""
        if self.open_parents:
            for parent in reversed(Path(view).parents[:-1]):
                self.add("--perms", "0755", "--dir", str(parent))
        return self

    def system(self, paths: Iterable[str]) -> BwrapCommand:
        """The host's ``paths`` that exist, read-only, then the root links."""
        for path in paths:
            if Path(path).exists():
                self.ro_bind(path)
        for link in ROOT_LINKS:
            p = Path(link)
            if p.is_symlink():
                self.add("--symlink", os.readlink(p), link)
            elif p.is_dir():
                self.ro_bind(link)
        return self

    def python_installation(self, prefix: str | Path, view: str | None = None) -> BwrapCommand:
        """A Python installation read-only (at ``view``, else its own path) with its installed
        packages hidden: the standard library, the interpreter and libpython, never the
        harness's packages and their data (a venv's interpreter is a link into such an
        installation)."""
        view = view or str(prefix)
        self.ro_bind(prefix, view)
        return self.hide(view + p.removeprefix(str(prefix)) for p in package_dirs(Path(prefix)))

    def hide(self, paths: Iterable[str]) -> BwrapCommand:
        """Cover each of ``paths`` with an empty read-only tmpfs."""
        for path in paths:
            self.add("--tmpfs", path, "--remount-ro", path)
        return self

    def environment(self, env: Mapping[str, str]) -> BwrapCommand:
        """Only ``env``: nothing of the caller's environment passes."""
        self.add("--clearenv")
        for key, value in env.items():
            self.add("--setenv", key, value)
        return self

    def run(self, chdir: str, argv: Iterable[str], wrapper: Iterable[str] = (),
            args_file: Path | None = None) -> list[str]:
        """The finished command: ``argv`` in ``chdir``, started through ``wrapper`` (bwrap
        options that must come last, then a program that execs the rest) when there is one.
        With ``args_file`` the options so far (mounts, environment) are written there and bwrap
        reads them from a descriptor (``--args``): its command line, which the sandbox sees as
        /proc/1/cmdline, then names no host path. The file is removed as bwrap starts."""
        wrapper = list(wrapper)
        rest = ["--chdir", chdir, *(wrapper or ["--"]), *argv]
        if args_file is None:
            return [*self.args, *rest]
        fd = os.open(args_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(b"".join(arg.encode() + b"\0" for arg in self.args[1:]))
        # the file is opened, removed (it holds the environment: the run's token) and read by bwrap
        return ["sh", "-c", 'exec 3<"$0" && rm -f "$0" && exec bwrap --args 3 "$@"',
                str(args_file), *rest]


def drop_to(uid: int) -> list[str]:
    """The ``wrapper`` of ``BwrapCommand.run`` for a root caller: bwrap keeps only the
    capabilities that change uids and empty the bounding set, then setpriv makes the process
    ``uid`` (and gid), with no supplementary groups, no capability in any set (bounding set
    included) and no_new_privs, so nothing it executes (a setuid file included) gains one."""
    return ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
            "--cap-add", "CAP_SETPCAP", "--",
            "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--"]


def python_prefixes() -> list[str]:
    """Folders of the base Python installation (stdlib, lib-dynload, libpython) outside /usr."""
    roots = {str(Path(p).resolve()) for p in (sys.base_prefix, sys.base_exec_prefix,
                                              Path(sys.executable).resolve().parent.parent)}
    return _topmost({r for r in roots if Path(r).exists() and not r.startswith("/usr/")
                     and r != "/usr"})


def package_dirs(prefix: Path) -> list[str]:
    """The site-packages and dist-packages folders of the installation at ``prefix``."""
    found = set()
    for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages",
                    "local/lib/python3*/site-packages", "local/lib/python3*/dist-packages"):
        found.update(str(p) for p in prefix.glob(pattern) if p.is_dir() and not p.is_symlink())
    return sorted(found)


def hidden_package_dirs() -> list[str]:
    """Installed-package folders the sandbox would otherwise show: the base installation's
    site-packages and the system's (under /usr). Programs get the standard library only."""
    candidates = set(site.getsitepackages([sys.base_prefix, sys.base_exec_prefix]))
    candidates.update(package_dirs(Path("/usr")))
    visible = python_prefixes() + ["/usr"]
    found = set()
    for path in candidates:
        p = Path(path)
        if p.is_dir() and not p.is_symlink():
            resolved = str(p.resolve())
            if any(resolved.startswith(v + "/") for v in visible):
                found.add(resolved)
    return sorted(found)


def _topmost(roots: set[str]) -> list[str]:
    """The folders of ``roots`` not inside another one, sorted: nested binds would repeat."""
    ordered = sorted(roots)
    return [r for r in ordered if not any(r != o and r.startswith(o + "/") for o in ordered)]
