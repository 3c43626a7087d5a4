"""The relay between a grading kernel and its grader: a process of its own, under a memory limit, that
forwards only messages of at most :data:`~ptgrader.kernel_client.MAX_FRAMES` frames.

Why a process: libzmq holds every frame of a multipart message before its reader can read the first
one, at about 64 bytes of the reader's memory for each frame, whatever the frame's size. A kernel that
writes raw ZMTP frames onto its end of a connection (2 bytes each) so grows its reader by 32 bytes for
each byte it writes: round 28 took a grader to 1.5 GB and 46 s of CPU that way, before the grader could
read a frame and see the message was no message. No socket option of libzmq bounds the frames of a
message. So the kernel's reader is this relay, not the grader: past its own limit (an rlimit on its
data, set before it reads anything) libzmq cannot allocate and the relay dies, or libzmq drops the
connection and the relay stops (:meth:`Route.lost`), which the grader sees at once (:meth:`Relay.failure`)
and stops the kernel for. The grader's sockets reach only the relay, whose messages are well formed and of
at most ``max_frames`` frames.

This file runs as a script (``python -I relay.py SPEC``), so it imports nothing from ptgrader: the
grader's import path is not the relay's.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import zmq

#: The relay's data (heap and private writable mappings): enough for a handful of the largest messages the
#: grader takes (32 MiB), and past it the relay dies instead of the grader growing.
MEMORY_BYTES = 384 << 20
#: The relay's CPU time, in seconds: forwarding the most a kernel may send costs well under a second.
CPU_SECONDS = 60
#: How the relay exits after a message it refuses or a connection the kernel's messages broke (it prints why on its
#: standard output first), and when Python cannot allocate (libzmq's failed allocation aborts it: SIGABRT).
REFUSED, OUT_OF_MEMORY = 3, 4
#: How often a message the grader has no room for yet is offered again, in ms: an XPUB socket never says when
#: it has room (its POLLOUT is always set), it only refuses a message while its queue is full.
RETRY_MS = 10
#: How long the relay may take to bind its sockets, in seconds.
START_TIMEOUT_S = 30.0
#: How long an ending kernel may take to exit after its connections drop (it closes its sockets first), in s.
ENDING_S = 0.5
#: Messages a socket of the relay holds unread, or unsent, before it stops reading from the other side.
QUEUED_MESSAGES = 4
_PR_SET_PDEATHSIG = 1


@dataclass
class Route:
    """One of the kernel's sockets and the socket the relay offers the grader in its place.

    A ``request`` route (shell) carries the grader's requests down and the kernel's replies up, DEALER to
    DEALER; a ``command`` route (control) carries the grader's requests down and nothing up: the grader never
    reads a reply there (round 30: a kernel's messages on it waited, unread and uncounted, in the grader, up to
    zmq's 1000 of them); a ``publish`` route (IOPub) carries the kernel's outputs up, SUB to XPUB, once the
    grader has subscribed (an XPUB drops what no one has subscribed to).
    """

    kind: str  # "request", "command" or "publish"
    inner: zmq.Socket  # connected to the kernel's socket
    outer: zmq.Socket  # bound where the grader connects
    dropped: zmq.Socket  # tells when ``inner``'s connection to the kernel drops
    upward: bool = False  # whether the kernel's messages are read and forwarded now
    pending: list[zmq.Frame] | None = None  # a message of the kernel's the grader had no room for yet

    @classmethod
    def open(cls, context: zmq.Context, kind: str, kernel_path: str, grader_path: str) -> Route:
        if kind in ("request", "command"):
            inner, outer = context.socket(zmq.DEALER), context.socket(zmq.DEALER)
        else:
            inner, outer = context.socket(zmq.SUB), context.socket(zmq.XPUB)
            inner.setsockopt(zmq.SUBSCRIBE, b"")
            outer.setsockopt(zmq.XPUB_NODROP, 1)  # no room: the relay waits (and so the kernel), nothing is lost
        for sock in (inner, outer):
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RCVHWM, QUEUED_MESSAGES)
            sock.setsockopt(zmq.SNDHWM, QUEUED_MESSAGES)
        outer.bind(f"ipc://{grader_path}")
        dropped = inner.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        inner.connect(f"ipc://{kernel_path}")
        return cls(kind, inner, outer, dropped, upward=kind == "request")

    def lost(self, kernel: int | None) -> str:
        """Why the connection to a running kernel dropped, or "" (after a monitor event of ``dropped``).

        Round 40: a message of 7 frames of 31 MiB each, under every limit of its shape, did not fit in the
        relay's memory; libzmq dropped the connection instead of aborting, the relay waited for nothing, and
        the grader saw a silent kernel until the cell's time ran out. A kernel that has ended drops its
        connections too: that one is the kernel's death, which the grader tells by itself. Whether it ended
        is asked of its process (``kernel``, a pidfd: readable once the process has exited), never of its
        socket's file: a path under the kernel's root can be a link the kernel made, and the relay would
        follow it on the grader's machine (round 41: an oracle on which of its paths exist)."""
        self.dropped.recv_multipart()  # the event, read off (zmq.utils.monitor would import asyncio: 26 ms a relay)
        if kernel is None or select.select([kernel], [], [], ENDING_S)[0]:
            return ""
        memory = resource.getrlimit(resource.RLIMIT_DATA)[0] >> 20  # the limit serve() set, MEMORY_BYTES or a test's
        return (f"the relay's connection to the running kernel dropped (messages over the relay's {memory} MiB,"
                " or a socket the kernel closed)")

    def flush(self) -> bool:
        """Hand the pending message to the grader's socket if it has room; True once nothing is pending."""
        if self.pending is not None:
            try:
                self.outer.send_multipart(self.pending, copy=False, flags=zmq.NOBLOCK)
            except zmq.Again:
                return False
            self.pending = None
        return True

    def up(self, max_frames: int) -> str:
        """Take one message from the kernel, to be forwarded; "" or, for one of more than ``max_frames`` frames,
        why it is refused."""
        frames = [self.inner.recv(copy=False)]
        while self.inner.getsockopt(zmq.RCVMORE):
            if len(frames) == max_frames:
                return f"the kernel sent a message of more than {max_frames} frames"
            frames.append(self.inner.recv(copy=False))
        self.pending = frames
        return ""

    def down(self) -> None:
        """Take one message from the grader: a request for the kernel, or the grader's subscription."""
        frames = self.outer.recv_multipart(copy=False)
        if self.kind == "publish":
            self.upward = self.upward or frames[0].bytes[:1] == b"\x01"  # the grader's subscription
            return
        try:
            self.inner.send_multipart(frames, copy=False, flags=zmq.NOBLOCK)
        except zmq.Again:  # a kernel that does not read its requests does not answer them: the cell times out
            pass


def relay(routes: list[Route], max_frames: int, kernel: int | None) -> str:
    """Forward messages both ways until a kernel's message is refused, or the connection to a running kernel drops
    (:meth:`Route.lost`); return why.

    A route reads the kernel's next message only once the last one is with the grader's socket: while the
    grader reads slowly, the kernel's messages wait in the kernel, whose limits count them.
    """
    while True:
        poller, waiting = zmq.Poller(), False
        for route in routes:
            poller.register(route.outer, zmq.POLLIN)
            poller.register(route.dropped, zmq.POLLIN)
            if not route.flush():
                waiting = True
            elif route.upward:
                poller.register(route.inner, zmq.POLLIN)
        ready = dict(poller.poll(RETRY_MS if waiting else None))
        for route in routes:
            if ready.get(route.dropped, 0) & zmq.POLLIN and (lost := route.lost(kernel)):
                return lost
            if ready.get(route.outer, 0) & zmq.POLLIN:
                route.down()
            if ready.get(route.inner, 0) & zmq.POLLIN and (refused := route.up(max_frames)):
                return refused


def serve(spec: dict[str, Any]) -> None:
    """The relay's life: limit itself, open its routes, say it is ready, relay; print why it stopped, and exit."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the grader's end is the relay's
    memory = spec.get("memory_bytes", MEMORY_BYTES)
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    context = zmq.Context()
    context.setsockopt(zmq.RECONNECT_IVL, spec["reconnect_ms"])  # once only: see OnceConnectedKernelClient
    context.setsockopt(zmq.MAXMSGSIZE, spec["max_message_bytes"])
    routes = [Route.open(context, kind, inner, outer) for kind, inner, outer in spec["routes"]]
    try:
        kernel: int | None = os.pidfd_open(spec["kernel_pid"])
    except OSError:  # the kernel has ended already: the grader sees that by itself
        kernel = None
    print("ready", flush=True)
    try:
        refused = relay(routes, spec["max_frames"], kernel)
    except MemoryError:
        os._exit(OUT_OF_MEMORY)
    print(refused, flush=True)
    os._exit(REFUSED)


@dataclass
class Relay:
    """The grader's handle on a running relay (:func:`serve` in a process of its own)."""

    process: subprocess.Popen[str]
    memory_bytes: int
    _failure: str = ""

    @classmethod
    def start(cls, routes: list[tuple[str, str, str]], *, kernel_pid: int, max_frames: int, max_message_bytes: int,
              reconnect_ms: int, memory_bytes: int = MEMORY_BYTES) -> Relay:
        """A relay for ``routes`` ((kind, the kernel's socket, the grader's socket), all listening) to the kernel
        process ``kernel_pid``, once ready."""
        spec = {"routes": routes, "kernel_pid": kernel_pid, "max_frames": max_frames,
                "max_message_bytes": max_message_bytes, "reconnect_ms": reconnect_ms, "memory_bytes": memory_bytes}
        process = subprocess.Popen(  # noqa: S603  (this file, with the grader's own interpreter)
            [sys.executable, "-I", __file__, json.dumps(spec)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
        )
        started = cls(process, memory_bytes)
        ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
        if not ready or process.stdout is None or process.stdout.readline() != "ready\n":
            started.stop()
            raise RuntimeError(f"the relay to the kernel did not start within {START_TIMEOUT_S:g} s")
        return started

    def failure(self) -> str:
        """"" while the relay runs; once it has stopped, why (a refused message, its memory or CPU spent)."""
        if self._failure or self.process.poll() is None:
            return self._failure
        status = self.process.returncode
        out = self.process.stdout
        said = out.read().strip() if out is not None and not out.closed else ""
        if status == REFUSED and said:
            self._failure = said
        elif status in (-signal.SIGABRT, OUT_OF_MEMORY):  # libzmq's failed allocation, or Python's
            self._failure = (f"the kernel sent messages that took more than {self.memory_bytes >> 20} MiB to hold"
                             " (its relay ran out of memory)")
        elif status == -signal.SIGXCPU:
            self._failure = f"the kernel's messages took its relay more than {CPU_SECONDS} s of CPU"
        else:
            self._failure = f"the relay between the kernel and the grader stopped (exit status {status})"
        return self._failure

    def stop(self) -> None:
        """Kill the relay and wait for it (its sockets go with it)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]))
