"""The jail hardened with the system's own tools (issue 25): the kernel's environment, its system call
filter, and a whole grading run by a regular user.

- No variable of the grader's environment is in a kernel's memory, warm or cold: the test puts a secret
  chosen at random into the grader's environment and searches the live kernel's memory for it from
  outside (``/proc/<pid>/mem``, as root), so that the kernel never holds the secret as a search pattern.
- The seccomp filter (``ptgrader.syscalls``) answers EPERM to keyrings and new namespaces, and
  EAFNOSUPPORT to sockets other than local ones (AF_UNIX, AF_NETLINK), EPERM to memory held outside
  the address space (memory files, System V segments and queues, larger socket buffers), while an honest kernel
  still runs torch, its threads, its profiler, a subprocess and local sockets.
- As root, the suite also grades one lab as a uid of no account, as an instructor without root does:
  the honest solution keeps full marks and a hostile submission run by the jail alone scores 0.
"""

from __future__ import annotations

import json
from dataclasses import replace
import os
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ptgrader import cgroups, jail, syscalls
from ptgrader.kernels import GraderTemp
from ptgrader.warm import WarmKernels
from tests import hostile, jail_tools, lab_tools, run_profile
from tests.test_autograde_guard import _jail_spec, _jailed

pytestmark = pytest.mark.skipif(jail.unsupported() != "", reason=jail.unsupported() or "jails work here")
ROOT = os.geteuid() == 0

# ------------------------------------------------------------------------------------------ memory

#: Printed by a kernel: its environment as Python keeps it, its filter, and a fresh random string it holds
#: in memory (the scan must find that one, or a clean scan proves nothing). Its /proc/self/environ (the
#: environment it started with) is read from outside: a forked kernel, whose uid changed, may not read it.
SHOW_ENVIRONMENT = (
    "import json, os, sys\n"
    "held_here = os.urandom(16).hex()\n"
    "status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())\n"
    "print(json.dumps({'os_environ': dict(os.environ), 'seccomp': status['Seccomp'].strip(), 'held_here': held_here,\n"
    "                  'bytecode': sys.dont_write_bytecode}))"
)


def _regions(pid: int) -> Iterator[tuple[int, int, str]]:
    """(start, end, name) of each readable mapping of ``pid`` that the process could have written to.

    Read-only mappings of files hold only what those files hold on disk: not the grader's environment.
    """
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        addresses, permissions, inode = fields[0], fields[1], fields[4]
        name = fields[5] if len(fields) > 5 else "[anonymous]"
        if permissions[0] == "r" and (permissions[1] == "w" or inode == "0"):
            start, end = (int(value, 16) for value in addresses.split("-"))
            yield start, end, name


def _memory_holding(pid: int, needle: bytes, chunk: int = 16 << 20) -> list[str]:
    """The names of the mappings of ``pid`` whose bytes hold ``needle`` (read through /proc/<pid>/mem)."""
    found = []
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
        for start, end, name in _regions(pid):
            tail = b""
            for offset in range(start, end, chunk):
                try:
                    memory.seek(offset)
                    data = tail + memory.read(min(chunk, end - offset))
                except OSError:  # [vvar] and the like cannot be read
                    break
                if needle in data:
                    found.append(name)
                    break
                tail = data[-len(needle):]
    return found


@pytest.mark.skipif(not ROOT, reason="reads a jailed kernel's memory through /proc/<pid>/mem, which needs root")
@pytest.mark.parametrize("start", ["cold", "warm"])
def test_no_variable_of_the_grader_reaches_a_kernels_memory(tmp_path: Path, monkeypatch, start: str) -> None:  # noqa: ANN001
    """The warm server starts with the kernel's environment (a kernel forked from it keeps the server's
    first environment in /proc/self/environ and on its stack); a cold kernel is exec'd with it."""
    secret = "ptgrader-canary-" + secrets.token_hex(16)  # chosen now: this file does not hold it
    monkeypatch.setenv("PTGRADER_SECRET_CANARY", secret)
    grader_folder = GraderTemp.current().path
    warm = WarmKernels(["ipykernel.kernelapp"], grader_folder) if start == "warm" else None
    try:
        if warm is not None:
            warm.start()  # a server of its own, started with the secret in the grader's environment
        with jail_tools.jailed_kernel(tmp_path, warm) as (km, run):
            seen = json.loads(run(SHOW_ENVIRONMENT).outputs[0]["text"])
            first_environment = Path(f"/proc/{km.kernel_pid}/environ").read_bytes()
            holds_own = _memory_holding(km.kernel_pid, seen["held_here"].encode())
            holds_secret = _memory_holding(km.kernel_pid, secret.encode())
            command_line = Path(f"/proc/{km.kernel_pid}/cmdline").read_bytes()
    finally:
        if warm is not None:
            warm.stop()
    assert holds_own, "the scan did not find a string the kernel holds: it cannot vouch for the secret's absence"
    assert holds_secret == [], f"the grader's secret is in the kernel's memory: {holds_secret}"
    assert secret not in json.dumps(seen)
    allowed = set(jail.kernel_env(dict(os.environ)))
    assert secret.encode() not in first_environment
    first = {entry.split(b"=", 1)[0].decode() for entry in first_environment.split(b"\0") if entry}
    assert first <= allowed, first - allowed  # what the process started with: the allow-list, nothing more
    dropped = {(name, value) for name, value in os.environ.items() if name not in allowed}
    assert not dropped & set(seen["os_environ"].items())  # ipykernel sets some of its own (PAGER, ...), never the grader's
    assert seen["seccomp"] == "2"  # a filter, in warm kernels as in cold ones
    assert seen["bytecode"] is True  # the kernel's environment says so, to the warm server too
    # Nor the grader's folders: a warm kernel keeps the server's command line, which names none of them.
    assert str(grader_folder).encode() not in command_line, command_line


