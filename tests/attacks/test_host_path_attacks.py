"""Host paths the agent could read (issue #11, item 9): a real hostile process in the real
sandbox reads /proc/self/mountinfo, /proc/1/cmdline (bwrap's), its own environment and every
small text file of the areas mounted for it (the workspace, /opt/a2rl, /etc, the grader's
folder and the Python installation), looking for the repository's path (this checkout's and the
one an editable install points to) and the results folder's.

What remains, by the kernel's design: a bind mount shows the path of its source within its
filesystem in mountinfo's 4th field (root), and the workspace is bound from the run's folder.
The test allows that field, and only for the mounts made from the run's folder, of the
agents' Python environment (shown at /opt/agent-python, its host path named nowhere else) and,
with an LLM agent CLI, of its tools folder (shown at /opt/agent-cli, its venv's launchers and
pyvenv.cfg rewritten for that path: nothing there is subtracted before the search)."""

from __future__ import annotations

import base64
import json
import shutil
from importlib import metadata
from pathlib import Path

import pytest
from hostile_sandbox import attack, make_cell

from a2rl.config.compose import compose
from a2rl.isolation.agent_python import base_installation
from a2rl.isolation.sandbox import RELAY
from a2rl.llm.drivers import StackRun
from a2rl.llm.stacks import CLI_VIEW, AgentNotInstalled, stack_of, tools_dir
from checkout import AGENT_PYTHON, REPO

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

# the mounts made from the run's folder, as the agent sees them: their mountinfo root field
# names it (the pointers of an editable install are covered by an empty file from there too)
# (/run/a2rl: the harness makes the grader's folder in /tmp, a cell here in the run's folder)
FROM_RUN = ("/workspace", "/workspace/code", "/workspace/output", "/opt/a2rl", "/etc/passwd",
            "/etc/group", "/run/a2rl", RELAY,  # RELAY: the network policy's port forwarder
            # the agents' environment's bin/ and pyvenv.cfg, written with neutral paths
            "/opt/agent-python/bin", "/opt/agent-python/pyvenv.cfg")


def editable_source() -> list[str]:
    """Where an editable install of a2rl points (the shared checkout), if there is one."""
    try:
        url = json.loads(metadata.distribution("a2rl").read_text("direct_url.json") or "{}")
    except metadata.PackageNotFoundError:
        return []
    path = url.get("url", "")
    return [path.removeprefix("file://")] if path.startswith("file://") else []


PROGRAM = r'''
import base64, sysconfig
secrets = json.loads(base64.b64decode(sys.argv[1]))  # encoded: the command line is searched
more_areas = json.loads(base64.b64decode(sys.argv[2]))  # an LLM agent CLI's folders
def found_in(text):
    return [s for s in secrets if s in text]
hits = {}
def check(name, text):
    for s in found_in(text):
        hits.setdefault(s, []).append(name)
mountinfo = open("/proc/self/mountinfo").read()
out["mountinfo"] = [line.split() for line in mountinfo.splitlines()
                    if found_in(" ".join(line.split()[:3] + line.split()[4:]))]
out["mount_roots"] = {line.split()[4]: line.split()[3] for line in mountinfo.splitlines()
                      if found_in(line.split()[3])}
check("/proc/1/cmdline", open("/proc/1/cmdline", "rb").read().decode(errors="replace"))
check("/proc/self/environ", open("/proc/self/environ", "rb").read().decode(errors="replace"))
check("os.environ", json.dumps(dict(os.environ)))
areas = ["/workspace", "/opt/a2rl", "/etc", "/run/a2rl", sys.prefix, sys.base_prefix,
         sysconfig.get_paths()["purelib"], *more_areas]
for area in more_areas:  # a CLI's venv: where its own interpreter says it lives
    python = os.path.join(area, "venv", "bin", "python")
    if os.path.exists(python):
        import subprocess
        probe = "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, *sys.path]))"
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True)
        out["cli_python"] = json.loads(done.stdout) if done.returncode == 0 else done.stderr
        check(python + " sys.path", done.stdout + done.stderr)
seen = set()
files = 0
# the distribution's own documentation is the OS's text, not the host's state (git's release
# notes quote a home folder's checkout path, which may be where the repository is)
DISTRO_DOCS = ("/usr/share/doc/", "/usr/share/man/")
for area in areas:
    for dirpath, dirnames, filenames in os.walk(area):
        if (dirpath + "/").startswith(DISTRO_DOCS):
            continue
        for name in filenames:
            path = os.path.join(dirpath, name)
            if path in seen:
                continue
            seen.add(path)
            try:
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode) or st.st_size > 262144:
                    continue
                data = open(path, "rb").read()
            except OSError:
                continue
            if b"\0" in data[:1024]:
                continue  # not text
            files += 1
            check(path, data.decode(errors="replace"))
out["files"] = files
out["hits"] = {s: names[:20] for s, names in hits.items()}
try:
    import a2rl
    out["import_a2rl"] = a2rl.__file__
except ImportError as err:
    out["import_a2rl"] = "ImportError"
report()
'''


def from_agent_python(roots: dict[str, str]) -> set[str]:
    """The mounts of the agents' Python environment's own folders (lib/, include/, ...): shown
    at /opt/agent-python, their root field names where the environment lives (the kernel's
    doing, as for the run's folder)."""
    real = str(AGENT_PYTHON.resolve())
    return {view for view, root in roots.items()
            if view.startswith("/opt/agent-python/") and root.startswith(real)}


