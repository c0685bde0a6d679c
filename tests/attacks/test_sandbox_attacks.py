"""Attacks on the agent sandbox from inside it (issue #11, items 1, 2 and 6): a real hostile
process in the real sandbox, started the way the harness starts an agent. Each test asserts the
attack was refused, with the error the kernel gives, and that the host is as it was. Under a root
harness (CI, containers) the agent must be an unprivileged host uid; under an ordinary user it is
that user, in a user namespace.

Writes to kernel settings are tried with the value the setting already has, so that a sandbox
that fails to stop them still changes nothing on the machine running the tests.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import uuid
from pathlib import Path

import pytest
from hostile_sandbox import LEDGER_TEXT, SEALED_TEXT, assert_refused, attack, make_cell

pytestmark = [pytest.mark.attacks,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")


@pytest.fixture
def cell(tmp_path):
    return make_cell(tmp_path)


def sysctl_rewrite(path: str) -> str:
    """A program line: write ``path`` its own current value (a no-op should it succeed)."""
    return (f"attempt({path!r}, lambda: open({path!r}, 'w').write(open({path!r}).read()) "
            "and None)\n")


def test_core_pattern_cannot_be_set(cell):
    """Item 1: a core_pattern of '|script' runs the script as host root when a process
    crashes."""
    before = CORE_PATTERN.read_text()
    result = attack(cell, sysctl_rewrite(str(CORE_PATTERN)) + "report()").result
    assert_refused(result, str(CORE_PATTERN))
    assert CORE_PATTERN.read_text() == before


def test_modprobe_path_cannot_be_set(cell):
    """Item 1's twin: the kernel runs /proc/sys/kernel/modprobe as root for an unknown binary
    format. (Kernels without module support have no such file: refused as ENOENT.)"""
    result = attack(cell, sysctl_rewrite("/proc/sys/kernel/modprobe") + "report()").result
    assert_refused(result, "/proc/sys/kernel/modprobe")


def test_no_sysctl_is_writable_and_proc_sys_is_mounted_read_only(cell):
    program = r'''
writable = []
for dirpath, _, files in os.walk("/proc/sys"):
    for name in files:
        path = os.path.join(dirpath, name)
        try:
            os.close(os.open(path, os.O_WRONLY))  # opening writes nothing
            writable.append(path)
        except OSError:
            pass
out["writable"] = writable
out["checked"] = sum(len(f) for _, _, f in os.walk("/proc/sys"))
out["mount"] = [line.split()[5] for line in open("/proc/self/mountinfo")
                if line.split()[4] == "/proc/sys"]
report()
'''
    result = attack(cell, program).result
    assert result["checked"] > 100 and result["writable"] == []
    assert result["mount"] and result["mount"][0].split(",")[0] == "ro", result["mount"]


def test_no_top_level_proc_file_is_writable(cell):
    """/proc/sysrq-trigger, /proc/kmsg and the like write the host's kernel."""
    program = r'''
writable = []
for name in os.listdir("/proc"):
    path = "/proc/" + name
    if name.isdigit() or not os.path.isfile(path):
        continue
    try:
        os.close(os.open(path, os.O_WRONLY))
        writable.append(path)
    except OSError:
        pass
out["writable"] = writable
report()
'''
    assert attack(cell, program).result["writable"] == []


def test_setuid_file_is_not_the_host_roots_and_does_not_elevate(cell):
    """Item 2: a setuid file the agent leaves in output/ must not give root to whoever runs it
    on the host, nor anything inside (writable binds are nosuid)."""
    program = r'''
import shutil
target = "/workspace/output/suid-python"
shutil.copy(sys.executable, target)
attempt("chmod", lambda: os.chmod(target, 0o4755))
attempt("chown_root", lambda: os.chown(target, 0, 0))
import subprocess
# a copy of the interpreter outside its installation finds its standard library by PYTHONHOME
# (its built-in prefix is a host path, absent in the sandbox)
out["euid_in_copy"] = subprocess.run([target, "-c", "import os; print(os.geteuid())"],
                                     capture_output=True, text=True,
                                     env={**os.environ, "PYTHONHOME": sys.base_prefix}
                                     ).stdout.strip()
out["uid"] = os.getuid()
out["options"] = [line.split()[5] for line in open("/proc/self/mountinfo")
                  if line.split()[4] == "/workspace/output"][0]
report()
'''
    result = attack(cell, program).result
    assert_refused(result, "chown_root")
    assert result["euid_in_copy"] == str(result["uid"])
    assert {"nosuid", "nodev"} <= set(result["options"].split(",")), result["options"]
    host = (cell.workspace / "output" / "suid-python").stat()
    assert host.st_uid != 0 and host.st_uid == cell.sandbox.host_uid
    # the bit may stay, but only on a file of the agent's own unprivileged uid
    assert not (host.st_mode & stat.S_ISUID) or host.st_uid != 0


