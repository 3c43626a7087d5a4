"""The jail a grading kernel runs in (Linux): its own namespaces, an unprivileged uid, rlimits.

A student's kernel runs code the grader cannot trust, so it runs where that code reaches nothing
but itself. :func:`run_jailed` is called in the process that will supervise the kernel (the
"keeper": a small ``python jail.py`` process, or a child of the warm server) and:

1. puts the next child in a new **PID namespace** (and, without root, a new user namespace). That
   child (the kernel) is PID 1 there: when it exits or is killed, Linux kills every process it
   started, detached or not, so ending a kernel needs no scan of ``/proc``;
2. in the child, makes new **mount, network, IPC and UTS namespaces** and builds a root of its own
   on a size-limited tmpfs: the interpreter, the Python environment and the system folders
   (``/usr``, ``/etc``, ...) bound **read-only**, a ``/proc`` that shows only the kernel's processes
   (and of its machine-wide entries only :data:`PROC_VISIBLE`),
   ``/dev`` with five harmless devices (plus accelerator devices, when asked), and the only
   writable folders: ``/ptgrader/home`` (HOME), ``/ptgrader/work`` (the working folder),
   ``/ptgrader/run`` (the kernel's sockets), ``/tmp`` and ``/dev/shm``, all on that tmpfs. The course, the
   gradebook, the grader's HOME and the repository are not there at all. The network namespace
   has only a loopback device;
3. joins the kernel's control groups, if the grader made any (:mod:`ptgrader.cgroups`: memory and
   processes of the whole tree), then drops every privilege: a dedicated uid (when the grader is
   root) or the grader's own uid in a user namespace, no supplementary groups, no capabilities,
   ``no_new_privs``; then sets rlimits (memory, processes, file size, open files, no core dumps)
   and the kernel's environment (:func:`kernel_env`: an allow-list, never the grader's variables);
   last, loads the **seccomp filter** of :mod:`ptgrader.syscalls` (compiled by the system's
   libseccomp): no keyrings, no new namespaces, no ``ptrace``, ``bpf``, ``userfaultfd``,
   ``perf_event_open``, mounts or kernel modules, for the kernel and everything it starts; the epoll
   watches and pipes they make, which Linux charges to the uid for the whole machine, are counted by the
   keeper, which answers those calls (:class:`CallCounter`). With
   ``add_key`` refused, nothing a kernel could leave in its uid's keyring outlives it, although that
   uid is reused by later runs (the dedicated uid of the next grader, or the instructor's own);
4. runs the kernel: ``start()`` (``exec`` of ipykernel, or ipykernel in a process forked from
   the warm server). The warm server itself is started with the kernel's environment
   (:class:`ptgrader.warm.WarmKernels`): a forked kernel keeps its parent's first environment in
   memory (``/proc/self/environ``, the stack), so the grader's must never be there.

The keeper stays outside, as root or the grader: it relays at most 64 kB of the kernel's own
stdout/stderr (its log, not cell output: that travels over the kernel's sockets), escaped and each
line marked ``[kernel]``, passes on an
interrupt, and exits with the kernel's status. It dies with its parent (``PR_SET_PDEATHSIG``), and
the kernel dies with the keeper, so a grader that is killed leaves no kernel behind.

The grader reaches the kernel's sockets through ``/proc/<kernel pid>/root/ptgrader/run``; the kernel
cannot see the grader, the warm server or any other kernel (not in its PID namespace), cannot
signal or trace them (and another uid), and cannot open their sockets (not in its mount or network
namespace).

Run as a script (``python jail.py SPEC.json -- COMMAND...``) it is the keeper of a cold kernel: it
imports only the standard library, so it starts in milliseconds. ``python jail.py --check`` says
whether this machine can jail kernels.

**Why not bubblewrap** (Debian's ``bwrap``, a well-kept sandbox that does steps 1 and 2 and loads a
seccomp program too). It was weighed against this module, and this module stays, for two reasons:

- ``bwrap`` starts its sandbox by ``exec`` of a new program, so every kernel would import torch
  again. The warm server forks kernels with torch (and, for labs 05 and 06, torch.compile's and the
  ONNX exporter's modules) already imported. Measured on the 2-core machine, a fresh process spends
  2.4 s of CPU importing torch and 8.5 s importing the whole preload list; a fork takes
  milliseconds. For a class of 100, that is 4 to 14 more minutes of CPU per lab (2 to 7 on two
  cores), against a budget of 5 minutes per lab (lab 06 takes 4.3 today). One ``bwrap`` around the
  whole warm server would put every kernel in the same namespaces, where they could see each
  other: the very isolation this module exists for;
- as root, the jail gives each grading run a **uid of its own** on the host, with the rlimits and
  control group that go with it (:mod:`ptgrader.cgroups`); ``bwrap`` maps uids only inside a user
  namespace and makes no control group, so that part would stay here anyway.

What the system does better is used instead of our own code: the filter is compiled by libseccomp
(not hand-written BPF), and the jail uses the kernel's namespaces, ``pivot_root`` and rlimits
directly, with every step checked and a kernel that cannot be jailed never run unjailed. The cold
start (``jail.py`` as a script) is only the fallback of a warm start, and keeping one jail for both
means one set of tests proves both.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import platform
import re
import resource
import select
import signal
import socket
import struct
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import NoReturn

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME = 1 << 14, 1 << 18, 1 << 21
MNT_DETACH = 2
#: statvfs flags of a mount that a read-only bind of it must keep (Linux refuses to drop them).
_KEPT_FLAGS = {
    os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: MS_NOATIME, os.ST_NODIRATIME: MS_NODIRATIME, os.ST_RELATIME: MS_RELATIME,
}
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 38, 47, 4
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, SECCOMP_USER_NOTIF_FLAG_CONTINUE = 1, 8, 1
PIDFD_GETFD = 438  # the same number on every architecture (Linux 5.6)
#: ioctls of a seccomp listener: _IOWR('!', 0, struct seccomp_notif) and _IOWR('!', 1, struct seccomp_notif_resp).
NOTIF_RECV, NOTIF_SEND, NOTIF_BYTES = 0xC0502100, 0xC0182101, 80
SOCK_FILTER_BYTES = 8  # one BPF instruction (struct sock_filter)
_SYSCALLS = {"x86_64": {"pivot_root": 155, "capset": 126, "seccomp": 317, "epoll_ctl": 233, "pipe": 22, "pipe2": 293,
                        "fcntl": 72, "mmap": 9, "socket": 41, "socketpair": 53, "connect": 42},
             "aarch64": {"pivot_root": 41, "capset": 91, "seccomp": 277, "epoll_ctl": 21, "pipe2": 59, "fcntl": 25,
                         "mmap": 222, "socket": 198, "socketpair": 199, "connect": 203}}
#: The oldest Linux whose seccomp lets a supervisor answer "go on" to a call it was notified of (5.5), and
#: that lets the keeper copy the kernel's listener (``pidfd_getfd``, 5.6).
OLDEST_LINUX = (5, 6)
#: What the keeper counts, by kind: the system calls that make one (the filter notifies the keeper of each, and the
#: call waits for its answer), and the answer, Linux's own when the allowance is spent, once the kernel's tree has
#: made its budget of them (:data:`BUDGETS`). Linux charges both to the kernel's uid on the host, against an
#: allowance for the whole machine that no rlimit or control group lowers: the instructor's own uid when they grade
#: without root, the run's dedicated uid as root (shared by every kernel of the run). epoll watches:
#: ``fs.epoll.max_user_watches`` (a few hundred thousand on a machine with 2 GiB); round 65's kernel took all of it,
#: and every other program of that uid that opened a zmq connection (Jupyter, the grader's next kernel) failed.
#: Pipes: 16 pages each against ``fs.pipe-user-pages-soft`` (64 MiB), past which the uid's new pipes get one page.
#: Record locks (``fcntl`` with ``F_SETLK``, ``F_SETLKW`` or their OFD forms; the filter notifies only those):
#: each is kernel memory that no rlimit counts (Linux does not enforce ``RLIMIT_LOCKS``), and round 68's kernel held
#: 2.1 GiB of them, one byte of a file each, in 40 s; past the budget the answer is ``ENOLCK``, Linux's own when it
#: has no lock left.
#: Shared mappings (``mmap`` of a file, or anonymous and shared; the filter notifies only those): each keeps an open
#: file of the machine's one table (``fs.file-max``) alive with no descriptor left, and round 70's kernel made 240,000
#: in under a second; at 170 processes of 65,530 mappings each it could fill the table, and then no program on the
#: machine without ``CAP_SYS_ADMIN`` could open a file. Past the budget the answer is ``ENOMEM``, Linux's own when a
#: process has too many mappings.
#: Local sockets and connections (``socket`` and ``socketpair`` of the allowed families, ``connect``): each holds up
#: to its default buffer, about 200 KiB, in memory that no rlimit counts, and a connection no one accepts keeps its
#: data queued after its socket is closed (round 71: 2.7 GiB from one process with 3 descriptors open, at 0.8 GiB
#: a second); past the budget the answer is ``ENOBUFS``.
COUNTED = {"epoll watches": (("epoll_ctl",), errno.ENOSPC), "pipes": (("pipe", "pipe2"), errno.EMFILE),
           "record locks": (("fcntl",), errno.ENOLCK), "shared mappings": (("mmap",), errno.ENOMEM),
           "local sockets": (("socket", "socketpair", "connect"), errno.ENOBUFS)}
#: A kernel's budget of each: many times what an honest lab's kernel makes in a run (each lab's solution
#: graded on 2026-12-06: 31 to 33 epoll watches, 2 pipes, up to 73 record locks, lab 05's, as torch.compile caches
#: its code, a lock call setting at most two of them, about 200 bytes each; 13 to 32 shared mappings, the libraries
#: it loads past the warm server's; 12 local sockets and a connection, its zmq sockets and event loops: 256 of them
#: hold about 100 MiB at the default buffer size), and with four kernels graded at once, a share of the
#: uid's allowance: 2,048 watches; 256 pipes, 4,096 pages, and beside them the one pipe Linux keeps for each thread
#: that calls ``sendfile`` or ``splice`` (round 67: 170 threads, 2,720 pages a kernel), 14,976 of the 16,384 pages.
#: Watches 512, not more: an epoll's ``/proc/<pid>/fdinfo`` file is one record of every watch, and each descriptor
#: that read it keeps a buffer of that record's size, rounded up to a power of two, in kernel memory that no rlimit
#: counts (round 83: 3,700 watches made 512 KiB buffers, and 5,244 descriptors held 2.6 GB, as a regular user); at
#: 512 watches a buffer is 64 KiB.
BUDGETS = {"epoll watches": 512, "pipes": 64, "record locks": 4096, "shared mappings": 4096, "local sockets": 256}
#: Shared mappings of a kernel that grades on an accelerator: its driver maps its device files for its memory (not
#: measured: the 2-core machine has no GPU), so the budget is 16 times larger, still under 3 % of the table on the
#: large machines GPUs come in, where ``fs.file-max`` is in the millions.
ACCELERATOR_MAPPINGS = 65536


def budgets_for(*, accelerators: bool) -> dict[str, int]:
    """A kernel's :data:`BUDGETS`, with room for an accelerator driver's mappings when it grades on one."""
    return {**BUDGETS, "shared mappings": ACCELERATOR_MAPPINGS} if accelerators else dict(BUDGETS)

#: Inside the jail, under a name no host path uses (the host's folders keep their paths there).
JAIL = "/ptgrader"
HOME = JAIL + "/home"
WORK = JAIL + "/work"
RUN = JAIL + "/run"  # the kernel's zmq sockets (``ipc-<n>``) and its connection file
IPC_PREFIX = RUN + "/ipc"
CONNECTION_FILE = RUN + "/connection.json"
WRITABLE = (HOME, WORK, "/tmp", "/dev/shm", RUN)
#: Host paths every kernel needs (the interpreter's own folders are added by the grader).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
#: The entries of ``/proc``'s top folder a kernel sees, besides its own processes' folders: what torch, psutil and
#: the C library read (the processor, memory and load figures, the file system types, the kernel's version and
#: settings) and the links to its own process's mounts and network. Every other entry is covered by an empty one
#: (:func:`_hide_proc_entries`), an entry a later Linux adds too. Why: some of them make Linux walk a list it
#: shares with every process of the machine while holding that list's lock (round 81: four processes reading
#: ``/proc/locks`` in a loop, holding 1,600 file locks, made every file-locking call on the machine 200 times
#: slower, an sqlite gradebook's transactions 25 times slower, for the 25 s they ran). ``/proc/zoneinfo``,
#: ``buddyinfo``, ``cgroups``, ``swaps``, ``key-users`` and ``consoles`` read under such locks too.
PROC_VISIBLE = frozenset({"self", "thread-self", "mounts", "net", "sys", "cpuinfo", "meminfo", "stat", "vmstat",
                          "loadavg", "uptime", "version", "filesystems"})
#: How much of the kernel's own stdout/stderr the keeper passes on (the rest is dropped).
RELAY_BYTES = 64 * 1024

#: Environment variables a kernel keeps from the grader's (settings of torch and its libraries;
#: nothing else: the grader's environment may hold credentials, and the kernel's output is shown).
KEPT_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "SOURCE_DATE_EPOCH", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
KEPT_ENV_PREFIXES = ("LC_", "OMP_", "MKL_", "OPENBLAS_", "ONEDNN_", "DNNL_", "ATEN_", "TORCH_", "PYTORCH_", "KINETO_",
                     "CUBLAS_", "CUDNN_", "NVIDIA_", "ROCR_", "HSA_")

#: rlimit names in a spec -> resource constants.
_LIMITS = {
    "address_space": resource.RLIMIT_AS,
    "processes": resource.RLIMIT_NPROC,
    "file_size": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
    "core": resource.RLIMIT_CORE,
    "realtime_priority": resource.RLIMIT_RTPRIO,
    "nice_ceiling": resource.RLIMIT_NICE,
    "pending_signals": resource.RLIMIT_SIGPENDING,
    "message_queue_bytes": resource.RLIMIT_MSGQUEUE,
    "locked_memory": resource.RLIMIT_MEMLOCK,
}


class JailError(RuntimeError):
    """The jail could not be built; the message says which step and why."""


@dataclass
class JailSpec:
    """Everything the keeper needs to jail one kernel (written as JSON for a cold kernel's keeper)."""

    root: str  # an empty host folder, root's or the grader's own, where the jail's tmpfs is mounted
    uid: int  # the kernel's uid and gid: a dedicated pair (grader is root) or the grader's (userns)
    gid: int
    userns: bool  # map the grader's uid into a new user namespace (a grader that is not root)
    readonly: list[str]  # host paths bound read-only at the same path (interpreter, environment)
    env: dict[str, str]
    limits: dict[str, int]  # keys of _LIMITS
    size_bytes: int = 256 << 20  # the tmpfs that holds every writable folder
    inodes: int = 16384
    devices: list[str] = field(default_factory=list)  # extra device nodes (accelerators)
    connection_file: str = ""  # host path; copied in as CONNECTION_FILE with its ip rewritten
    pid_file: str = ""  # host path; the keeper writes "<kernel pid> <keeper pid>" there
    hostname: str = "grading"
    cgroups: list[str] = field(default_factory=list)  # the kernel's control groups (ptgrader.cgroups), joined first
    syscall_filter: str = ""  # hex of the BPF program of ptgrader.syscalls; a spec without one is refused
    budgets: dict[str, int] = field(default_factory=lambda: dict(BUDGETS))  # the keeper's counts (COUNTED)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JailSpec:
        return cls(**json.loads(text))


# ------------------------------------------------------------------------------------------ syscalls

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise JailError(f"{what}: {os.strerror(code)} (errno {errno.errorcode.get(code, code)})")
    return result


def _unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: None if s is None else s.encode()  # noqa: E731
    result = _libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data))
    _check(result, f"mount {source or ''} on {target} ({fstype or 'flags'} {flags:#x})")


