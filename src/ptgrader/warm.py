"""Warm grading kernels: a server that imported torch once forks every student's jailed kernel.

Why: each submission is graded in a fresh kernel, and a fresh kernel spends most of its CPU
importing torch (2 s on a laptop core, three times that with ``torch._dynamo`` and ONNX's
exporter) before the first cell runs. Here one server process per grading run imports the heavy
modules once (never ``ptchecks``, whose tamper record must be taken in the kernel itself)
and, for each kernel, forks a keeper that jails a child exactly as ``jail.py`` jails a cold kernel
(:func:`ptgrader.jail.run_jailed`: its own namespaces, uid and rlimits) and runs ipykernel there.
Memory is copied on write: what one kernel does never reaches the server or the next kernel, and
the jailed kernel cannot see the server at all (another PID, mount and network namespace, another
uid). For the same reason the server starts with the kernel's environment
(:func:`ptgrader.jail.kernel_env`), never the grader's: a forked kernel holds a copy of the server's
memory, the server's first environment included (``/proc/self/environ``, the stack), and no
``os.environ.clear()`` in the kernel erases that copy.

The pieces:

- :class:`WarmKernels` (in the grader's process) starts the server and says how to launch a
  kernel through it (:meth:`WarmKernels.kernel_command`);
- ``warm_launcher.py`` is the process jupyter_client starts and manages as "the kernel": it hands
  its request to the server and stands in for the keeper (signals, exit status);
- :func:`serve` is the server. It reads each request within a deadline (a stalled client costs
  nothing), never lets a failed send stop it, kills a kernel whose launcher went away, and when
  the grader goes (its pipe closes) kills every kernel and removes the grader's temporary folder.

Only the grader can reach the server: its socket is in the grader's own folder (mode 0700).
Linux only (fork, file descriptors over Unix sockets); elsewhere kernels start cold.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
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
import time
import traceback
from pathlib import Path
from typing import Any, ClassVar

from . import jail, once_per_server

LAUNCHER = Path(__file__).with_name("warm_launcher.py")
#: How long the server may take to import the preloaded modules (seconds; torch takes a few).
STARTUP_TIMEOUT_S = 180
#: A request must arrive whole within this time, or the server drops it.
REQUEST_DEADLINE_S = 5.0
MAX_REQUEST_BYTES = 1 << 22
_PR_SET_PDEATHSIG = 1


def supported() -> bool:
    """Where warm kernels work: fork, Unix sockets passing file descriptors, and /proc."""
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds") and Path("/proc/self/task").is_dir()


class WarmKernels:
    """The grader's handle on one warm server (started on first use, stopped with the grader)."""

    #: One server per grading process and preload list: nbgrader makes a new preprocessor per notebook.
    _shared: ClassVar[dict[tuple[str, ...], WarmKernels]] = {}

    @classmethod
    def shared(cls, preload: list[str], folder: Path) -> WarmKernels:
        """The running server for ``preload`` (started, or started again if it died), stopped at exit."""
        key = tuple(preload)
        if key not in cls._shared:
            cls._shared[key] = cls(preload, folder)
            atexit.register(cls._shared[key].stop)
        warm = cls._shared[key]
        if warm.failure:  # a server that could not start once will not start: the next students go cold at once
            raise RuntimeError(warm.failure)
        try:
            warm.start()
        except (OSError, RuntimeError) as problem:
            warm.failure = str(problem)
            raise
        return warm

    def __init__(self, preload: list[str], folder: Path) -> None:
        self.preload = list(preload)
        self.folder = folder / f"warm-{os.urandom(4).hex()}"
        self.folder.mkdir(mode=0o700)
        self.socket = self.folder / "server"
        self.process: subprocess.Popen[str] | None = None
        self.failure = ""  # why the server could not start, once it failed
        self.grader_folder = folder

    def start(self) -> None:
        """Start the server (again, if it died) and wait until it has imported the preloaded modules.

        Its environment is the kernel's, with its own folder as HOME (matplotlib's font cache is built
        there): none of the grader's variables is in the memory its kernels are forked from.
        """
        if self.process is not None and self.process.poll() is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ptgrader.warm"],
            stdin=subprocess.PIPE,  # the server exits when this pipe closes: it never outlives the grader
            stdout=subprocess.PIPE,
            cwd=self.folder,
            env=jail.kernel_env(dict(os.environ), home=str(self.folder)),  # never the grader's: kernels fork from it
            text=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        # On its first line, not on its command line: a kernel forked from it keeps that in /proc/self/cmdline.
        where = {"socket": str(self.socket), "grader_folder": str(self.grader_folder), "preload": self.preload}
        self.process.stdin.write(json.dumps(where) + "\n")
        self.process.stdin.flush()
        answered, _, _ = select.select([self.process.stdout], [], [], STARTUP_TIMEOUT_S)
        ready = self.process.stdout.readline().strip() if answered else f"no answer in {STARTUP_TIMEOUT_S} s"
        if ready != "ready":
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"the warm kernel server did not start: {ready or 'no answer'}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """End a server that failed a start (stalled, or broken): the next student's kernel starts a fresh one."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def kernel_command(self, spec_path: str, kernel_args: list[str]) -> list[str]:
        """The command jupyter_client runs instead of ``python -m ipykernel_launcher ARGS``."""
        return [sys.executable, "-I", "-S", str(LAUNCHER), str(self.socket), spec_path, *kernel_args]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            with contextlib.suppress(OSError):
                self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