def test_device_nodes_cannot_be_made(cell):
    program = r'''
mem = stat.S_IFCHR | 0o666
attempt("mknod_output", lambda: os.mknod("/workspace/output/mem", mem, os.makedev(1, 1)))
attempt("mknod_tmp", lambda: os.mknod("/tmp/vda", stat.S_IFBLK | 0o666, os.makedev(254, 0)))
attempt("open_disk", lambda: open("/dev/vda", "rb").read(1))
report()
'''
    result = attack(cell, program).result
    assert_refused(result, "mknod_output", "mknod_tmp", "open_disk")
    assert not (cell.workspace / "output" / "mem").exists()


def test_nothing_can_be_mounted_or_remounted(cell):
    program = r'''
def mount(source, target, fstype, flags):
    libc_call("mount", source.encode(), target.encode(), fstype.encode(), flags, None)
MS_REMOUNT, MS_BIND, MS_RDONLY = 32, 4096, 1
attempt("tmpfs", lambda: mount("none", "/workspace/output", "tmpfs", 0))
attempt("remount_rw", lambda: mount("none", "/workspace/data", "", MS_REMOUNT | MS_BIND))
attempt("proc_sys_rw", lambda: mount("none", "/proc/sys", "", MS_REMOUNT | MS_BIND))
attempt("umount_data", lambda: libc_call("umount2", b"/workspace/data", 2))
report()
'''
    result = attack(cell, program).result
    assert_refused(result, "tmpfs", "remount_rw", "proc_sys_rw", "umount_data")


def test_no_capability_survives(cell):
    program = r'''
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines()
              if ":\t" in line)
for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"):
    out[key] = status[key].strip()
out["uid"] = os.getuid()
out["user"] = __import__("pwd").getpwuid(os.getuid()).pw_name
report()
'''
    result = attack(cell, program).result
    for key in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(result[key], 16) == 0, result
    assert result["NoNewPrivs"] == "1" and result["uid"] != 0 and result["user"] == "agent"
    if cell.sandbox.as_root:  # no user namespace: the bounding set is emptied too
        assert int(result["CapBnd"], 16) == 0, result


def test_a_user_namespace_of_its_own_gives_no_host_privilege(cell):
    """Root of a user namespace the agent makes is still the agent's uid to the host."""
    program = r'''
CLONE_NEWUSER = 0x10000000
attempt("unshare", lambda: libc_call("unshare", CLONE_NEWUSER))
attempt("core_pattern", lambda: os.close(os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY)))
attempt("write_data", lambda: open("/workspace/data/train.jsonl", "a").write("x"))
attempt("mknod", lambda: os.mknod("/tmp/null", stat.S_IFCHR | 0o666, os.makedev(1, 3)))
report()
'''
    result = attack(cell, program).result
    assert_refused(result, "core_pattern", "write_data", "mknod")


def test_no_host_owned_file_outside_the_writable_areas_can_be_written(cell):
    """Every folder the agent sees, except its own areas and fresh ones, refuses a new file;
    the harness's files refuse changes."""
    program = r'''
own = ("/workspace/code", "/workspace/output", "/tmp", "/dev/shm", "/proc", "/dev")
writable = []
for top in ("/",):
    for dirpath, dirnames, _ in os.walk(top):
        if dirpath.startswith(own) and dirpath != "/dev":
            dirnames[:] = []
            continue
        if os.access(dirpath, os.W_OK):
            writable.append(dirpath)
out["writable_dirs"] = writable
targets = {"description": "/workspace/description.md", "scores": "/workspace/scores.json",
           "data": "/workspace/data/train.jsonl", "model": "/workspace/base_model/config.json",
           "client": "/opt/a2rl/bin/a2rl", "python": os.__file__, "passwd": "/etc/passwd"}
for name, path in targets.items():
    attempt("write_" + name, lambda p=path: open(p, "a").write("forged"))
    attempt("chmod_" + name, lambda p=path: os.chmod(p, 0o666))
attempt("new_top_level", lambda: open("/workspace/mine", "w").write("x"))
attempt("grader_dir", lambda: open("/run/a2rl/fake.sock", "w").write("x"))
attempt("hardlink_data", lambda: os.link("/workspace/data/train.jsonl", "/workspace/output/l"))
report()
'''
    result = attack(cell, program).result
    assert result["writable_dirs"] == [], result["writable_dirs"]
    assert_refused(result, *[k for k in result if k.startswith(("write_", "chmod_"))],
                   "new_top_level", "grader_dir", "hardlink_data")
    ws = cell.workspace
    assert (ws / "data" / "train.jsonl").read_text() == '{"q": 1}\n'
    assert (ws / "scores.json").read_text() == '{"best": 1}'
    assert (cell.root / "models" / "m" / "config.json").read_text() == "{}"  # hard-linked


def test_sealed_split_and_ledger_are_not_there(cell):
    program = r'''
for i, path in enumerate(sys.argv[1:]):
    attempt(f"read{i}", lambda p=path: open(p).read())
    attempt(f"write{i}", lambda p=path: open(p, "a").write("forged"))
report()
'''
    result = attack(cell, program, str(cell.sealed), str(cell.ledger)).result
    assert_refused(result, "read0", "write0", "read1", "write1")
    assert cell.sealed.read_text() == SEALED_TEXT and cell.ledger.read_text() == LEDGER_TEXT