def test_the_kernels_environment_is_an_allow_list() -> None:
    """Whatever environment the grader passes, only torch's settings and the jail's own values come out."""
    grader = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "2", "JUPYTERHUB_API_TOKEN": "t", "HOME": "/root", "AWS_SECRET": "s"}
    env = jail.kernel_env(grader)
    assert env["PATH"] == "/usr/bin" and env["OMP_NUM_THREADS"] == "2" and env["HOME"] == jail.HOME
    assert not {"JUPYTERHUB_API_TOKEN", "AWS_SECRET"} & set(env)
    # OpenMP's threads wait without spinning on a shared core, unless the instructor says otherwise
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert jail.kernel_env({**grader, "OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"


# ------------------------------------------------------------------------------------- system calls

#: Run in a jailed process after a line that defines NUMBERS (system call numbers) and CLONE_NEWUSER: each
#: call either succeeds ("ok") or names its errno.
TRY_SYSCALLS = r"""
import ctypes, errno, json, os, resource, socket, subprocess, sys, threading
import torch
libc = ctypes.CDLL(None, use_errno=True)
def outcome(result):
    return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]
report = {}
report["add_key"] = outcome(libc.syscall(NUMBERS["add_key"], b"user", b"ptgrader-test", b"x", 1, -4))  # user keyring
report["keyctl"] = outcome(libc.syscall(NUMBERS["keyctl"], 0, -4, 0))  # KEYCTL_GET_KEYRING_ID
report["unshare"] = outcome(libc.unshare(CLONE_NEWUSER))
child = libc.syscall(NUMBERS["clone"], CLONE_NEWUSER | 17, 0, 0, 0, 0)  # 17: SIGCHLD; a child would run on as a fork
if child == 0:
    os._exit(0)
report["clone_newuser"] = outcome(child)
report["clone3"] = outcome(libc.syscall(NUMBERS["clone3"], 0, 0))  # EINVAL, were it let through
try:  # every core it may run on, as given: a no-op, were it let through
    os.sched_setaffinity(0, os.sched_getaffinity(0))
    report["sched_setaffinity"] = "ok"
except OSError as refused:
    report["sched_setaffinity"] = errno.errorcode[refused.errno]
def family(number):
    try:
        socket.socket(number, socket.SOCK_STREAM if number != socket.AF_NETLINK else socket.SOCK_RAW).close()
        return "ok"
    except OSError as refused:
        return errno.errorcode[refused.errno]
report["AF_VSOCK"] = family(40)
report["AF_PACKET"] = family(17)
report["socketpair AF_VSOCK"] = outcome(libc.socketpair(40, socket.SOCK_STREAM, 0, (ctypes.c_int * 2)()))
# the family with its upper 32 bits set: Linux reads an int, the filter the whole register
report["socket 2**32 + AF_VSOCK"] = outcome(libc.syscall(NUMBERS["socket"], ctypes.c_long(2**32 + 40), 1, 0))
report["socket 2**32 + AF_UNIX"] = outcome(libc.syscall(NUMBERS["socket"], ctypes.c_long(2**32 + 1), 1, 0))
families = [family(number) for number in (socket.AF_UNIX, socket.AF_NETLINK)]  # NETLINK_ROUTE
for name, protocol in (("NETLINK_SOCK_DIAG", 4), ("NETLINK_GENERIC", 16)):  # requests that load modules (round 77)
    report[name] = outcome(libc.socket(socket.AF_NETLINK, socket.SOCK_RAW, protocol))
report["NETLINK 2**32 + NETLINK_GENERIC"] = outcome(libc.syscall(NUMBERS["socket"], socket.AF_NETLINK, 3,
                                                                  ctypes.c_long(2**32 + 16)))
report["quotactl_fd Q_SYNC"] = outcome(libc.syscall(443, os.open("/usr", os.O_RDONLY), ctypes.c_uint(0x800001 << 8), 0, None))
report["AF_INET"] = family(socket.AF_INET)
report["AF_INET6"] = family(socket.AF_INET6)
try:
    os.memfd_create("kept")
    report["memfd_create"] = "ok"
except OSError as refused:
    report["memfd_create"] = errno.errorcode[refused.errno]
report["shmget"] = outcome(libc.shmget(0, 1 << 20, 0o1600))  # IPC_PRIVATE, IPC_CREAT | 0600
report["msgget"] = outcome(libc.msgget(0, 0o1600))
try:
    os.mkfifo("/tmp/fifo")  # a pipe that pipe() and pipe2() did not make
    report["mkfifo"] = "ok"
except OSError as refused:
    report["mkfifo"] = errno.errorcode[refused.errno]
with open("/tmp/leased", "w") as leased:
    report["F_SETLEASE"] = outcome(libc.fcntl(leased.fileno(), 1024, 0))  # F_RDLCK
report["sync"] = outcome(libc.syscall(NUMBERS["sync"]))  # every file system of the machine written back
host = os.open("/usr", os.O_RDONLY)  # a read-only bind of the host's file system: the host's disk underneath
report["syncfs"] = outcome(libc.syncfs(host))
report["F_NOTIFY"] = outcome(libc.fcntl(host, 1026, 0x80000001))  # DN_ACCESS | DN_MULTISHOT
python = os.open(sys.executable, os.O_RDONLY)
advised = libc.posix_fadvise(python, 0, 0, 4)  # POSIX_FADV_DONTNEED; returns the error number itself
report["posix_fadvise"] = "ok" if advised == 0 else errno.errorcode[advised]
report["sync_file_range"] = outcome(libc.sync_file_range(python, 0, 0, 2))  # SYNC_FILE_RANGE_WRITE
size = ctypes.c_int(0)
# a file system's own commands (round 74: BTRFS_IOC_SYNC flushed a host btrfs); FIGETBSZ works on any file
report["ioctl FIGETBSZ"] = outcome(libc.ioctl(python, 2, ctypes.byref(size)))
report["ioctl FS_IOC_GETFLAGS"] = outcome(libc.ioctl(python, ctypes.c_ulong(0x80086601), ctypes.byref(size)))
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # sockets' commands that load modules (round 78)
report["ioctl SIOCGIFVLAN"] = outcome(libc.ioctl(sock.fileno(), 0x8982, ctypes.create_string_buffer(64)))
version = (ctypes.c_ulong * 3)(0, 0, 0)  # BRCTL_GET_VERSION
report["ioctl SIOCGIFBR"] = outcome(libc.ioctl(sock.fileno(), 0x8940, version))
sock.close()
report["ioctl 2**32 + FIGETBSZ"] = outcome(libc.syscall(NUMBERS["ioctl"], python, ctypes.c_long(2**32 + 2),
                                                        ctypes.byref(size)))
libc.mmap.restype = ctypes.c_void_p
mapped = libc.mmap(None, 4096, 1, 2, python, 0)  # PROT_READ, MAP_PRIVATE: the interpreter's own file
report["MADV_PAGEOUT"] = outcome(libc.madvise(ctypes.c_void_p(mapped), 4096, 21))
report["MADV_COLD"] = outcome(libc.madvise(ctypes.c_void_p(mapped), 4096, 20))
report["MADV_MERGEABLE"] = outcome(libc.madvise(ctypes.c_void_p(mapped), 4096, 12))  # KSM's scanner (round 79)
report["PR_SET_MEMORY_MERGE"] = outcome(libc.prctl(67, 1, 0, 0, 0))
# the core limit stays 1 (round 84: lowered to 0, Linux pipes a crash to the machine's handler, as root)
report["prlimit64 RLIMIT_CORE"] = outcome(libc.syscall(NUMBERS["prlimit64"], 0, 4, (ctypes.c_ulong * 2)(0, 1), None))
report["setrlimit RLIMIT_CORE"] = outcome(libc.syscall(NUMBERS["setrlimit"], 4, (ctypes.c_ulong * 2)(0, 1)))
report["RLIMIT_CORE read"] = resource.getrlimit(resource.RLIMIT_CORE)
# reads past the page cache, from the host's disk each time (round 83: O_DIRECT; RWF_DONTCACHE drops what it read)
try:
    os.close(os.open(sys.executable, os.O_RDONLY | os.O_DIRECT))
    report["O_DIRECT"] = "ok"
except OSError as error:
    report["O_DIRECT"] = errno.errorcode[error.errno]
report["F_SETFL O_DIRECT"] = outcome(libc.fcntl(python, 4, ctypes.c_int(os.O_DIRECT)))
how = (ctypes.c_uint64 * 3)(os.O_RDONLY, 0, 0)  # struct open_how: flags, mode, resolve
report["openat2"] = outcome(libc.syscall(NUMBERS["openat2"], -100, b"/etc/hostname", how, 24))
try:
    os.preadv(python, [bytearray(4096)], 0, 0x80)  # RWF_DONTCACHE
    report["RWF_DONTCACHE"] = "ok"
except OSError as error:
    report["RWF_DONTCACHE"] = errno.errorcode[error.errno]
# prctl options and madvise advice are allowlists: others answer EINVAL (round 81)
auxv = ctypes.create_string_buffer(4096)
report["PR_GET_AUXV"] = outcome(libc.prctl(0x41555856, auxv, 4096, 0, 0))
report["PR_SET_MDWE"] = outcome(libc.prctl(65, 0, 0, 0, 0))
report["PR_SET_NAME"] = outcome(libc.prctl(15, b"kernel", 0, 0, 0))
scratch = libc.mmap(None, 8192, 3, 0x22, -1, 0)  # PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS
report["MADV_GUARD_INSTALL"] = outcome(libc.madvise(ctypes.c_void_p(scratch), 4096, 102))
report["MADV_DONTNEED"] = outcome(libc.madvise(ctypes.c_void_p(scratch), 8192, 4))
# a memory policy on a range of a mapping: on a shared tmpfs file it stays with the file (round 80)
report["mbind"] = outcome(libc.syscall(NUMBERS["mbind"], ctypes.c_void_p(mapped), 4096, 1, None, 0, 0))
huge = libc.mmap(None, 2 << 20, 3, 0x40000 | 0x20 | 0x02, -1, 0)  # MAP_HUGETLB: the machine's pool (round 79)
report["MAP_HUGETLB"] = "ok" if huge not in (None, 2**64 - 1) else errno.errorcode[ctypes.get_errno()]
handle = os.pidfd_open(os.getpid())  # the same advice through the process's handle (round 72)
advised = (ctypes.c_void_p * 2)(mapped, 4096)  # one struct iovec
report["process_madvise"] = outcome(libc.syscall(NUMBERS["process_madvise"], handle, advised, 1, 21, 0))
report["landlock_create_ruleset"] = outcome(libc.syscall(NUMBERS["landlock_create_ruleset"], None, 0, 1))  # its ABI
# calls newer than the filter's lists (round 75: open_tree_attr, of the new mount API, reached a 6.18 kernel)
report["listmount (458)"] = outcome(libc.syscall(458, None, None, 0, 0))
report["open_tree_attr (467)"] = outcome(libc.syscall(467, -100, b"/", 1, None, 0))  # AT_FDCWD, OPEN_TREE_CLONE
# a POSIX ACL on the scratch tmpfs is kernel memory nothing charges (round 75: 4 GiB in 16,340 folders)
os.mkdir("/tmp/acl")
acl = b"\x02\x00\x00\x00" + b"".join(bytes([tag, 0, 7, 0]) + b"\xff\xff\xff\xff" for tag in (1, 4, 32))
try:
    os.setxattr("/tmp/acl", "system.posix_acl_access", acl)  # ACL_USER_OBJ, ACL_GROUP_OBJ, ACL_OTHER: rwx
    report["setxattr"] = "ok"
except OSError as refused:
    report["setxattr"] = errno.errorcode[refused.errno]
# a call outside the allowlist (round 76: name_to_handle_at worked on /usr; rounds 74 to 77 found one a round)
handle = ctypes.create_string_buffer(8 + 128)
ctypes.c_uint.from_buffer(handle).value = 128  # struct file_handle: handle_bytes, then the handle
child = os.fork()  # not a group leader, so Linux itself would let it make a session
if child == 0:
    os._exit(0 if libc.setsid() >= 0 else ctypes.get_errno())
# a session of its own is a CPU share of its own (round 78)
report["setsid"] = errno.errorcode.get(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]), "ok")
report["name_to_handle_at"] = outcome(libc.name_to_handle_at(-100, b"/usr", handle, ctypes.byref(ctypes.c_int()), 0))
report["PR_FUTEX_HASH"] = outcome(libc.prctl(78, 1, 1 << 16, 0, 0))  # PR_FUTEX_HASH_SET_SLOTS: kernel memory
report["semget"] = outcome(libc.semget(0, 32000, 0o1600))  # IPC_PRIVATE: a set of about 2 MiB, outside RLIMIT_AS
context = ctypes.c_ulong(0)
report["io_setup"] = outcome(libc.syscall(NUMBERS["io_setup"], 65536, ctypes.byref(context)))  # the machine's AIO
# counters of the uid outside a user namespace (round 64: every inotify instance of the instructor's uid held)
report["inotify_init1"] = outcome(libc.inotify_init1(0))
report["fanotify_init"] = outcome(libc.syscall(NUMBERS["fanotify_init"], 0, 0))
report["mq_open"] = outcome(libc.syscall(NUMBERS["mq_open"], b"ptgrader-test", 0o102, 0o600, None))  # O_CREAT|O_RDWR
pair = socket.socketpair()
program = (ctypes.c_uint64 * 1)(0x6 | (0xFFFF << 32))  # one instruction: ret 0xffff (accept)
fprog = ctypes.c_uint64 * 2
fprog = fprog(1, ctypes.addressof(program))  # struct sock_fprog: length, then the instructions' address
for option, name in ((26, "SO_ATTACH_FILTER"), (51, "SO_ATTACH_REUSEPORT_CBPF")):
    report[name] = outcome(libc.setsockopt(pair[0].fileno(), 1, option, ctypes.byref(fprog), 16))
report["PR_SET_SECCOMP"] = outcome(libc.prctl(22, 2, ctypes.byref(fprog), 0, 0))
report["seccomp"] = outcome(libc.syscall(NUMBERS["seccomp"], 1, 0, ctypes.byref(fprog)))
default = pair[0].getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
try:
    pair[0].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    report["SO_SNDBUF"] = "ok"
except OSError as refused:
    report["SO_SNDBUF"] = errno.errorcode[refused.errno]
size = ctypes.c_int(8 << 20)
for name, level, option in (("SO_RCVBUF, level 2**32 + SOL_SOCKET", 2**32 + 1, 8), ("SO_RCVBUF + 2**32", 1, 2**32 + 8)):
    report[name] = outcome(libc.syscall(NUMBERS["setsockopt"], pair[1].fileno(), ctypes.c_long(level),
                                        ctypes.c_long(option), ctypes.byref(size), 4))
report["buffers kept"] = [pair[0].getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == default,
                          pair[1].getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) < 8 << 20]
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
    product = torch.ones(256, 256) @ torch.ones(256, 256)
thread = threading.Thread(target=lambda: None)
thread.start()
thread.join()
import resource
report["priority limits"] = [resource.getrlimit(resource.RLIMIT_RTPRIO), resource.getrlimit(resource.RLIMIT_NICE)]
report["queue limits"] = [resource.getrlimit(resource.RLIMIT_SIGPENDING), resource.getrlimit(resource.RLIMIT_MSGQUEUE)]
report["locked memory"] = resource.getrlimit(resource.RLIMIT_MEMLOCK)
report["honest"] = [float(product[0, 0]), len(profile.key_averages()) > 0, subprocess.run(["true"]).returncode,
                    families, len(socket.socketpair())]
pair[0].setblocking(False)  # FIONBIO through fcntl, and an ioctl of type 'T' and one of the sockets' own:
report["honest ioctl"] = [outcome(libc.ioctl(pair[0].fileno(), 0x5421, ctypes.byref(ctypes.c_int(1)))),  # FIONBIO
                          outcome(libc.ioctl(pair[0].fileno(), 0x8913, ctypes.create_string_buffer(b"lo", 40))),
                          sys.stdout.isatty() or os.isatty(0) or "no tty"]  # TCGETS
print(json.dumps(report))
"""


def _key_count(uid: int) -> int:
    """How many keys Linux keeps for ``uid`` (/proc/key-users; 0 when none)."""
    for line in Path("/proc/key-users").read_text().splitlines():
        owner, rest = line.split(":", 1)
        if int(owner) == uid:
            return int(rest.split()[1].split("/")[0])
    return 0


def test_the_system_call_filter_refuses_keyrings_and_namespaces_and_lets_torch_run(tmp_path: Path) -> None:
    """A kernel cannot fill its uid's keyring (which outlives it, and its uid is reused by the next run),
    make a namespace, take back the cores its job did not give it, open a socket other than a local one
    (round 33: AF_VSOCK reaches the virtual machine's host; round 35: loopback TCP buffers come out of the
    machine's own pool), nor hold memory outside its address space (round 34: socket buffers; also memory
    files and System V segments and queues), nor the counters Linux keeps for the uid outside its namespace
    (round 64: inotify instances; fanotify, message queues, queued signals), nor semaphore sets (round 66) and
    the machine's AIO contexts (round 66: all of fs.aio-max-nr in one call), FIFOs past its count of pipes, or
    a lease (round 66), nor spend the machine's allowance of BPF code (round 67: socket filters), nor write back
    or evict the host's files through the folders bound read-only (round 69: syncfs of /usr), nor send a file
    system's own ioctl commands (round 74: a host btrfs flushed), nor make a call newer than the filter's lists
    (round 75: open_tree_attr reached the kernel), nor keep POSIX ACLs in uncharged kernel memory (round 75),
    nor sync a host file system through quotactl, nor open a netlink protocol that loads modules (round 77), nor
    make any call outside the allowlist of calls an honest run needs;
    matmul, threads, the CPU profiler (lab 05), a subprocess and local sockets
    still work."""
    import pyseccomp

    numbers = {name: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
               for name in ("add_key", "keyctl", "clone", "clone3", "socket", "setsockopt", "fanotify_init", "mq_open",
                            "io_setup", "seccomp", "sync", "process_madvise", "landlock_create_ruleset", "ioctl",
                            "mbind", "openat2", "setrlimit", "prlimit64")}
    code = f"NUMBERS = {numbers!r}\nCLONE_NEWUSER = {jail.CLONE_NEWUSER}\n{TRY_SYSCALLS}"
    spec, path = _jail_spec(tmp_path, tmp_path)
    outside_uid = spec.uid if not spec.userns else os.getuid()
    keys_before = _key_count(outside_uid)
    result = _jailed(path, code)
    assert result.returncode == 0, result.stderr
    report = json.loads(jail_tools.kernel_lines(result.stderr)[-1])
    assert report["honest"] == [256.0, True, 0, ["ok"] * 2, 2], report
    assert report.pop("honest ioctl") == ["ok", "ok", "no tty"], report
    del report["honest"]
    assert report.pop("priority limits") == [[0, 0], [0, 0]]  # no real-time, no raised priority
    assert report.pop("queue limits") == [[256, 256], [0, 0]]  # a sliver of the uid's queued signals, no queues
    assert report.pop("locked memory") == [spec.limits["locked_memory"]] * 2 and spec.limits["locked_memory"] <= 8 << 20
    assert report == {"add_key": "EPERM", "keyctl": "EPERM", "unshare": "EPERM", "clone_newuser": "EPERM",
                      "clone3": "ENOSYS", "sched_setaffinity": "EPERM", "AF_VSOCK": "EAFNOSUPPORT",
                      "AF_PACKET": "EAFNOSUPPORT", "AF_INET": "EAFNOSUPPORT", "AF_INET6": "EAFNOSUPPORT", "socketpair AF_VSOCK": "EAFNOSUPPORT",
                      "socket 2**32 + AF_VSOCK": "EAFNOSUPPORT", "socket 2**32 + AF_UNIX": "EAFNOSUPPORT",
                      "memfd_create": "EPERM", "shmget": "EPERM", "msgget": "EPERM", "semget": "EPERM",
                      "io_setup": "EPERM", "mkfifo": "EPERM", "F_SETLEASE": "EPERM",
                      "SO_ATTACH_FILTER": "EPERM", "SO_ATTACH_REUSEPORT_CBPF": "EPERM", "PR_SET_SECCOMP": "EPERM",
                      "seccomp": "EPERM", "sync": "EPERM", "syncfs": "EPERM", "F_NOTIFY": "EPERM",
                      "posix_fadvise": "EPERM", "sync_file_range": "EPERM", "MADV_PAGEOUT": "EPERM",
                      "MADV_COLD": "EPERM", "process_madvise": "EPERM", "landlock_create_ruleset": "EPERM",
                      "PR_FUTEX_HASH": "EPERM", "SO_SNDBUF": "EPERM", "ioctl FIGETBSZ": "ENOTTY",
                      "ioctl FS_IOC_GETFLAGS": "ENOTTY", "ioctl 2**32 + FIGETBSZ": "ENOTTY",
                      "listmount (458)": "ENOSYS", "open_tree_attr (467)": "ENOSYS", "setxattr": "EPERM",
                      "NETLINK_SOCK_DIAG": "EPROTONOSUPPORT", "NETLINK_GENERIC": "EPROTONOSUPPORT",
                      "name_to_handle_at": "ENOSYS", "ioctl SIOCGIFVLAN": "ENOTTY", "ioctl SIOCGIFBR": "ENOTTY",
                      "setsid": "EPERM", "MADV_MERGEABLE": "EPERM", "PR_SET_MEMORY_MERGE": "EPERM",
                      "MAP_HUGETLB": "EPERM", "mbind": "EPERM",
                      "O_DIRECT": "EINVAL", "F_SETFL O_DIRECT": "EINVAL", "openat2": "ENOSYS",
                      "RWF_DONTCACHE": "ENOTSUP",
                      "prlimit64 RLIMIT_CORE": "EPERM", "setrlimit RLIMIT_CORE": "EPERM", "RLIMIT_CORE read": [1, 1],
                      "PR_GET_AUXV": "EINVAL", "PR_SET_MDWE": "EINVAL", "PR_SET_NAME": "ok",
                      "MADV_GUARD_INSTALL": "EINVAL", "MADV_DONTNEED": "ok",
                      "NETLINK 2**32 + NETLINK_GENERIC": "EPROTONOSUPPORT", "quotactl_fd Q_SYNC": "EPERM",
                      "inotify_init1": "EPERM", "fanotify_init": "EPERM", "mq_open": "EPERM",
                      "SO_RCVBUF, level 2**32 + SOL_SOCKET": "EPERM", "SO_RCVBUF + 2**32": "EPERM",
                      "buffers kept": [True, True]}
    assert _key_count(outside_uid) == keys_before


ADD_WATCHES_AND_PIPES = r"""
import ctypes, errno, fcntl, json, mmap, os, select, socket
libc = ctypes.CDLL(None, use_errno=True)
def add(epoll, fd, op=1):  # EPOLL_CTL_ADD; op's upper 32 bits are not read by Linux, nor by the filter
    event = (ctypes.c_uint32 * 3)(1, 0, 0)
    result = libc.syscall(NUMBER, epoll.fileno(), ctypes.c_long(op), fd, event)
    return "ok" if result == 0 else errno.errorcode[ctypes.get_errno()]
def fill(tries):  # a new epoll and new eventfds: every watch a new one
    epoll, fds = select.epoll(), [os.eventfd(0) for _ in range(tries)]
    return [add(epoll, fd, 2**32 + 1 if k % 2 else 1) for k, fd in enumerate(fds)], epoll, fds
def pipe():
    try:
        return os.pipe()
    except OSError as refused:
        return errno.errorcode[refused.errno]
outcomes, pipes = [], []
for _ in range(2):  # each of two processes, forked, then the kernel itself: the budget is the whole tree's
    mine, theirs = socket.socketpair()
    if os.fork() == 0:
        theirs.send(json.dumps([fill(40)[0], [pipe() for _ in range(4)]]).encode())
        os._exit(0)
    watches, made = json.loads(mine.recv(1 << 16))
    outcomes += watches
    pipes += made
    os.wait()
mine, epoll, fds = fill(40)
outcomes += mine
pipes += [pipe() for _ in range(4)]
try:  # past the budget, a watch already added can still be changed and removed
    epoll.modify(fds[0], select.EPOLLOUT)
    epoll.unregister(fds[0])
    changed = "ok"
except OSError as refused:
    changed = errno.errorcode[refused.errno]
try:
    fcntl.fcntl(pipes[0][1], 1031, 1 << 20)  # F_SETPIPE_SZ
    enlarged = "ok"
except OSError as refused:
    enlarged = errno.errorcode[refused.errno]
mapped = []  # each a file of the machine's table kept open with no descriptor; private ones are not counted
for _ in range(400):
    try:
        mapped.append(mmap.mmap(-1, 4096))  # MAP_SHARED | MAP_ANONYMOUS
    except OSError as refused:
        mappings_refused = errno.errorcode[refused.errno]
        break
private = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE)
sockets = []  # the two socket pairs above count too
for _ in range(30):
    try:
        sockets.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    except OSError as refused:
        sockets_refused = errno.errorcode[refused.errno]
        break
locks = []
with open("/tmp/locked", "w") as locked:
    for offset in range(0, 24, 2):  # a lock of one byte each, every other byte: each a lock of its own
        try:
            fcntl.lockf(locked, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
            locks.append("ok")
        except OSError as refused:
            locks.append(errno.errorcode[refused.errno])
print(json.dumps({"watches": outcomes.count("ok"), "refused": outcomes.count("ENOSPC"), "changed": changed,
                  "pipes": [pipe if isinstance(pipe, str) else "ok" for pipe in pipes], "enlarged": enlarged,
                  "locks": locks, "mapped": 150 < len(mapped) < 300, "mappings refused": mappings_refused,
                  "private": len(private), "sockets": len(sockets), "sockets refused": sockets_refused}))
"""


def test_a_kernels_epoll_watches_pipes_and_locks_are_counted_and_refused_past_its_budget(tmp_path: Path) -> None:
    """Round 65: a kernel (policy off, as a regular user) held every epoll watch of the instructor's uid, which
    Linux counts for the whole machine, and their zmq programs stopped; pipes are counted so too. The keeper lets
    the kernel's whole tree make its budget of each (:data:`ptgrader.jail.BUDGETS`; here 100 watches and 10
    pipes), then answers as Linux does when the uid's allowance is spent, and says so in the log; other epoll
    calls are not counted, and no pipe grows past its default size. Round 68: record locks (fcntl), kernel memory
    that no rlimit counts (2.1 GiB in 40 s), are counted so too; round 70: shared mappings, each an open file
    of the machine's table kept alive with no descriptor; round 71: local sockets and connections, whose buffers
    no rlimit counts."""
    import pyseccomp

    code = f"NUMBER = {pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, 'epoll_ctl')}\n{ADD_WATCHES_AND_PIPES}"
    budgets = {"epoll watches": 100, "pipes": 10, "record locks": 8, "shared mappings": 300,  # Python's start maps some
               "local sockets": 20}
    _, path = _jail_spec(tmp_path, tmp_path, budgets=budgets)
    result = _jailed(path, code)
    assert result.returncode == 0, result.stderr
    assert json.loads(jail_tools.kernel_lines(result.stderr)[-1]) == {
        "watches": 100, "refused": 20, "changed": "ok", "pipes": ["ok"] * 10 + ["EMFILE"] * 2, "enlarged": "EPERM",
        "locks": ["ok"] * 8 + ["ENOLCK"] * 4, "mapped": True, "mappings refused": "ENOMEM", "private": 4096,
        "sockets": 18, "sockets refused": "ENOBUFS"}
    assert "[jail] the kernel made its 100 epoll watches; later ones are refused" in result.stderr
    assert "[jail] the kernel made its 10 pipes; later ones are refused" in result.stderr
    assert "[jail] the kernel made its 8 record locks; later ones are refused" in result.stderr
    assert "[jail] the kernel made its 300 shared mappings; later ones are refused" in result.stderr
    assert jail.BUDGETS == {"epoll watches": 512, "pipes": 64, "record locks": 4096, "shared mappings": 4096,
                            "local sockets": 256}


FILL_IN_FLIGHT = r"""
import errno, os, resource, socket, time
keep, _ = socket.socketpair()  # never received: every descriptor sent stays in flight, counted for the uid
sent = 0
try:
    while True:
        socket.send_fds(keep, [b"x"], [0] * 200)
        sent += 200
except OSError as refused:
    print("in flight", sent, errno.errorcode[refused.errno], resource.getrlimit(resource.RLIMIT_NOFILE)[0], flush=True)
time.sleep(60)
"""


def test_a_kernel_starts_while_another_holds_its_uids_descriptors_in_flight(tmp_path: Path) -> None:
    """Round 66: Linux refuses a sender descriptors over a local socket once its uid has more in flight than the
    sender's open-file limit, and a kernel filled that count for its uid (the instructor's, as a regular user):
    the next kernel, another job's, could not hand its system call listener to its keeper, and never started.
    A kernel's open-file limit is now 512 (it fills the count to at most 512 + 253), and the keeper copies the
    listener with pidfd_getfd: a second kernel of the same uid starts while the first holds the count full."""
    spec, path = _jail_spec(tmp_path, tmp_path)
    second = tmp_path / "second"
    (second / "root").mkdir(parents=True)
    (second / "spec.json").write_text(replace(spec, root=str(second / "root"), cgroups=[]).to_json())  # same uid
    command = [sys.executable, "-I", "-S", jail.__file__, str(path), "--", sys.executable, "-c", FILL_IN_FLIGHT]
    holder = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        line = holder.stderr.readline()
        assert "in flight" in line, line + holder.stderr.read()
        sent, refusal, limit = line.split()[-3:]
        assert (refusal, limit) == ("ETOOMANYREFS", "512") and int(sent) <= 512 + 253, line
        result = _jailed(second / "spec.json", "print('started')")
        assert result.returncode == 0 and "started" in result.stderr, result.stderr
    finally:
        holder.kill()
        holder.wait()
        assert cgroups.remove(spec.cgroups)


def test_a_jail_without_its_filter_refuses_to_run_the_kernel(tmp_path: Path) -> None:
    _, path = _jail_spec(tmp_path, tmp_path, syscall_filter="")
    result = _jailed(path, "print('ran')")
    assert result.returncode == 127 and "ran" not in result.stderr
    assert "no system call filter" in result.stderr


def test_the_filter_blocks_what_the_instructors_page_promises() -> None:
    """Each name is one this machine's libseccomp knows (-1 would be a typo, silently blocking nothing)."""
    import pyseccomp

    promised = {"keyctl", "add_key", "request_key", "unshare", "setns", "bpf", "userfaultfd", "perf_event_open",
                "ptrace", "process_vm_readv", "process_vm_writev", "mount", "kexec_load", "kexec_file_load",
                "init_module", "finit_module", "delete_module", "sched_setaffinity", "inotify_init1", "inotify_add_watch",
                "fanotify_init", "mq_open", "shmget", "msgget", "semget", "memfd_create", "io_setup", "mknod",
                "mknodat"}
    assert promised <= set(syscalls.BLOCKED)
    assert all(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) != -1 for name in syscalls.BLOCKED)


# ------------------------------------------------------------------------------------ a regular user

LAB = "lab01_tensors"  # the cheapest lab to grade
#: The hostile cases graded by the regular user: one forges the verdict, one attacks the grader, whose uid the
#: kernel has outside its user namespace.
HOSTILE = ("forge_the_verdict", "attack_the_grader")
SETPRIV, UNSHARE = shutil.which("setpriv"), shutil.which("unshare")


def _unused_uid() -> int:
    """A uid no account has. Not 65534: inside a user namespace an unmapped uid reads as 65534, so a grader
    running as nobody would hide the bug this test was written for (the uid read after unsharing)."""
    taken = {int(line.split(":")[2]) for line in Path("/etc/passwd").read_text().splitlines() if line.count(":") >= 3}
    return next(uid for uid in range(42_000, 43_000) if uid not in taken)


def _python_paths() -> list[Path]:
    """What a regular user must reach to grade: the interpreter, the environment, ptgrader's own files."""
    import ptgrader

    return [Path(sys.executable).resolve(), Path(sys.prefix), Path(ptgrader.__file__)]


def _closed_folders(paths: list[Path]) -> tuple[dict[Path, list[str]], list[str]]:
    """The folders on the way to ``paths`` that others may not search, each with its entries on the way, and
    the paths a uid of no group cannot use even past those (an unreadable file, an unsearchable end)."""
    closed: dict[Path, list[str]] = {}
    unusable = []
    for path in paths:
        for folder in reversed(path.parents):  # outermost first: the order they are opened in
            entry = path.relative_to(folder).parts[0]
            if not folder.stat().st_mode & stat.S_IXOTH and entry not in closed.setdefault(folder, []):
                closed[folder].append(entry)
        if not path.stat().st_mode & (stat.S_IXOTH if path.is_dir() else stat.S_IROTH):
            unusable.append(f"{path} (mode {stat.filemode(path.stat().st_mode)})")
    return {folder: entries for folder, entries in closed.items() if entries}, unusable


def _needs_for_a_regular_user() -> str:
    """Why the regular-user run cannot happen here ("" when it can)."""
    if not ROOT:
        return "only a root test run can become another user (setpriv); run as root to test grading without root"
    if SETPRIV is None or UNSHARE is None:
        return "setpriv and unshare (util-linux) are needed"
    if jail.unsupported(userns=True):
        return jail.unsupported(userns=True)
    unusable = _closed_folders(_python_paths())[1]
    if unusable:
        return f"a regular user cannot use the Python environment here: {', '.join(unusable)} (chmod o+rX them)"
    return ""


REGULAR_USER_MISSING = _needs_for_a_regular_user()
needs_a_regular_user = pytest.mark.skipif(REGULAR_USER_MISSING != "", reason=REGULAR_USER_MISSING or "possible")


def _with_folders_opened(command: list[str], scratch: Path) -> list[str]:
    """``command`` in a mount namespace of its own where each closed folder on the way to the Python environment
    (root's home, where pyenv puts interpreters) is a searchable tmpfs holding only the entry on the way, bound
    from the original: the regular user reaches the interpreter and nothing else, and the machine's own folders
    keep their modes. With no closed folder, ``command`` itself."""
    closed, _ = _closed_folders(_python_paths())
    if not closed:
        return command
    lines = ["set -e", "mount --make-rprivate /"]
    for index, (folder, entries) in enumerate(closed.items()):
        kept = [("mkdir" if (folder / entry).is_dir() else "touch", shlex.quote(str(scratch / f"{index}-{n}")),
                 shlex.quote(str(folder / entry))) for n, entry in enumerate(entries)]
        lines += [f"{make} {copy} && mount --bind {inside} {copy}" for make, copy, inside in kept]
        lines.append(f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(folder))}")
        lines += [f"{make} {inside} && mount --bind {copy} {inside}" for make, copy, inside in kept]
    return [UNSHARE, "--mount", "--", "sh", "-c", "\n".join([*lines, 'exec "$@"']), "sh", *command]