def _syscall(name: str, *args: object) -> int:
    number = _SYSCALLS.get(platform.machine(), {}).get(name)
    if number is None:
        raise JailError(f"{name}: no syscall number known for {platform.machine()}")
    return _libc.syscall(ctypes.c_long(number), *args)


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def _drop_capabilities() -> None:
    """No capability left in any set (a uid change from root clears them too; in a user namespace it does not)."""

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (Data * 2)()
    _check(_syscall("capset", ctypes.byref(header), ctypes.byref(data)), "capset")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def _load_filter(program: bytes) -> int:
    """Load a seccomp BPF program on this process and everything it will start (needs ``no_new_privs``); return
    the filter's listener, where Linux notifies the calls the program counts (:data:`COUNTED`).

    A jail without its filter would let a kernel fill its uid's keyring or make namespaces of its own,
    so an empty or malformed program is refused, never skipped. The listener must leave the kernel's process
    before any of its code runs: whoever holds it answers the counted calls.
    """
    if not program or len(program) % SOCK_FILTER_BYTES:
        raise JailError("no system call filter in the jail's spec: a kernel never runs without one")

    class Program(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    instructions = ctypes.create_string_buffer(program, len(program))
    fprog = Program(len(program) // SOCK_FILTER_BYTES, ctypes.addressof(instructions))
    return _check(_syscall("seccomp", ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
                           ctypes.c_uint(SECCOMP_FILTER_FLAG_NEW_LISTENER), ctypes.byref(fprog)),
                  "load the system call filter")


def kernel_filter(*, accelerators: bool = False) -> bytes:
    """The kernel's system call filter, compiled by :mod:`ptgrader.syscalls` (the grader's side only: it
    needs pyseccomp, and a cold keeper, which runs on the standard library, gets it through the spec);
    ``accelerators``: for a kernel given the machine's GPU devices."""
    from ptgrader import syscalls

    problem = syscalls.unavailable()
    if problem:
        raise JailError(problem)
    return syscalls.compile_filter(accelerators)


# ------------------------------------------------------------------------------------------ environment


def kernel_env(grader_env: dict[str, str], home: str = HOME) -> dict[str, str]:
    """The kernel's environment: torch's settings from the grader's (an allow-list), and the jail's own folders.

    Whatever ``grader_env`` holds, only the names of KEPT_ENV and KEPT_ENV_PREFIXES pass. The warm
    server is started with this environment too (``home``: a folder of its own on the host), because
    a kernel forked from it keeps the server's first environment in its memory (``/proc/self/environ``).
    """
    env = {key: value for key, value in grader_env.items() if key in KEPT_ENV or key.startswith(KEPT_ENV_PREFIXES)}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    # An OpenMP thread that waits for work sleeps instead of spinning: a kernel shares its cores (one core on a
    # 2-core machine with two graders), and the contract's second call runs with another thread count, two
    # where the kernel has one (ptchecks.contract._unusual_caller). Spinning there took lab 07's checks from
    # about 1.7 s of CPU to 3.8 s on a loaded 2-core machine (2026-12-05); an instructor's own setting wins.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.update(
        HOME=home,
        TMPDIR="/tmp",
        IPYTHONDIR=home + "/.ipython",
        MPLCONFIGDIR=home + "/.matplotlib",
        JUPYTER_CONFIG_DIR=home + "/.jupyter",
        JUPYTER_DATA_DIR=home + "/.local/share/jupyter",
        JUPYTER_RUNTIME_DIR=RUN,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONSAFEPATH="1",
        PYDEVD_DISABLE_FILE_VALIDATION="1",  # ipykernel's debugger would warn about frozen modules
        PYTHONNOUSERSITE="1",
        # torch.compile reads nothing back from its caches: no file an earlier cell wrote is unpickled
        TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
        NBGRADER_EXECUTION="autograde",
        # ipykernel's parent: outside the kernel's PID namespace, so not one it could watch (no poller, no banner)
        JPY_PARENT_PID="1",
    )
    return env


# -------------------------------------------------------------------------------------------- support


def unsupported(*, userns: bool = False) -> str:
    """Why kernels cannot be jailed here ("" when they can)."""
    if not sys.platform.startswith("linux"):
        return f"kernels are jailed with Linux namespaces; this is {sys.platform}"
    if platform.machine() not in _SYSCALLS:
        return f"the jail knows the system calls of {', '.join(_SYSCALLS)}, not of {platform.machine()}"
    if not os.path.isdir("/proc/self/ns"):
        return "this Linux has no namespaces (/proc/self/ns is missing)"
    release = tuple(int(part) for part in re.findall(r"\d+", platform.release())[:2])
    if release < OLDEST_LINUX:
        return (f"the jail counts a kernel's epoll watches and pipes through seccomp, which needs Linux"
                f" {'.'.join(map(str, OLDEST_LINUX))} or later; this is {platform.release()}")
    if userns or os.geteuid() != 0:
        try:
            limit = int(open("/proc/sys/user/max_user_namespaces").read())
        except (OSError, ValueError):
            limit = 1
        if limit == 0:
            return "user namespaces are disabled (sysctl user.max_user_namespaces = 0); grade as root"
        for knob in ("/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"):
            try:
                value = open(knob).read().strip()
            except OSError:
                continue
            if (knob.endswith("clone") and value == "0") or (knob.endswith("userns") and value == "1"):
                return f"unprivileged user namespaces are switched off ({knob} = {value}); grade as root"
    return ""


def probe(*, userns: bool = False) -> str:
    """Jail a trivial child once, its system call filter included; return why it failed ("" when it worked).

    Costs a few milliseconds. The uid and gid are read before the user namespace is made: inside it,
    before the mapping, they read as the overflow uid (65534), which no process may map.
    """
    problem = unsupported(userns=userns)
    if problem:
        return problem
    try:
        program = kernel_filter()
    except JailError as missing:
        return str(missing)
    uid, gid = os.getuid(), os.getgid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a throwaway process: the namespaces it makes go with it
        os.close(read)
        try:
            flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
            if userns:
                _unshare(CLONE_NEWUSER)
                _map_own_ids(uid, gid, uid, gid)
            _unshare(flags)
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            _prctl(PR_SET_NO_NEW_PRIVS, 1)
            os.close(_load_filter(program))
            os.write(write, b"ok")
        except BaseException as problem:  # noqa: BLE001  (reported to the parent, which decides)
            os.write(write, str(problem).encode()[:500])
        os._exit(0)
    os.close(write)
    answer = b""
    while chunk := os.read(read, 1024):
        answer += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return "" if answer == b"ok" else answer.decode(errors="replace") or "the probe process died"


def _map_own_ids(inner_uid: int, inner_gid: int, outer_uid: int, outer_gid: int) -> None:
    """In a new user namespace: map one uid and gid (our own, the only ones an unprivileged process may map)."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{inner_uid} {outer_uid} 1"), ("gid_map", f"{inner_gid} {outer_gid} 1")):
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text)


# ---------------------------------------------------------------------------------------- the keeper


def run_jailed(spec: JailSpec, start: Callable[[], NoReturn]) -> int:
    """Run ``start`` jailed in a child of this process; return the child's exit code (128+signal if killed).

    Call it in a process that does nothing else (it installs signal handlers and changes the PID
    namespace of its future children): the keeper.
    """
    if spec.userns:
        outer_uid, outer_gid = os.getuid(), os.getgid()
        _unshare(CLONE_NEWUSER | CLONE_NEWPID)
        _map_own_ids(spec.uid, spec.gid, outer_uid, outer_gid)
    else:
        _unshare(CLONE_NEWPID)
    relay_read, relay_write = os.pipe()  # the kernel's own stdout/stderr, passed on by the keeper
    life_read, life_write = os.pipe()  # closed when the keeper dies: the kernel then exits
    to_keeper, from_kernel = socket.socketpair()  # the filter listener's number, for the keeper to copy
    pid_file = os.open(spec.pid_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600) if spec.pid_file else -1
    keeper = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(relay_read)
            os.close(life_write)
            to_keeper.close()
            if pid_file >= 0:
                os.close(pid_file)
            _become_jailed(spec, relay_write, life_read, from_kernel)
            start()
        except BaseException:  # noqa: BLE001  (a kernel that cannot start must not run unjailed)
            os.write(2, f"ptgrader jail: the kernel could not be jailed:\n{traceback.format_exc()}".encode())
        os._exit(127)
    os.close(relay_write)
    os.close(life_read)
    from_kernel.close()
    if pid_file >= 0:
        os.write(pid_file, f"{pid} {keeper}\n".encode())
        os.close(pid_file)
    return _keep(pid, relay_read, to_keeper, spec.budgets)


def escaped(text: str) -> str:
    """``text`` safe to print on a terminal: each character that is not printable written as an escape.

    Newlines stay, so that a traceback still reads as one; escape codes, bidirectional overrides and
    other invisible characters become ``\\x1b``, ``\\u202e``, ...
    """
    return "".join(char if char.isprintable() or char == "\n" else ascii(char)[1:-1] for char in text)


#: What starts each line of a kernel's log on the grader's terminal (round 30: escaped but unmarked, a kernel's
#: lines read exactly like the grader's own, "graded normally" or "grades withheld" for another student).
KERNEL_MARK = "[kernel] "


def marked(text: str, at_line_start: bool) -> tuple[str, bool]:
    """``text``, escaped, with :data:`KERNEL_MARK` before each line it starts; and whether the text after it
    starts a line (the log comes in chunks that split lines anywhere)."""
    out = []
    for piece in escaped(text).splitlines(keepends=True):  # only "\n" is left to split at
        out.append(KERNEL_MARK + piece if at_line_start else piece)
        at_line_start = piece.endswith("\n")
    return "".join(out), at_line_start


#: The longest start of a line the keeper holds back while it waits for the kernel to end the line, and for how
#: long after the kernel's last text (seconds).
HELD_CHARS, HELD_S = 4096, 1.0
#: How long the keeper reads the kernel's log after the kernel ended, for the lines it wrote last (its pipe ends
#: as soon as every process of the kernel's namespace is gone; a loaded machine may take a moment to show it).
DRAIN_S = 2.0


def _write_log(text: str) -> None:
    """Write to the grader's log (the keeper's stderr); a closed log loses the text, never the kernel."""
    try:
        os.write(2, text.encode())
    except OSError:
        pass


def _keep(pid: int, relay: int, kernel: socket.socket, budgets: dict[str, int]) -> int:
    """Pass the kernel's log on (up to RELAY_BYTES), escaped and marked, signals too; answer its filter's counted
    calls (:class:`CallCounter`); wait for it; return its exit code, once its log has ended too (at most
    :data:`DRAIN_S` later: a kernel's last line came after its exit was seen, on a loaded machine, and was lost).

    The log is what the kernel wrote to its file descriptors 1 and 2 (ipykernel copies every such write
    there), which a submission controls: written raw, an escape code could set the instructor's
    clipboard (OSC 52), retitle the window or, as could a plain line, pass for a line of the grader's log.
    Only whole lines are written: a line the kernel leaves open is held until it ends it, goes quiet for a
    moment or ends, and is then ended here (round 55: "[kernel] loading data" left open had the grader's
    own next line glued after it, where it read as the kernel's, and the kernel's next text after the grader's
    newline would have had no mark).
    """

    def forward(signum: int, _frame: object) -> None:
        try:  # a terminate means kill: as PID 1 of its namespace the kernel may ignore SIGTERM
            os.kill(pid, signal.SIGKILL if signum in (signal.SIGTERM, signal.SIGHUP) else signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, forward)
    exited = os.pidfd_open(pid)  # readable when the kernel exits: no wait sleeps past it
    poller = select.poll()
    for fd in (relay, kernel.fileno(), exited):
        poller.register(fd, select.POLLIN)
    counter: CallCounter | None = None
    budget = RELAY_BYTES
    open_relay, at_line_start = True, True
    held, last_text = "", 0.0  # the start of a line the kernel has not ended, and when text last came
    awaiting = True  # the kernel's listener not yet taken
    code: int | None = None  # the kernel's exit code, once it has ended
    ended = 0.0
    while True:
        events = dict(poller.poll(200))
        if open_relay and relay in events:
            chunk = os.read(relay, 1 << 16)
            if not chunk:
                open_relay = False
                poller.unregister(relay)
            elif budget > 0:
                text, at_line_start = marked(chunk[:budget].decode("utf-8", "backslashreplace"), at_line_start)
                cut = (held + text).rfind("\n") + 1
                _write_log((held + text)[:cut])
                held, last_text = (held + text)[cut:], time.monotonic()
                budget -= len(chunk)
        quiet = time.monotonic() - last_text > HELD_S
        if held and (quiet or not open_relay or len(held) > HELD_CHARS):
            _write_log(held + "\n")
            held, at_line_start = "", True
        if awaiting and kernel.fileno() in events:  # the listener's number, once, or the kernel's end closed
            awaiting = False
            poller.unregister(kernel.fileno())
            counter = _take_listener(kernel, exited, budgets)
            kernel.close()
            if counter is not None:
                poller.register(counter.listener, select.POLLIN)
        if counter is not None and counter.listener in events:
            if events[counter.listener] & select.POLLIN:
                counter.answer()
            else:  # no process left under the filter
                poller.unregister(counter.listener)
                counter.close()
                counter = None
        if code is None:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:  # its log may still hold what it wrote last: read on to the end (bounded)
                poller.unregister(exited)
                if awaiting:  # it ended before its listener was taken: nothing left to count
                    awaiting = False
                    poller.unregister(kernel.fileno())
                    kernel.close()
                code, ended = os.waitstatus_to_exitcode(status), time.monotonic()
                code = 128 - code if code < 0 else code
        if code is not None and (not open_relay or time.monotonic() - ended > DRAIN_S):  # its last lines relayed
            if held:
                _write_log(held + "\n")
            os.close(exited)
            if counter is not None:
                counter.close()
            return code


def _take_listener(kernel: socket.socket, pidfd: int, budgets: dict[str, int]) -> CallCounter | None:
    """Copy the kernel's filter listener, whose number it sent on ``kernel``, into the keeper (``pidfd_getfd``).

    Why not pass it over the socket (``SCM_RIGHTS``): Linux counts the descriptors in flight per uid and refuses a
    sender once its uid has more than the sender's open-file limit in flight, and a kernel can fill that count
    for its uid, the instructor's own as a regular user (round 66: a kernel held 1,250 in flight, and the next
    kernel of another job could not hand its listener over, nor start). A keeper that cannot take the listener
    kills the kernel: a kernel whose counted calls nobody answers gets ``ENOSYS`` for each, and must not run.
    """
    number = kernel.recv(4)
    if len(number) != 4:
        return None  # the kernel could not be jailed: it says why on its log, and exits
    copied = _libc.syscall(ctypes.c_long(PIDFD_GETFD), pidfd, *struct.unpack("i", number), 0)
    if copied < 0:
        _write_log(f"[jail] the keeper could not take the kernel's listener: {os.strerror(ctypes.get_errno())}\n")
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return None
    kernel.sendall(b"k")
    return CallCounter(copied, budgets)


class CallCounter:
    """The keeper's side of the filter's listener: lets each kind of :data:`COUNTED` call through up to its budget,
    and refuses the rest with the answer Linux gives when the uid's allowance is spent.

    Why here: a filter cannot count, so it notifies each counted call of the kernel and of everything it starts,
    and the call waits until the keeper answers, go on (the call then runs as it would have) or the refusal. Only
    the call's number is read, never its memory, so the answer cannot be raced. A kernel that keeps calling past
    its budget costs the keeper about what each call costs the kernel, a round trip, and the submission's time
    limit bounds both.
    """

    def __init__(self, listener: int, budgets: dict[str, int]) -> None:
        numbers = _SYSCALLS[platform.machine()]
        self.listener = listener
        self.kinds = {numbers[call]: kind for kind, (calls, _) in COUNTED.items() for call in calls if call in numbers}
        self.left = dict(budgets)
        self.budgets = budgets

    def answer(self) -> None:
        """Answer the pending call (there is one: the listener polled readable)."""
        request = bytearray(NOTIF_BYTES)
        try:
            fcntl.ioctl(self.listener, NOTIF_RECV, request)
        except OSError:  # the caller was interrupted by a signal, or is gone: nothing to answer
            return
        ident, _, _, number = struct.unpack_from("QIIi", request)
        kind = self.kinds.get(number, "")
        if self.left.get(kind, 0) > 0:
            self.left[kind] -= 1
            response = struct.pack("QqiI", ident, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE)
        else:
            if self.left.get(kind) == 0:
                self.left[kind] = -1  # said once
                _write_log(f"[jail] the kernel made its {self.budgets[kind]} {kind}; later ones are refused\n")
            response = struct.pack("QqiI", ident, 0, -COUNTED.get(kind, ((), errno.EPERM))[1], 0)
        try:
            fcntl.ioctl(self.listener, NOTIF_SEND, response)
        except OSError:  # the caller went away meanwhile
            pass

    def close(self) -> None:
        os.close(self.listener)


# ---------------------------------------------------------------------------------------- the kernel


def _become_jailed(spec: JailSpec, log: int, lifeline: int, keeper: socket.socket) -> None:
    """In the kernel's process, PID 1 of its new namespace: build the jail, enter it, drop privileges; last, load
    the system call filter and let the keeper copy its listener (its number goes through ``keeper``)."""
    os.setsid()
    for group in spec.cgroups:  # while still root: the kernel and all it starts stay in these groups
        with open(os.path.join(group, "cgroup.procs"), "w") as procs:
            procs.write("0")
    _unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the host, nor back
    _build_root(spec)
    _loopback_up()
    socket.sethostname(spec.hostname)
    old = os.path.join(spec.root, ".host")
    os.mkdir(old)
    _check(_syscall("pivot_root", spec.root.encode(), old.encode()), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.host", MNT_DETACH), "umount the host's root")
    os.rmdir("/.host")
    _mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)  # the tmpfs's own top

    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    kept = sorted({lifeline, keeper.fileno()})  # nothing of the host stays open (both are closed below)
    for low, high in zip([3, *(fd + 1 for fd in kept)], [*kept, resource.getrlimit(resource.RLIMIT_NOFILE)[0]]):
        os.closerange(low, high)

    if not spec.userns:
        os.setgroups([])
    os.setresgid(spec.gid, spec.gid, spec.gid)
    os.setresuid(spec.uid, spec.uid, spec.uid)
    _drop_capabilities()
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
    ready, _, _ = select.select([lifeline], [], [], 0)
    if ready:  # EOF: the keeper died before the line above
        os._exit(1)
    os.close(lifeline)
    for name, value in spec.limits.items():
        resource.setrlimit(_LIMITS[name], (value, value))
    os.umask(0o077)
    os.chdir(WORK)
    os.environ.clear()
    os.environ.update(spec.env)
    listener = _load_filter(bytes.fromhex(spec.syscall_filter))  # last: from here on, every call passes the filter
    keeper.sendall(struct.pack("i", listener))  # the keeper copies it (pidfd_getfd), then says so
    if keeper.recv(1) != b"k":
        raise JailError("the keeper did not take the system call filter's listener")
    os.close(listener)
    keeper.close()


def _build_root(spec: JailSpec) -> None:
    root = spec.root
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, f"size={spec.size_bytes},nr_inodes={spec.inodes},mode=0755")
    for folder in WRITABLE:  # each its own mount, so that they stay writable when the root is made read-only
        os.makedirs(root + folder, exist_ok=True)
        os.chown(root + folder, spec.uid, spec.gid)
        os.chmod(root + folder, 0o700)
        _mount(root + folder, root + folder, None, MS_BIND)
    bound: list[str] = []
    for path in sorted({os.path.normpath(p) for p in (*SYSTEM_PATHS, *spec.readonly)}, key=len):
        if not os.path.lexists(path):
            continue
        real = os.path.realpath(path)
        if real != path:  # a symlink (/bin -> usr/bin): the same link inside, and its target bound
            _symlink(root, path, os.readlink(path) if os.path.islink(path) else real)
            path = real
            if not os.path.exists(path):
                continue
        if any(path == done or path.startswith(done + "/") for done in bound):
            continue
        # one under /tmp (a virtualenv there) is bound inside the jail's /tmp; in a user namespace Linux binds
        # a folder only with the mounts below it (/sys/fs/cgroup), which _bind then makes read-only too
        _bind(path, root + path, readonly=True, recursive=spec.userns)
        bound.append(path)
    os.makedirs(root + "/dev", exist_ok=True)
    for device in (*DEVICES, *spec.devices):
        if os.path.exists(device):
            _bind(device, root + device, readonly=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(root + "/proc")
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _hide_proc_entries(root + "/proc")
    if spec.connection_file:
        with open(spec.connection_file, encoding="utf-8") as file:
            info = json.load(file)
        info["ip"] = IPC_PREFIX
        descriptor = os.open(root + CONNECTION_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(info, file)
        os.chown(root + CONNECTION_FILE, spec.uid, spec.gid)


def _hide_proc_entries(proc: str) -> None:
    """Cover every entry of the jail's fresh ``/proc`` that is not a process's folder nor in :data:`PROC_VISIBLE`: a
    file by ``/dev/null`` (read-only: it reads as empty), a folder by an empty read-only tmpfs, as container
    runtimes mask theirs."""
    for name in os.listdir(proc):
        path = os.path.join(proc, name)
        if name.isdigit() or name in PROC_VISIBLE:
            continue
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=1,mode=0555")
        else:
            _mount("/dev/null", path, None, MS_BIND)
            _remount(path, readonly=True)


def _symlink(root: str, path: str, target: str) -> None:
    os.makedirs(os.path.dirname(root + path), exist_ok=True)
    if not os.path.lexists(root + path):
        os.symlink(target, root + path)


def _bind(source: str, target: str, *, readonly: bool, recursive: bool = False) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "a").close()
    _mount(source, target, None, MS_BIND | (MS_REC if recursive else 0))
    _remount(target, readonly=readonly)
    if recursive and readonly:
        for below in _mount_points_below(target):
            _remount(below, readonly=True)


def _remount(target: str, *, readonly: bool) -> None:
    """Remount a bind with the flags Linux locks kept (a user namespace may add flags, never drop them)."""
    kept = os.statvfs(target).f_flag
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | sum(ms for st, ms in _KEPT_FLAGS.items() if kept & st)
    if readonly:
        flags |= MS_RDONLY | MS_NODEV
    _mount(None, target, None, flags)


def _mount_points_below(target: str) -> list[str]:
    """The mounts that the bind on ``target`` brought below it (this namespace's table), parents first.

    Why: a recursive bind brings them with their own flags. In a user namespace the only bind Linux
    allows of /sys is recursive, and it brought /sys/fs/cgroup's hierarchies writable: a kernel running
    as the grader's own uid outside could write the groups that uid owns (freeze the grading run, or
    kill the instructor's session through a delegated cgroup v2). Only the new mount's descendants: an
    older mount under ``target`` (a bind made before, now hidden below the new one) is no mount point
    any more.
    """
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        rows = [line.split() for line in table]
    tops = [row[0] for row in rows if _unescaped(row[4]) == target]
    if not tops:
        return []
    family, points = {tops[-1]}, []
    for row in rows:  # Linux lists a mount after its parent
        if row[1] in family and row[0] not in family:
            family.add(row[0])
            points.append(_unescaped(row[4]))
    return points


def _unescaped(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes are written as octal escapes (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match[1], 8)), field)


def _loopback_up() -> None:
    """Bring up ``lo`` in the new network namespace (a local gloo process group needs it)."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sh22x", b"lo", flags | iff_up))


# ------------------------------------------------------------------------------------ the cold keeper


def main(argv: list[str]) -> int:
    """``jail.py SPEC.json -- COMMAND...``: jail COMMAND (a cold kernel); ``jail.py --check``: can this machine?"""
    if argv[:1] == ["--check"]:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # ptgrader's own modules
        problem = probe(userns=os.geteuid() != 0)
        if problem:
            print(problem)
            return 1
        from ptgrader.cgroups import Hierarchy

        hierarchy = Hierarchy.find()
        groups = f"a {hierarchy.describe()} group of its own" if hierarchy else "rlimits only, no control group"
        print(f"ok: kernels can be jailed here ({'dedicated uid' if os.geteuid() == 0 else 'user namespace'}, {groups})")
        return 0
    if len(argv) < 3 or argv[1] != "--":
        print("usage: jail.py SPEC.json -- COMMAND... | jail.py --check", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as file:
        spec = JailSpec.from_json(file.read())
    command = argv[2:]
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the keeper goes when the grader goes
    if os.getppid() == 1:
        return 1
    return run_jailed(spec, lambda: os.execve(command[0], command, spec.env))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