def test_agent_log_cannot_be_truncated_or_rewritten_through_stdout(cell):
    """Item 6: the agent's stdout is a pipe the harness drains into agent.log."""
    cell.log.write_text("harness: earlier record\n")
    program = r'''
print("before the attack", flush=True)
attempt("ftruncate", lambda: os.ftruncate(1, 0))
attempt("seek", lambda: os.lseek(1, 0, os.SEEK_SET) and None)
attempt("reopen_trunc", lambda: os.close(os.open("/proc/self/fd/1", os.O_WRONLY | os.O_TRUNC)))
out["stdout_is"] = "pipe" if stat.S_ISFIFO(os.fstat(1).st_mode) else "file"
report()
'''
    done = attack(cell, program)
    assert_refused(done.result, "ftruncate", "seek")
    assert done.result["stdout_is"] == "pipe"
    assert done.log.startswith("harness: earlier record\nbefore the attack\n"), done.log


def test_pid_namespace_holds_only_the_sandbox(cell):
    program = r'''
procs = {}
for name in os.listdir("/proc"):
    if name.isdigit():
        try:
            procs[name] = open(f"/proc/{name}/cmdline", "rb").read().split(b"\0")[0].decode()
        except OSError:
            pass
out["procs"] = procs
attempt("kill_host_pid", lambda: os.kill(int(sys.argv[1]), 0))
def attach_init():
    libc_call("ptrace", 16, 1, None, None)  # PTRACE_ATTACH; let it go again at once
    os.waitpid(1, 0x40000000)  # __WALL: until it has stopped
    libc_call("ptrace", 17, 1, None, None)
attempt("ptrace_init", attach_init)
out["init"] = {k: v.strip() for k, v in (line.split(":", 1) for line in
               open("/proc/1/status").read().splitlines()) if k in ("Uid", "CapEff", "CapBnd")}
report()
'''
    result = attack(cell, program, str(os.getpid())).result
    assert_refused(result, "kill_host_pid")
    assert result["procs"]["1"] == "bwrap" and len(result["procs"]) <= 4, result["procs"]
    init = result["init"]
    if cell.sandbox.as_root:  # bwrap's init is root's: out of the agent's reach
        assert result["ptrace_init"] == "EPERM", result
    else:  # the agent's own uid in its user namespace, holding no more than the agent
        assert int(init["CapEff"], 16) == 0 and int(init["CapBnd"], 16) == 0, init


def test_sys_is_absent_or_read_only(cell):
    program = r'''
attempt("write_sys", lambda: open("/sys/kernel/uevent_helper", "w").write("/x"))
attempt("mkdir_sys", lambda: os.mkdir("/sys"))
attempt("write_cgroup", lambda: open("/sys/fs/cgroup/cgroup.procs", "w").write("1"))
report()
'''
    result = attack(cell, program).result
    assert_refused(result, "write_sys", "mkdir_sys", "write_cgroup")


def test_host_network_and_abstract_sockets_are_out_of_reach(cell):
    name = f"a2rl-attack-{uuid.uuid4().hex}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(1)
    tcp = socket.create_server(("127.0.0.1", 0))
    try:
        program = r'''
import socket
def connect_abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0" + sys.argv[1])
attempt("abstract", connect_abstract)
attempt("loopback", lambda: socket.create_connection(("127.0.0.1", int(sys.argv[2])), 2))
attempt("internet", lambda: socket.create_connection(("1.1.1.1", 53), 2))
report()
'''
        result = attack(cell, program, name, str(tcp.getsockname()[1])).result
    finally:
        listener.close()
        tcp.close()
    for key in ("abstract", "loopback", "internet"):
        assert result[key] in {"ECONNREFUSED", "ENETUNREACH", "ENOENT", "timeout"}, result


def test_writable_areas_are_the_agents_own_uid(cell):
    """Under a root harness the areas the agent writes belong to its unprivileged uid, and
    what it writes there is that uid's on the host."""
    program = r'''
open("/workspace/code/train.py", "w").write("print(1)")
open("/tmp/home/.cfg", "w").write("x")
out["home_owner"] = os.stat("/tmp/home").st_uid
report()
'''
    attack(cell, program)
    made = cell.workspace / "code" / "train.py"
    assert made.read_text() == "print(1)"
    assert made.stat().st_uid == cell.sandbox.host_uid
    if cell.sandbox.as_root:
        assert cell.sandbox.host_uid != 0
        for area in ("code", "output"):
            assert (cell.workspace / area).stat().st_uid == cell.sandbox.host_uid
        # another run's agent is another uid: no shared files or per-uid limits
        other = make_cell(cell.root.parent / "other").sandbox
        assert other.host_uid not in (0, cell.sandbox.host_uid)
