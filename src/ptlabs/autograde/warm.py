"""Warm grading kernels: a server that has imported torch once forks every student's kernel.

Why: each submission is graded in a fresh kernel, and a fresh kernel spends most of its CPU
importing torch (about 2 s on a laptop core, twice that with ``torch._dynamo``) before the first
cell runs. A class of 200 submissions pays that 200 times. Here one server process per grading
run imports the heavy modules once (never ``ptlabs.grading``, whose tamper record must be taken in
the kernel itself) and, for each kernel, forks a child that becomes an ordinary IPython kernel
(``ipykernel``) in the student's private folder, environment and standard streams. Memory is
copied on write: what one kernel does never reaches the server or the next kernel.

The pieces:

- :class:`WarmKernels` (in the grader's process) starts the server and says how to launch a kernel
  through it (:meth:`WarmKernels.kernel_command`), and, after each student, has it kill whatever
  the kernel left behind (:meth:`WarmKernels.reap`);
- ``warm_launcher.py`` is the process jupyter_client starts and manages as "the kernel": it hands
  its request to the server and stands in for the forked kernel (signals, exit status);
- :func:`serve` is the server. It registers as child subreaper, so every process a kernel starts,
  detached or not, stays its descendant, and it kills a kernel whose launcher went away.

Linux only (fork, ``/proc``, subreaper); elsewhere the grader starts kernels the usual way.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import random
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from jupyter_client.manager import AsyncKernelManager

from .sandbox import _children_of, become_subreaper, kill_until_gone

LAUNCHER = Path(__file__).with_name("warm_launcher.py")
_PR_SET_PDEATHSIG = 1
#: How long the server may take to import the preloaded modules (seconds; torch takes a few).
STARTUP_TIMEOUT_S = 120


def supported() -> bool:
    """Where warm kernels work: fork, Unix sockets passing file descriptors, and /proc."""
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds") and Path("/proc/self/task").is_dir()


class WarmKernels:
    """The grader's handle on one warm server (started on first use, stopped with the grader)."""

    #: One server per grading process and preload list: nbgrader makes a new preprocessor per notebook.
    _shared: ClassVar[dict[tuple[str, ...], WarmKernels]] = {}

    @classmethod
    def shared(cls, preload: list[str]) -> WarmKernels:
        """The running server for ``preload``, started if needed and stopped when this process exits."""
        key = tuple(preload)
        if key not in cls._shared:
            cls._shared[key] = cls(preload)
            atexit.register(cls._shared[key].stop)
        warm = cls._shared[key]
        if warm.failure:  # one failed start per grading run: the next students go cold at once
            raise RuntimeError(warm.failure)
        try:
            warm.start()
        except (OSError, RuntimeError) as problem:
            warm.failure = str(problem)
            raise
        return warm

    def __init__(self, preload: list[str]) -> None:
        self.preload = list(preload)
        self.folder = Path(tempfile.mkdtemp(prefix="ptlabs-warm-"))
        self.socket = self.folder / "server"
        self.process: subprocess.Popen[str] | None = None
        self.failure = ""  # why the server could not start, once it failed

    def start(self) -> None:
        """Start the server and wait until it has imported the preloaded modules."""
        if self.process is not None and self.process.poll() is None:
            return
        env = {**os.environ, "MPLCONFIGDIR": str(self.folder / "matplotlib"), "PYTHONNOUSERSITE": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ptlabs.autograde.warm", str(self.socket), *self.preload],
            stdin=subprocess.PIPE,  # the server exits when this pipe closes: it never outlives the grader
            stdout=subprocess.PIPE,
            cwd=self.folder,
            env=env,
            text=True,
        )
        assert self.process.stdout is not None
        answered, _, _ = select.select([self.process.stdout], [], [], STARTUP_TIMEOUT_S)
        ready = self.process.stdout.readline().strip() if answered else f"no answer in {STARTUP_TIMEOUT_S} s"
        if ready != "ready":
            self.process.kill()
            raise RuntimeError(f"the warm kernel server did not start: {ready or 'no answer'}")

    def kernel_command(self, kernel_args: list[str]) -> list[str]:
        """The command jupyter_client runs instead of ``python -m ipykernel_launcher ARGS``."""
        return [sys.executable, "-s", str(LAUNCHER), str(self.socket), *kernel_args]

    def reap(self) -> int:
        """Kill every process the last kernel left behind; return how many there were (the kernel excluded)."""
        if self.process is None or self.process.poll() is not None:
            return 0
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(STARTUP_TIMEOUT_S)  # a hung server fails the student, not the class
            connection.connect(str(self.socket))
            connection.sendall(json.dumps({"op": "reap"}).encode() + b"\n")
            return int(connection.makefile("r").readline() or 0)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class WarmKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager, launching ipykernel through a warm server when it has one."""

    warm: WarmKernels | None = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        command = super().format_kernel_cmd(extra_arguments)
        if self.warm is not None and command[1:3] == ["-m", "ipykernel_launcher"]:
            return self.warm.kernel_command(command[3:])
        return command  # another kind of kernel: started the usual way


# ------------------------------------------------------------------------------------------- server


def _read_request(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One newline-ended JSON request and the file descriptors sent with it (5 s at most)."""
    connection.settimeout(5)
    message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    while not message.endswith(b"\n"):
        chunk = connection.recv(1 << 16)
        if not chunk or len(message) > 1 << 22:
            raise ValueError("incomplete request")
        message += chunk
    connection.settimeout(None)
    request = json.loads(message)
    if not isinstance(request, dict) or request.get("op") not in ("kernel", "reap"):
        raise ValueError("unknown request")
    return request, list(fds)


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        children = set().union(*(_children_of(parent) for parent in frontier)) - found
        found |= children
        frontier = children
    return found


