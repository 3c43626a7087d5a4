"""Where and how a grading kernel starts: its place on the host, its jail, its kernel manager.

- :class:`GraderTemp` is this grading process's one temporary folder (``/tmp/ptgrader-tmp-*``), with
  a folder per kernel in it. A grader that is killed cannot remove it, so the next grader removes
  every ``ptgrader-tmp-*`` folder of its user whose owner process is gone, and the warm server removes its
  grader's folder when it sees the grader go.
- :func:`kernel_uid` picks the dedicated uid kernels run as when the grader is root (one per
  grading process, held with a lock file so that graders side by side never share one).
- :class:`Isolation` turns the grader's settings into a :class:`~ptgrader.jail.JailSpec` for
  each kernel: what is bound read-only, the environment (:func:`ptgrader.jail.kernel_env`, an
  allow-list, whatever environment the caller passes), the rlimits, the system call filter
  (:mod:`ptgrader.syscalls`, compiled once per grader), and a control group (:mod:`ptgrader.cgroups`)
  for all of its processes where the machine allows one.
- :class:`IsolatedKernelManager` is jupyter_client's kernel manager, starting ipykernel through
  the jail (``jail.py``, or the warm server, :mod:`ptgrader.warm`) and talking to it through a relay
  (:mod:`ptgrader.relay`, a process under a memory limit) connected to the Unix sockets that live
  inside the jail, reached through ``/proc/<kernel pid>/root``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import importlib.util
import logging
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from jupyter_client.session import Session
from traitlets import DottedObjectName, Type

from . import cgroups, jail
from .kernel_client import (
    MAX_FRAMES,
    RECEIVED_BYTES_BUDGET,
    RECONNECT_AFTER_MS,
    OnceConnectedKernelClient,
    RepollingKernelManager,
    connect_once_listening,
    wait_until_listening,
)
from .relay import Relay

JAIL_SCRIPT = Path(jail.__file__)
#: The grader's own temporary folders: a prefix no other tool's folder has (the tests' course folders were
#: once named ``ptgrader-regular-user-*``, and a grader run as root removed them mid-run).
TEMP_PREFIX = "ptgrader-tmp-"
OWNER_FILE = "owner"

#: Dedicated uids for kernels when the grader is root: no account uses them (see kernel_uid).
UID_BASE = 1_950_000_000
UID_COUNT = 4096
UID_LOCKS = Path(tempfile.gettempdir()) / "ptgrader-uids"

GIB, MIB = 1 << 30, 1 << 20
#: The largest message the grader takes from a kernel: a bigger one drops that channel (the cell then
#: times out) instead of growing the grader's memory. Cell output is cut at 20 kB anyway.
MAX_MESSAGE_BYTES = 32 * MIB
#: The most messages a grader's socket holds that the grader has not read yet. Past it, zmq stops reading
#: from the kernel, whose own queue then waits (in the kernel's memory, which its limits count): what the
#: grader holds unread stays under UNREAD_MESSAGES * MAX_MESSAGE_BYTES a channel (a round's kernel printing
#: 30 MiB strings, with zmq's default of 1000, took the grader to 4.6 GB).
UNREAD_MESSAGES = 4

#: The signal that asks a kernel to stop its running test cell, whose outputs already differ from the reference's
#: (``ptchecks.STOP_SIGNAL``; a test holds them equal). Its default action is to ignore it: a kernel that has not
#: installed the checks' handler (PID 1 of its namespace takes no signal it has no handler for) just goes on.
STOP_SIGNAL = signal.SIGWINCH

#: Accelerator device nodes a kernel may open (only those that exist are bound).
ACCELERATOR_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", "/dev/kfd")


def _process_start(pid: int) -> str:
    """A process's start time (field 22 of /proc/<pid>/stat), "" when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _owner_alive(folder: Path) -> bool:
    try:
        pid, start = (folder / OWNER_FILE).read_text().split()
    except (OSError, ValueError):  # half made: its owner is alive if it is younger than a minute
        return time.time() - folder.stat().st_mtime < 60
    return _process_start(int(pid)) == start