def test_no_host_path_of_the_repository_or_results_is_readable(tmp_path):
    cell = make_cell(tmp_path)
    secrets = sorted({str(REPO), str(REPO.resolve()), str(cell.root), *editable_source()})
    result = attack(cell, PROGRAM, encoded(secrets), encoded([]), timeout_s=120).result

    assert result["files"] > 1000, result["files"]  # the walk did read the Python installation
    assert result["hits"] == {}, result["hits"]
    assert result["import_a2rl"] == "ImportError"  # the editable finder is not there
    # mountinfo: a secret only in the root field, and only of the mounts from the run's folder
    assert result["mountinfo"] == [], result["mountinfo"]
    roots = result["mount_roots"]
    venv = from_agent_python(roots)
    assert set(roots) - venv <= set(FROM_RUN) | pointers(result), roots
    assert all(root.startswith(str(cell.run)) for view, root in roots.items()
               if view not in venv)
    # bwrap's options (the environment, a run's token) were read from a file it removed
    assert not (cell.run / "sandbox-etc" / "bwrap.args").exists()


def test_an_llm_agent_clis_venv_names_no_host_path(tmp_path):
    """mini-SWE-agent's tools folder and venv, mounted as a run mounts them (StackRun.mounts):
    its files, its launchers and its interpreter's sys.prefix and sys.path name neither the
    repository, the shared checkout the tools live in, nor the results; its mounts' root fields
    name the tools folder only."""
    stack, version = stack_of("mini_swe_agent"), compose(["agent=mini_swe_agent"]).agent.version
    tools = tools_dir(REPO / "resources", stack.name, version)
    try:
        stack.check_installed(tools, version)
    except AgentNotInstalled as err:
        pytest.skip(str(err))
    cell = make_cell(tmp_path)
    agent_dir = cell.run / "agent"
    agent_dir.mkdir(mode=0o777)
    agent_dir.chmod(0o777)
    mounts = StackRun(stack, tools, agent_dir).mounts()
    cell.sandbox.ro_views, cell.sandbox.venvs = mounts["ro_views"], mounts["venvs"]
    cell.sandbox.extra_rw = mounts["extra_rw"]
    secrets = sorted({str(REPO), str(REPO.resolve()), str(cell.root), *editable_source(),
                      str(tools), str(tools.resolve())})
    result = attack(cell, PROGRAM, encoded(secrets), encoded([CLI_VIEW]), timeout_s=240).result

    prefix, base, *path = result["cli_python"]
    # its base: a Python installation of its own at a neutral path, or the system's under /usr
    assert prefix == f"{CLI_VIEW}/venv" and (base.startswith("/opt/python") or base == "/usr"), \
        result["cli_python"]
    assert all(p.startswith(("/opt/", "/usr/")) for p in path if p), path
    assert result["files"] > 2000, result["files"]  # the CLI's venv was read too
    assert result["hits"] == {}, result["hits"]
    assert result["mountinfo"] == [], result["mountinfo"]
    roots = result["mount_roots"]
    cli = {view for view, root in roots.items()
           if (view == CLI_VIEW or view.startswith(CLI_VIEW + "/"))
           and root.startswith(str(tools.resolve()))}
    venv = from_agent_python(roots)
    # from the run's folder too: the agent folder, the venv's rewritten bin/ and pyvenv.cfg
    from_run = {*FROM_RUN, "/run/a2rl-agent", f"{CLI_VIEW}/venv/bin", f"{CLI_VIEW}/venv/pyvenv.cfg"}
    assert set(roots) - venv - cli <= from_run | pointers(result), roots
    assert all(root.startswith(str(cell.run)) for view, root in roots.items()
               if view not in venv | cli)


def test_home_path_is_readable_only_where_the_python_installation_lives(tmp_path):
    """The host home folder: absent, unless the Python installation the sandbox mounts is
    under it (pyenv in /root here): then only that installation's own files and its mount's
    root field name it; the agent's interpreter, sys.prefix and sys.path do not."""
    cell = make_cell(tmp_path)
    home = str(Path.home())
    result = attack(cell, PROGRAM, encoded([home]), encoded([]), timeout_s=120).result
    base = str(base_installation(AGENT_PYTHON))
    if not base.startswith(home + "/"):  # a system Python: no mount names the home folder
        assert result["mount_roots"] == {}, result
    # The home's path as text: a base installation under it (pyenv's, shown at /opt/python)
    # names it in its own files (sysconfig's build flags, python3-config), and the mountinfo
    # root field of the base's and the agents' environment's mounts names their host paths;
    # library sources in either may hold the string "/root" as well. Nothing else does, and the
    # interpreter's path (the agent's command, a launcher's #!) is the neutral one. When the
    # home is /root, the sandbox's own passwd names it too.
    python = ("/opt/python/", "/opt/agent-python/")
    allowed = {"/etc/passwd"} if home == "/root" else set()
    for names in result["hits"].values():
        for name in names:
            assert name.startswith(python) or name in allowed, name
    assert set(result["mount_roots"]) <= {"/opt/python"} | from_agent_python(
        result["mount_roots"]) | pointers(result), result["mount_roots"]


def encoded(secrets: list[str]) -> str:
    return base64.b64encode(json.dumps(secrets).encode()).decode()


def pointers(result: dict) -> set[str]:
    """Covered editable-install files (bound from the run's empty file)."""
    return {view for view in result["mount_roots"]
            if "site-packages" in view or "dist-packages" in view}