# ------------------------------------------------------------------------------------------- server


def _read_request(connection: socket.socket, deadline_s: float = REQUEST_DEADLINE_S) -> tuple[dict[str, Any], list[int]]:
    """One newline-ended JSON request and the file descriptors sent with it, whole within ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    fds: list[int] = []
    message = b""
    try:
        while not message.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no whole request within {deadline_s} s")
            connection.settimeout(left)
            chunk, received, _, _ = socket.recv_fds(connection, 1 << 16, 3)
            fds += received
            if not chunk or len(message) + len(chunk) > MAX_REQUEST_BYTES:
                raise ValueError("incomplete or oversized request")
            message += chunk
        request = json.loads(message)
        if not isinstance(request, dict) or request.get("op") != "kernel" or len(fds) != 3:
            raise ValueError("unknown request")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    connection.settimeout(None)
    return request, fds


def _send(connection: socket.socket, line: str) -> bool:
    """Send one line; False (never an exception) when the other side is gone or stalls."""
    try:
        connection.settimeout(REQUEST_DEADLINE_S)
        connection.sendall(line.encode() + b"\n")
        return True
    except OSError:
        return False


class _Server:
    """The warm server's state: its listening socket and, per running keeper, its launcher's connection."""

    def __init__(self, path: str, grader_folder: str) -> None:
        self.grader_folder = grader_folder
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        os.chmod(path, 0o600)
        self.listener.listen(16)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, "listener")
        self.selector.register(sys.stdin, selectors.EVENT_READ, "grader")
        self.keepers: dict[int, socket.socket] = {}  # keeper pid -> its launcher's connection

    def run(self) -> None:
        while True:
            for key, _ in self.selector.select(timeout=0.05):
                try:
                    if key.data == "grader":
                        if not sys.stdin.readline():  # the grader is gone
                            self.shutdown()
                            return
                    elif key.data == "listener":
                        self.accept()
                    else:  # a launcher's connection closed: its kernel must go
                        self.drop(key.data, kill=True)
                except Exception:  # noqa: BLE001  (one bad request must not stop the server)
                    print(f"ptgrader warm server: {traceback.format_exc()}", file=sys.stderr, flush=True)
            self.collect()

    def accept(self) -> None:
        connection, _ = self.listener.accept()
        try:
            request, fds = _read_request(connection)
        except (OSError, ValueError) as problem:  # a stalled or malformed client must not stop the server
            print(f"ptgrader warm server: request refused: {problem}", file=sys.stderr, flush=True)
            connection.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()  # what the server made since the last fork: the kernel's collections never walk it
        pid = os.fork()
        if pid == 0:
            self.become_keeper(request, fds)
        for fd in fds:
            os.close(fd)
        self.keepers[pid] = connection
        self.selector.register(connection, selectors.EVENT_READ, pid)
        if not _send(connection, str(pid)):
            self.drop(pid, kill=True)

    def become_keeper(self, request: dict[str, Any], fds: list[int]) -> None:
        """In the forked child: drop the server's state, take the launcher's streams, jail ipykernel."""
        code = 1
        gc.enable()  # the kernel collects its own garbage; the server's objects are frozen (see serve)
        try:
            self.selector.close()
            self.listener.close()
            for connection in self.keepers.values():
                connection.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _die_with_parent()
            with open(request["spec"], encoding="utf-8") as file:
                spec = jail.JailSpec.from_json(file.read())
            code = jail.run_jailed(spec, lambda: _ipykernel(request["argv"]))
        except BaseException:  # noqa: BLE001  (reported; the exit status says it failed)
            with contextlib.suppress(OSError):  # the launcher's stderr may be closed or read-only
                traceback.print_exc()
        finally:
            os._exit(code)  # a keeper never returns into the server's loop, whatever failed

    def drop(self, pid: int, *, kill: bool) -> None:
        connection = self.keepers.pop(pid, None)
        if connection is None:
            return
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # our own unreaped child: the pid cannot have been reused
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(connection)
        connection.close()

    def collect(self) -> None:
        """Wait for ended keepers; tell each one's launcher its exit status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.keepers.get(pid)
            if connection is not None:
                _send(connection, str(os.waitstatus_to_exitcode(status)))
                self.drop(pid, kill=False)

    def shutdown(self) -> None:
        """The grader is gone: kill every keeper (their kernels die with them), remove the grader's folder."""
        for pid in list(self.keepers):
            self.drop(pid, kill=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    time.sleep(0.02)
            except ChildProcessError:
                break
        shutil.rmtree(self.grader_folder, ignore_errors=True)


def _ipykernel(argv: list[str]) -> None:
    """In the jailed kernel (a fork of the server): become ``python -P -m ipykernel_launcher ARGV`` started in WORK.

    The server runs with the kernel's environment, so, as in a cold kernel, no bytecode is written
    (PYTHONDONTWRITEBYTECODE) and the working folder is not on the import path: PYTHONSAFEPATH kept
    the server's own folder off it, and ARGV tells IPython not to add the working folder.
    """
    tempfile.tempdir = None
    random.seed()
    from ipykernel import kernelapp

    try:  # its parent is outside its PID namespace (as JPY_PARENT_PID=1 says to a cold kernel): no poller, no banner
        kernelapp.launch_new_instance(argv=[*argv, "--IPKernelApp.parent_handle=1"])
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    os._exit(code)


def _die_with_parent() -> None:
    """Ask Linux to kill this keeper if the server dies first (prctl PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:
        os._exit(1)


def _preload(name: str) -> None:
    """Import a module for every kernel; one that is not installed is skipped (torch never is)."""
    try:
        importlib.import_module(name)
    except ImportError as problem:
        if name.split(".")[0] == "torch":
            raise
        print(f"ptgrader warm server: not preloaded: {name} ({problem})", file=sys.stderr, flush=True)


def serve(path: str, grader_folder: str, preload: list[str]) -> None:
    """Import ``preload``, then serve kernel requests on the Unix socket ``path``.

    The collector stays off in the server and its objects are frozen before each fork (``gc.freeze``,
    the recipe of Python's ``gc`` documentation for fork without exec). Why: torch and the preloaded
    modules leave about 480,000 objects, and a full collection in a forked kernel walked every one of
    them (0.3 s of CPU each time, and a copy of every page it touched); frozen, they are out of the
    kernel's collections, which see only what the kernel made. Off while importing, too: the imports
    take a third less CPU without the collections they would trigger.
    """
    gc.disable()
    for name in preload:
        _preload(name)
    once_per_server.apply()  # torch's and onnxscript's work no result depends on, done once here
    gc.freeze()
    server = _Server(path, grader_folder)
    print("ready", flush=True)
    server.run()


if __name__ == "__main__":
    settings = json.loads(sys.stdin.readline())  # WarmKernels.start writes them there
    serve(settings["socket"], settings["grader_folder"], settings["preload"])