@contextlib.contextmanager
def kernel_place(isolation: Isolation | None) -> Iterator[tuple[Path, jail.JailSpec | None]]:
    """(a fresh folder for one kernel, its jail spec, or None without a jail).

    Both the submissions' kernels and the reference run's are started this way; the folder and any
    control group are removed afterwards, whatever happened in the block.
    """
    folder = GraderTemp.current().kernel_folder()
    spec = None
    try:
        spec = isolation.spec(folder, dict(os.environ)) if isolation else None
        yield folder, spec
    finally:
        if spec is not None and spec.cgroups and not cgroups.remove(spec.cgroups):
            logging.getLogger("ptgrader").warning("a control group of a kernel is still busy: %s", spec.cgroups)
        shutil.rmtree(folder, ignore_errors=True)


class GraderTemp:
    """This process's temporary folder: one per grading process, removed at exit or by the next grader."""

    _current: ClassVar[GraderTemp | None] = None

    @classmethod
    def current(cls) -> GraderTemp:
        if cls._current is None or not cls._current.path.is_dir():
            cls.remove_stale()
            cls._current = cls()
            atexit.register(cls._current.remove)
        return cls._current

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        (self.path / OWNER_FILE).write_text(f"{os.getpid()} {_process_start(os.getpid())}\n")

    def kernel_folder(self) -> Path:
        folder = self.path / f"k-{uuid.uuid4().hex[:12]}"
        folder.mkdir(mode=0o700)
        return folder

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    @staticmethod
    def remove_stale(parent: Path | None = None) -> list[Path]:
        """Remove this user's ``ptgrader-tmp-*`` folders of grading processes that are gone; return them.

        Only folders this user owns: a grader run as root must not remove another user's folder, whatever
        it is named. A folder too deep to remove (a kernel's tree of a thousand levels) is left.
        """
        removed = []
        for folder in sorted((parent or Path(tempfile.gettempdir())).glob(TEMP_PREFIX + "*")):
            if (folder.is_dir() and not folder.is_symlink() and folder.stat().st_uid == os.getuid()
                    and not _owner_alive(folder)):
                try:
                    shutil.rmtree(folder, ignore_errors=True)
                except RecursionError:
                    continue
                removed.append(folder)
        return removed


_held_uid: tuple[int, int] | None = None  # (uid, lock file descriptor) of this process