class _Server:
    """The warm server's state: its listening socket and, per running kernel, its launcher's connection."""

    def __init__(self, path: str) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(16)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, "listener")
        self.selector.register(sys.stdin, selectors.EVENT_READ, "grader")
        self.kernels: dict[int, socket.socket] = {}  # kernel pid -> its launcher's connection
        self.launched: set[int] = set()  # every kernel pid so far: not counted as left behind

    def run(self) -> None:
        while True:
            for key, _ in self.selector.select(timeout=0.05):
                if key.data == "grader":
                    if not sys.stdin.readline():  # the grader is gone
                        self.reap()
                        return
                elif key.data == "listener":
                    self.accept()
                else:  # a launcher's connection closed: its kernel must go
                    self.drop(key.data, kill=True)
            self.collect()

    def accept(self) -> None:
        connection, _ = self.listener.accept()
        try:
            request, fds = _read_request(connection)
        except (OSError, ValueError) as problem:  # a stalled or malformed client must not stop the server
            print(f"ptlabs warm server: request refused: {problem}", file=sys.stderr, flush=True)
            connection.close()
            return
        if request.get("op") == "reap":
            connection.sendall(f"{self.reap()}\n".encode())
            connection.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.become_kernel(request, fds)
        for fd in fds:
            os.close(fd)
        self.kernels[pid] = connection
        self.launched.add(pid)
        connection.sendall(f"{pid}\n".encode())
        self.selector.register(connection, selectors.EVENT_READ, pid)

    def become_kernel(self, request: dict[str, Any], fds: list[int]) -> None:
        """In the forked child: drop the server's state, take the launcher's place, run ipykernel."""
        try:
            self.selector.close()
            self.listener.close()
            for connection in self.kernels.values():
                connection.close()
            os.setsid()
            _die_with_parent()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            sys.path[0] = request["cwd"]  # as `python -m ipykernel_launcher` started there would have it
            random.seed()
            from ipykernel import kernelapp

            kernelapp.launch_new_instance(argv=request["argv"])
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        except BaseException:  # noqa: BLE001  (a kernel that failed to start must not return into the server loop)
            import traceback

            traceback.print_exc()
            code = 1
        os._exit(code)

    def drop(self, pid: int, *, kill: bool) -> None:
        connection = self.kernels.pop(pid, None)
        if connection is None:
            return
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.selector.unregister(connection)
        connection.close()

    def collect(self) -> None:
        """Wait for ended children; tell a kernel's launcher its exit status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.kernels.get(pid)
            if connection is not None:
                try:
                    connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                except OSError:
                    pass
                self.drop(pid, kill=False)

    def reap(self) -> int:
        """Kill every descendant (kernels and what they started); return how many were not kernels."""
        killed = kill_until_gone(lambda: _descendants(os.getpid()), self.collect)
        return len(killed - self.launched)


def _die_with_parent() -> None:
    """Ask Linux to kill this kernel if the server dies first (prctl PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def serve(path: str, preload: list[str]) -> None:
    """Import ``preload``, then serve kernel and reap requests on the Unix socket ``path``."""
    become_subreaper()
    for name in preload:
        importlib.import_module(name)
    server = _Server(path)
    print("ready", flush=True)
    server.run()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