def _as_user(uid: int, command: list[str], cwd: Path, home: Path, scratch: Path) -> subprocess.CompletedProcess[str]:
    """``command`` as ``uid`` (no groups), in ``cwd``, with an environment of that user's own."""
    env = {"HOME": str(home), "USER": f"grader{uid}", "LOGNAME": f"grader{uid}", "LANG": "C.UTF-8",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])}
    become = [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *command]
    return subprocess.run(_with_folders_opened(become, scratch), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def _chown_tree(top: Path, uid: int) -> None:
    for folder, _, files in os.walk(top):
        os.chown(folder, uid, uid)
        for name in files:
            os.chown(os.path.join(folder, name), uid, uid)


@pytest.fixture
def user_folders() -> Iterator[tuple[int, Path, Path]]:
    """(a uid of no account, a folder in /tmp that uid owns, a folder only root can enter), removed after."""
    uid = _unused_uid()
    top = Path(tempfile.mkdtemp(prefix="ptgrader-regular-user-"))  # in /tmp, which every user can reach
    scratch = Path(tempfile.mkdtemp(prefix="ptgrader-root-only-"))
    (top / "home").mkdir()
    os.chown(top, uid, uid)
    os.chown(top / "home", uid, uid)
    yield uid, top, scratch
    shutil.rmtree(top, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)


@needs_a_regular_user
def test_a_regular_user_can_jail_kernels(user_folders: tuple[int, Path, Path]) -> None:
    """The probe GuardedExecute runs first: it once read the uid inside the new user namespace (65534)."""
    uid, top, scratch = user_folders
    result = _as_user(uid, [sys.executable, "-c", "from ptgrader import jail; print(repr(jail.probe(userns=True)))"],
                      top, top / "home", scratch)
    assert (result.returncode, result.stdout.strip()) == (0, "''"), result.stdout + result.stderr


@needs_a_regular_user
def test_a_regular_user_grades_a_lab_honest_full_marks_hostile_nothing(user_folders: tuple[int, Path, Path]) -> None:
    """What an instructor without root runs: their own course folder, ``nbgrader autograde``, kernels jailed in
    a user namespace. The hostile submissions run with the code policy off (RUNTIME_ONLY_CONFIG), so that the
    jail and the runtime defences alone must hold, for a kernel that has the grader's own uid outside its jail;
    the honest student is graded after them (nbgrader takes students in name order)."""
    uid, top, scratch = user_folders
    course = lab_tools.copy_course(top / "course")
    lab_tools.generate_assignment(course, LAB)
    with open(course / lab_tools.CONFIG_NAME, "a", encoding="utf-8") as config:
        config.write(lab_tools.RUNTIME_ONLY_CONFIG)
    runtime_cases = lab_tools.hostile_submissions(course, LAB, lab_tools.fixtures(LAB), policy=False)
    cases = [case for case in hostile.cases() if case.name in HOSTILE and not case.policy]
    for case in cases:
        lab_tools.submit(course, LAB, case.student, runtime_cases[case.student])
    honest = lab_tools.reference_submissions(course, LAB, [])[lab_tools.SOLUTION_STUDENT]
    lab_tools.submit(course, LAB, lab_tools.SOLUTION_STUDENT, honest)
    # Round 11: an honest answer with a note beside it scored 0 and the run exited 1 (the report of the files
    # left out was written after nbgrader made it read-only), and a file the grader cannot read left what
    # was copied before it in autograded/.
    noted = lab_tools.submit(course, LAB, "solution-with-a-note", honest)
    (noted / "notes.txt").write_text("my notes\n")
    unreadable = lab_tools.submit(course, LAB, "solution-with-an-unreadable-file", honest)
    (unreadable / "figure.html").write_text("<script>alert(1)</script>\n")
    (unreadable / "secret.txt").write_text("x\n")
    _chown_tree(course, uid)
    (unreadable / "secret.txt").chmod(0)
    result = _as_user(uid, [sys.executable, "-m", "nbgrader", "autograde", LAB], course, top / "home", scratch)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"grading as uid {uid} failed:\n{lab_tools.nbgrader_errors(output)}\n{output[-4000:]}"
    scores = lab_tools.read_scores(course, LAB)
    assert len(scores) == 3 + len(HOSTILE), scores
    for student in (lab_tools.SOLUTION_STUDENT, "solution-with-a-note"):
        assert all(score == most > 0 for score, most in scores[student].values()), (student, scores[student])
    assert not any(score for score, _ in scores["solution-with-an-unreadable-file"].values())
    graded = course / "autograded"
    assert not (graded / "solution-with-a-note" / LAB / "notes.txt").exists()
    assert not list((graded / "solution-with-an-unreadable-file").rglob("*.html")), "a file of a refused submission"
    for case in cases:
        assert all(score == 0 for score, _ in scores[case.student].values()), (case.name, scores[case.student])
    reports = lab_tools.read_reports(course, LAB)
    run_profile.count_grading_kernels(reports.values())
    assert reports["solution-with-a-note"]["files_not_copied"] == ["notes.txt"], reports["solution-with-a-note"]
    assert "secret.txt: a file the grader cannot read" in str(reports["solution-with-an-unreadable-file"]["refused"])
    graded_reports = [report for report in reports.values() if "isolation" in report]
    assert all(report["isolation"].startswith("jail: user namespace") for report in graded_reports), reports