def kernel_uid() -> int:
    """This grading process's dedicated kernel uid (root only): the first one of the range it can lock."""
    global _held_uid
    if _held_uid is not None:
        return _held_uid[0]
    UID_LOCKS.mkdir(mode=0o700, exist_ok=True)
    if UID_LOCKS.is_symlink() or UID_LOCKS.stat().st_uid != 0:
        raise jail.JailError(f"{UID_LOCKS} is not root's own folder: refusing to take kernel uids from it")
    taken = {int(line.split(":")[2]) for line in Path("/etc/passwd").read_text().splitlines() if line.count(":") >= 3}
    start = os.getpid() % UID_COUNT  # graders side by side mostly try different uids first
    for offset in range(UID_COUNT):
        uid = UID_BASE + (start + offset) % UID_COUNT
        if uid in taken:
            continue
        descriptor = os.open(UID_LOCKS / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            continue
        _held_uid = (uid, descriptor)
        return uid
    raise jail.JailError(f"all {UID_COUNT} kernel uids from {UID_BASE} are in use by other graders")


#: Memory of all of a kernel's processes together (its control group): ten times the heaviest lab's
#: resident peak (0.47 GiB), plus its 512 MiB of writable folders, which live in memory.
TREE_MEMORY = 6 * GIB


def default_limits() -> dict[str, int]:
    """rlimits of a kernel: ten times what the honest solution of the heaviest lab used.

    Measured on a 2-core machine (book/instructors.md): lab 06 peaked at 1.8 GiB of address space,
    0.47 GiB resident, 17 threads and 65 open files, and wrote no file. Address space: that peak
    plus ten times its resident size, and room for one thread stack and malloc arena per extra
    core; processes (threads count): ten times 15 plus one per core; files: 64 MiB each. No real-time
    priority and no raised priority, whatever the grader was allowed (a desktop's audio group may allow
    real-time scheduling): a kernel in real-time would take its cores from everything else. Queued signals and POSIX
    timers: 256, and no message-queue bytes: Linux counts both for the uid outside a user namespace, a regular
    user's own, against that user's limit (``ulimit -i``, in the tens of thousands), so a kernel may take only a
    sliver of it. Open files: 512, eight times the peak, and half the usual 1,024: Linux counts the descriptors
    in flight over local sockets per uid, and refuses a sender once its uid has more in flight than the sender's
    open-file limit, so a kernel can fill the count to its own limit plus one message's 253 (round 66: 1,250 with
    1,024, and every program of the instructor's uid with the usual limit failed to pass a descriptor); with 512,
    765 at most. Locked memory: 8 MiB at most (Linux's usual default, lower where the grader's own limit is): pages
    a kernel locks stay in memory whatever else needs it, and where the grader runs with no limit (as root in some
    containers), a kernel could otherwise lock as much as its address space. Core dumps: a limit of 1 byte, not 0.
    Linux ignores the limit where ``kernel.core_pattern`` pipes dumps to a program (Ubuntu's apport,
    systemd-coredump), which then starts as root, outside the jail, at every crash of a kernel's process (round 84),
    except at exactly 1, which it reads as "never pipe" (its guard against a crashing crash handler); and a dump to
    a file needs at least a page, so 1 allows none either. The soft limit may not be lowered to 0 either: the
    system call filter refuses any change of it (:mod:`ptgrader.syscalls`).
    """
    cpus = os.cpu_count() or 2
    locked_hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    return {
        "address_space": 7 * GIB + 80 * MIB * max(0, cpus - 2),
        "processes": 10 * (15 + cpus),
        "file_size": 64 * MIB,
        "open_files": 512,
        "core": 1,  # no dump at all, piped ones included (see above)
        "realtime_priority": 0,
        "nice_ceiling": 0,
        "pending_signals": 256,
        "message_queue_bytes": 0,
        "locked_memory": 8 * MIB if locked_hard == resource.RLIM_INFINITY else min(8 * MIB, locked_hard),
    }


def _folders_on_the_way(executable: str) -> set[str]:
    """The folders of every link from ``executable`` to the interpreter it names.

    A virtualenv's ``python`` may link to a ``python3`` that is itself a link (a folder of links put first on
    PATH, a package manager's shims): inside the jail each link must resolve, so each one's folder is needed.
    """
    folders, path, seen = set(), os.path.abspath(executable), set()
    while os.path.islink(path) and path not in seen:
        seen.add(path)
        path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
        folders.add(os.path.dirname(path))
    folders.add(os.path.dirname(os.path.realpath(executable)))
    return folders


def _is_within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@dataclass
class Isolation:
    """How this grader jails its kernels (one per grading process; see GuardedExecute's settings)."""

    course: str  # the course root: never visible in a kernel, nor any folder holding it
    limits: dict[str, int] = field(default_factory=default_limits)
    scratch_bytes: int = 512 * MIB  # the tmpfs that holds a kernel's writable folders
    devices: tuple[str, ...] = ()
    memory_bytes: int = TREE_MEMORY  # all of a kernel's processes together (a control group, where there is one)

    def __post_init__(self) -> None:
        self.userns = os.geteuid() != 0
        self.uid = 1000 if self.userns else kernel_uid()
        self.readonly = self._readonly_paths()
        self.syscall_filter = jail.kernel_filter(accelerators=bool(self.devices)).hex()
        self.hierarchy = cgroups.Hierarchy.find()
        if self.hierarchy is not None:
            try:
                self.hierarchy = self.hierarchy.prepare()
                self.hierarchy.remove_stale()
            except OSError:  # a hierarchy root may not write (a container's): the rlimits still hold
                self.hierarchy = None

    def describe(self) -> str:
        """How the kernels are isolated, for the grading report."""
        user = "user namespace" if self.userns else f"uid {self.uid}"
        group = (f", {self.hierarchy.describe()}: {self.memory_bytes / GIB:g} GiB and {self.limits['processes']}"
                 " processes for all of its processes"
                 + (", the same CPU weight as every other kernel" if self.hierarchy.cpu else "")
                 ) if self.hierarchy else ", rlimits only"
        return f"jail: {user}{group}"

    def _readonly_paths(self) -> list[str]:
        """The interpreter, the environment and the folders on its import path; never the course."""
        candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                      *_folders_on_the_way(sys.executable)}
        candidates |= {entry for entry in sys.path if entry and os.path.isabs(entry)}
        for package in ("ptlabs", "ipykernel", "torch"):
            spec = importlib.util.find_spec(package)
            if spec is not None and spec.origin:
                candidates.add(os.path.dirname(os.path.dirname(spec.origin)))
        course, here = os.path.realpath(self.course), os.path.realpath(os.getcwd())
        paths = []
        for entry in sorted(candidates):
            real = os.path.realpath(entry)
            if not os.path.isdir(real) or real == "/":
                continue
            if _is_within(course, real) or _is_within(real, course) or _is_within(here, real):
                continue  # holds the course (or is inside it), or the grader's own folder: not for a kernel
            paths.append(entry)
        return paths

    def spec(self, folder: Path, env: dict[str, str]) -> jail.JailSpec:
        root = folder / "root"
        root.mkdir(exist_ok=True)
        return jail.JailSpec(
            root=str(root),
            uid=self.uid,
            gid=self.uid,
            userns=self.userns,
            readonly=self.readonly,
            env=jail.kernel_env(env),
            limits=dict(self.limits),
            size_bytes=self.scratch_bytes,
            devices=list(self.devices),
            budgets=jail.budgets_for(accelerators=bool(self.devices)),
            connection_file=str(folder / "connection.json"),
            pid_file=str(folder / "pid"),
            cgroups=self._groups(folder),
            syscall_filter=self.syscall_filter,
        )

    def _groups(self, folder: Path) -> list[str]:
        """A control group for the kernel about to start (none where the machine offers none)."""
        if self.hierarchy is None:
            return []
        try:
            return self.hierarchy.make(f"{cgroups.PREFIX}{os.getpid()}-{folder.name}", self.memory_bytes,
                                       self.limits["processes"])
        except OSError:
            return []


def accelerator_devices() -> list[str]:
    """Device nodes of the accelerators on this machine (NVIDIA, AMD), for a kernel that grades on them."""
    found = [device for device in ACCELERATOR_DEVICES if os.path.exists(device)]
    found += sorted(str(p) for p in Path("/dev").glob("nvidia[0-9]*"))
    found += sorted(str(p) for p in Path("/dev/dri").glob("*")) if Path("/dev/dri").is_dir() else []
    return found


# ----------------------------------------------------------------------------------- kernel manager


#: A grading kernel reports a failed cell in Python's own traceback format (file, line, the line's code),
#: not IPython's default "Context" one, which also prints the lines around each frame. Why: the context
#: is found by reading and parsing every frame's source file, and searching sys.modules (thousands of
#: modules beside torch) for each frame's module, in every forked kernel anew: for lab 02's class (25
#: submissions, most with a failing test cell) that was 4 s of its 15 s of kernel CPU. The feedback keeps
#: what a student needs: each frame's file, line and code, and the error's message.
PLAIN_TRACEBACKS = "--InteractiveShell.xmode=Plain"

#: IPython reads a one-line cell a second time (its "prefilter"): with automagic on, a line that starts with a
#: magic's or an alias's name runs as that magic (``sx /"";sh -"c" "id"``, a division and a subtraction to the
#: code policy, started a shell), and with autocall, ``f x`` calls ``f``. Both off in every grading kernel, so
#: that the kernel runs the Python the policy and the source rules read (:func:`ptgrader.ipython_code.as_python`).
SHELL_SETTINGS = (PLAIN_TRACEBACKS, "--InteractiveShell.automagic=False", "--InteractiveShell.autocall=0")


class KernelStartError(RuntimeError):
    """The jailed kernel did not start (its keeper's log says why)."""


class UnguessableSession(Session):
    """A session whose message ids a kernel cannot guess.

    jupyter_client numbers them (``<session>_<pid>_<n>``), so a kernel that reads one request's id can name the
    grader's next request before it is sent: round 49 sent a reply to it ahead of time (the grader stopped that
    kernel, as one replying to no request it was waiting on; unguessable ids close that route as well)."""

    @property
    def msg_id(self) -> str:
        return uuid.uuid4().hex


class IsolatedKernelManager(RepollingKernelManager):
    """jupyter_client's kernel manager for a jailed ipykernel: started through jail.py or the warm server.

    Set ``folder`` (a kernel folder of :class:`GraderTemp`), ``spec`` and optionally ``warm``
    before starting it. After the start, ``kernel_pid`` is the kernel's pid (PID 1 of its
    namespace, as seen here) and ``kernel_pidfd`` a pidfd on it.
    """

    client_class = DottedObjectName("ptgrader.kernel_client.OnceConnectedKernelClient")
    client_factory = Type(OnceConnectedKernelClient)
    folder: Path | None = None
    spec: jail.JailSpec | None = None
    warm: Any = None  # ptgrader.warm.WarmKernels
    kernel_pid: int = 0
    kernel_pidfd: int = -1
    relay: Relay | None = None
    startup_timeout_s: float = 60.0
    received_bytes_budget: int = RECEIVED_BYTES_BUDGET  # GuardedExecute.received_bytes_budget

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.transport = "ipc"

    def _session_default(self) -> Session:
        return UnguessableSession(parent=self)

    def prepare(self, folder: Path, spec: jail.JailSpec | None, warm: Any = None) -> None:
        """Use ``folder`` for this kernel; jail it with ``spec`` (None: run it unjailed, as the grader)."""
        self.folder, self.spec, self.warm = folder, spec, warm
        self.ip = str(folder / "ipc")  # jailed, only to pick socket numbers: the sockets live in the jail
        self.connection_file = str(folder / "connection.json")
        if spec is not None:
            (folder / "spec.json").write_text(spec.to_json(), encoding="utf-8")

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        command = super().format_kernel_cmd(extra_arguments)
        is_ipykernel = command[1:3] == ["-m", "ipykernel_launcher"]
        if is_ipykernel:
            command.extend(SHELL_SETTINGS)
        if self.spec is None:
            return command
        if not is_ipykernel:
            raise KernelStartError(f"only ipykernel kernels are jailed, not {command[:3]}")
        command = [jail.CONNECTION_FILE if arg == os.path.realpath(self.connection_file) else arg for arg in command]
        # The working folder is not on the import path: a module a student writes there cannot stand in for one
        # a test cell imports later (with PYTHONSAFEPATH for Python's own first entry).
        command.append("--IPKernelApp.ignore_cwd=True")
        if self.warm is not None:
            return self.warm.kernel_command(str(self.folder / "spec.json"), command[3:])
        return [sys.executable, "-I", "-S", str(JAIL_SCRIPT), str(self.folder / "spec.json"), "--", *command]

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        await super()._async_launch_kernel(kernel_cmd, **kw)
        if self.spec is None:
            return
        assert self.folder is not None
        pid_file = self.folder / "pid"
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            text = pid_file.read_text() if pid_file.exists() else ""
            if text.endswith("\n"):
                break
            if await self.provisioner.poll() is not None or time.monotonic() > deadline:  # type: ignore[union-attr]
                raise KernelStartError("the jailed kernel did not start (see the grader's log above)")
            await asyncio.sleep(0.005)
        kernel, keeper = (int(word) for word in text.split())
        self.kernel_pid = kernel
        with contextlib.suppress(OSError):
            self.kernel_pidfd = os.pidfd_open(kernel)
        if _parent_of(kernel) != keeper:  # gone already (and its pid taken): it cannot be reached
            self.close_pidfd()
            raise KernelStartError("the jailed kernel exited at once")
        self.relay = self._start_relay(kernel, f"/proc/{kernel}/root{jail.IPC_PREFIX}")
        self.ip = str(self.folder / "relay")

    def _start_relay(self, kernel: int, kernel_ip: str) -> Relay:
        """The relay between the kernel's shell, IOPub and control sockets and the grader's, once they listen.

        The relay's sockets are in the kernel's folder on the host, which the jail does not show.
        """
        assert self.folder is not None
        ports = {"shell": self.shell_port, "iopub": self.iopub_port, "control": self.control_port}
        wait_until_listening([f"{kernel_ip}-{port}" for port in ports.values()], self.startup_timeout_s)
        kinds = {"shell": "request", "iopub": "publish", "control": "command"}
        routes = [(kinds[name], f"{kernel_ip}-{port}", f"{self.folder}/relay-{port}") for name, port in ports.items()]
        return Relay.start(routes, kernel_pid=kernel, max_frames=MAX_FRAMES, max_message_bytes=MAX_MESSAGE_BYTES,
                           reconnect_ms=RECONNECT_AFTER_MS)

    async def _async_is_alive(self) -> bool:
        """Alive while the kernel and its relay both are (a relay that refused a message stopped for good)."""
        if self.relay is not None and self.relay.failure():
            return False
        return await super()._async_is_alive()

    is_alive = _async_is_alive  # AsyncKernelManager's is the coroutine too

    def _connect_control_socket(self) -> None:
        """The manager's own control socket (a shutdown request goes there), connected as the client's are:
        once the kernel listens, never again (:class:`~ptgrader.kernel_client.OnceConnectedKernelClient`)."""
        if self._control_socket is None and self.transport == "ipc" and self.spec is not None:
            connect_once_listening(self.context, [f"{self.ip}-{self.control_port}"], self.startup_timeout_s)
        super()._connect_control_socket()

    def client(self, **kwargs: Any) -> Any:
        """A client whose sockets refuse frames over MAX_MESSAGE_BYTES and hold at most UNREAD_MESSAGES messages the
        grader has not read (each client has a zmq context of its own), connected once
        (:class:`~ptgrader.kernel_client.OnceConnectedKernelClient`), that kills the kernel at once when its
        messages go over its budget."""
        client = super().client(**kwargs)
        if self.spec is not None:
            import zmq

            client.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
            client.context.setsockopt(zmq.RCVHWM, UNREAD_MESSAGES)
            client.stop_kernel, client.byte_budget = self.kill_at_once, self.received_bytes_budget
            client.route_failure = self.relay.failure if self.relay is not None else None
        return client

    def kill_at_once(self) -> None:
        """SIGKILL the kernel (and its whole PID namespace) without waiting; :meth:`ensure_dead` waits later."""
        if self.kernel_pidfd >= 0:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.kernel_pidfd, signal.SIGKILL)

    def ask_to_stop(self) -> None:
        """Ask the kernel to stop its running test cell (:data:`STOP_SIGNAL`); it stops at its next output or call
        of the contract harness (``ptchecks._stop_point``), never inside the student's code."""
        if self.kernel_pidfd >= 0:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.kernel_pidfd, STOP_SIGNAL)

    def cpu_seconds(self) -> float:
        """CPU time the kernel and the children it waited for have used so far (0 when not known)."""
        try:
            fields = Path(f"/proc/{self.kernel_pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def leftover_processes(self) -> int:
        """How many processes besides the kernel run in its jail now (a detached child, a server...)."""
        try:
            return max(0, sum(name.isdigit() for name in os.listdir(f"/proc/{self.kernel_pid}/root/proc")) - 1)
        except OSError:
            return 0

    def ensure_dead(self, wait_s: float = 10.0) -> bool:
        """Kill the kernel, and with it everything in its PID namespace; True once all of it is gone.

        Linux reports the kernel (PID 1 there) dead only after every other process of the namespace
        is: one signal ends the whole tree, and no process list is read.
        """
        if self.relay is not None:
            self.relay.stop()
        if self.kernel_pidfd < 0:
            return True
        self.kill_at_once()
        ready, _, _ = select.select([self.kernel_pidfd], [], [], wait_s)
        if ready:
            self.close_pidfd()
        return bool(ready)

    def close_pidfd(self) -> None:
        if self.kernel_pidfd >= 0:
            os.close(self.kernel_pidfd)
            self.kernel_pidfd = -1


def _parent_of(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1
