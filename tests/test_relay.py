"""The relay between a grading kernel and its grader (ptgrader.relay): it forwards a kernel's messages both
ways, refuses one of too many frames, and dies at its own memory limit instead of growing the grader.

Round 28's harm: raw ZMTP frames written by a kernel onto its end of a connection, 2 bytes each, which
libzmq holds in the reader at about 64 bytes a frame before any frame can be read. The grader reached
1.5 GB; now the relay is the reader.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from ptgrader.kernel_client import MAX_FRAMES, RECONNECT_AFTER_MS, ByteBudget, SentTooMuch
from ptgrader.kernels import MAX_MESSAGE_BYTES, UNREAD_MESSAGES
from ptgrader.relay import Relay

#: An empty ZMTP frame with MORE set: what a kernel can write, 2 bytes at a time, onto its connection.
EMPTY_FRAME = b"\x01\x00"


@contextlib.contextmanager
def relayed(folder: Path, memory_bytes: int = 256 << 20,
            kernel_pid: int | None = None) -> Iterator[tuple[dict[str, zmq.Socket], Relay]]:
    """A "kernel" (a ROUTER and a PUB; its process this one, or ``kernel_pid``), a relay to it, and a "grader"
    (a DEALER and a SUB) on the relay's end."""
    context = zmq.Context()
    kernel = {"shell": context.socket(zmq.ROUTER), "iopub": context.socket(zmq.PUB), "control": context.socket(zmq.ROUTER)}
    for name, sock in kernel.items():
        sock.bind(f"ipc://{folder}/kernel-{name}")
    relay = Relay.start(
        [("request", f"{folder}/kernel-shell", f"{folder}/relay-shell"),
         ("publish", f"{folder}/kernel-iopub", f"{folder}/relay-iopub"),
         ("command", f"{folder}/kernel-control", f"{folder}/relay-control")],
        kernel_pid=kernel_pid or os.getpid(), max_frames=MAX_FRAMES, max_message_bytes=MAX_MESSAGE_BYTES,
        reconnect_ms=RECONNECT_AFTER_MS, memory_bytes=memory_bytes,
    )
    grader = {"shell": context.socket(zmq.DEALER), "iopub": context.socket(zmq.SUB), "control": context.socket(zmq.DEALER)}
    grader["iopub"].setsockopt(zmq.SUBSCRIBE, b"")
    for name, sock in grader.items():
        sock.setsockopt(zmq.RCVHWM, UNREAD_MESSAGES)  # as the grader's client holds them
        sock.connect(f"ipc://{folder}/relay-{name}")
    sockets = {**{f"kernel_{n}": s for n, s in kernel.items()}, **{f"grader_{n}": s for n, s in grader.items()}}
    try:
        yield sockets, relay
    finally:
        relay.stop()
        for sock in sockets.values():
            sock.close(linger=0)
        context.term()


def _published(sockets: dict[str, zmq.Socket], frames: list[bytes]) -> list[bytes] | None:
    """Publish ``frames`` until the grader's subscription has come through the relay; what the grader got."""
    for _ in range(50):
        sockets["kernel_iopub"].send_multipart(frames)
        if sockets["grader_iopub"].poll(100):
            return sockets["grader_iopub"].recv_multipart()
    return None


def _dead_within(relay: Relay, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while not relay.failure() and time.monotonic() < deadline:
        time.sleep(0.05)
    return relay.failure()


def test_requests_replies_and_outputs_pass_both_ways(tmp_path) -> None:
    with relayed(tmp_path) as (sockets, relay):
        sockets["grader_shell"].send_multipart([b"<IDS|MSG>", b"request"])
        assert sockets["kernel_shell"].poll(5_000), "the request did not reach the kernel"
        identity, *request = sockets["kernel_shell"].recv_multipart()
        assert request == [b"<IDS|MSG>", b"request"]
        sockets["kernel_shell"].send_multipart([identity, b"<IDS|MSG>", b"reply"])
        assert sockets["grader_shell"].poll(5_000), "the reply did not reach the grader"
        assert sockets["grader_shell"].recv_multipart() == [b"<IDS|MSG>", b"reply"]
        widest = [b"frame"] * MAX_FRAMES  # a message of MAX_FRAMES frames is a message
        assert _published(sockets, widest) == widest
        assert relay.failure() == ""


def test_the_kernels_messages_on_the_control_channel_never_reach_the_grader(tmp_path) -> None:
    """Round 30: the grader never reads its control socket, and a kernel's messages there (16 MiB frames written
    raw onto the connection) waited in it, unread and uncounted: 3.5 GB for 200 of them, full marks, a clean
    report. The relay takes the grader's requests down that route and carries nothing up."""
    with relayed(tmp_path) as (sockets, relay):
        sockets["grader_control"].send_multipart([b"<IDS|MSG>", b"shutdown_request"])
        assert sockets["kernel_control"].poll(5_000), "the request did not reach the kernel"
        identity, *request = sockets["kernel_control"].recv_multipart()
        assert request == [b"<IDS|MSG>", b"shutdown_request"]
        sockets["kernel_control"].setsockopt(zmq.SNDTIMEO, 2_000)
        sent = 0
        with contextlib.suppress(zmq.Again):  # the relay reads none of them: the kernel's queue fills
            for _ in range(200):
                sockets["kernel_control"].send_multipart([identity, b"<IDS|MSG>", b"x" * (1 << 20)])
                sent += 1
        assert sent > 0 and not sockets["grader_control"].poll(1_000), "a kernel's message came up the control route"
        assert relay.failure() == ""
        assert _published(sockets, [b"still relaying"]) == [b"still relaying"]


def test_a_grader_that_reads_slowly_loses_nothing_and_the_relay_waits(tmp_path) -> None:
    """Round 30's own bug: an XPUB socket says it has room when it has none, and refused the relay's send; the
    relay must wait (the kernel's messages then wait in the kernel), not stop."""
    with relayed(tmp_path) as (sockets, relay):
        assert _published(sockets, [b"first"]) == [b"first"]
        for number in range(40):
            sockets["kernel_iopub"].send_multipart([b"%d" % number, b"x" * 1_000_000])
        time.sleep(1.0)  # the grader reads nothing meanwhile: its queue and the relay's fill
        assert relay.failure() == ""
        got = []
        while sockets["grader_iopub"].poll(2_000):
            got.append(int(sockets["grader_iopub"].recv_multipart()[0]))
        assert got == list(range(40)) and relay.failure() == ""


def test_a_message_of_too_many_frames_stops_the_relay_and_says_why(tmp_path) -> None:
    with relayed(tmp_path) as (sockets, relay):
        assert _published(sockets, [b"first"]) == [b"first"]
        sockets["kernel_iopub"].send_multipart([b""] * (MAX_FRAMES + 1))
        assert _dead_within(relay, 10) == f"the kernel sent a message of more than {MAX_FRAMES} frames"
        assert not sockets["grader_iopub"].poll(200), "part of the refused message reached the grader"


def _connections_to(pid: int) -> list[int]:
    """This process's Unix socket descriptors whose peer is process ``pid`` (libzmq's, taken from under it)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            probe = socket.socket(fileno=os.dup(int(name)))
            try:
                peer = struct.unpack("3i", probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
            finally:
                probe.close()
            if peer == pid:
                found.append(int(name))
    return found


def test_raw_frames_written_by_a_kernel_end_the_relay_not_the_grader(tmp_path) -> None:
    """8 MB of raw frames (4 million; about 256 MiB in libzmq) against a relay limited to 64 MiB: the relay dies
    at its limit and says why, and nothing of it reaches the grader."""
    with relayed(tmp_path, memory_bytes=64 << 20) as (sockets, relay):
        assert _published(sockets, [b"first"]) == [b"first"]
        (connection,) = [fd for fd in _connections_to(relay.process.pid) if _is_publisher_side(fd, tmp_path)]
        _write_raw(connection, EMPTY_FRAME * 4_000_000)
        why = _dead_within(relay, 30)
        assert not sockets["grader_iopub"].poll(200), "part of the frames reached the grader"
    assert why == "the kernel sent messages that took more than 64 MiB to hold (its relay ran out of memory)"


def test_messages_past_the_relays_memory_stop_it_with_the_reason_not_a_silent_wait(tmp_path) -> None:
    """Round 40: frames under every limit of their shape (7 of 31 MiB) that did not fit in the relay's memory made
    libzmq drop the connection; the relay then waited for nothing and the grader for a silent kernel, 60 s."""
    with relayed(tmp_path, memory_bytes=64 << 20) as (sockets, relay):
        assert _published(sockets, [b"first"]) == [b"first"]
        sockets["kernel_iopub"].setsockopt(zmq.SNDTIMEO, 5_000)
        with contextlib.suppress(zmq.Again):
            for _ in range(8):
                sockets["kernel_iopub"].send_multipart([b"x" * (16 << 20)] * 7)
        why = _dead_within(relay, 30)
    assert why == ("the relay's connection to the running kernel dropped (messages over the relay's 64 MiB,"
                   " or a socket the kernel closed)"), why


def test_a_kernel_that_ends_is_no_failure_of_its_relay(tmp_path) -> None:
    """A kernel that ends drops its connections too: the grader tells that by the kernel, not by the relay."""
    process = subprocess.Popen(["sleep", "60"])
    with relayed(tmp_path, kernel_pid=process.pid) as (sockets, relay):
        assert _published(sockets, [b"first"]) == [b"first"]
        process.kill()
        process.wait()
        for name in ("shell", "iopub", "control"):
            sockets[f"kernel_{name}"].close(linger=0)
        time.sleep(1.0)
        assert relay.failure() == "" and relay.process.poll() is None


@pytest.mark.parametrize("target", ["/etc/hostname", "/no/such/path"])
def test_a_dropped_connection_of_a_running_kernel_stops_the_relay_whatever_its_socket_file_became(
        tmp_path, target: str) -> None:
    """Round 41: the relay asked the kernel's socket file whether the kernel had ended, through the kernel's root:
    a link the kernel put there was followed on the grader's machine, an oracle on which paths exist (and a way to
    keep the relay waiting). It asks the kernel's process now, and reads no path of the kernel's."""
    with relayed(tmp_path) as (sockets, relay):
        assert _published(sockets, [b"first"]) == [b"first"]
        (tmp_path / "kernel-iopub").unlink()
        (tmp_path / "kernel-iopub").symlink_to(target)
        sockets["kernel_iopub"].close(linger=0)
        why = _dead_within(relay, 10)
    assert why.startswith("the relay's connection to the running kernel dropped"), why


def _write_raw(fd: int, data: bytes, seconds: float = 30.0) -> None:
    """Write ``data`` on libzmq's non-blocking descriptor ``fd`` until written, or the peer is gone (libzmq
    then closes ``fd``)."""
    view, written, deadline = memoryview(data), 0, time.monotonic() + seconds
    with contextlib.suppress(OSError):
        while written < len(view) and time.monotonic() < deadline:
            if select.select([], [fd], [], 1.0)[1]:
                with contextlib.suppress(BlockingIOError):
                    written += os.write(fd, view[written:written + (1 << 20)])


def _is_publisher_side(fd: int, folder: Path) -> bool:
    """Whether descriptor ``fd`` is the accepted end of the kernel's PUB socket (not of its ROUTER)."""
    probe = socket.socket(fileno=os.dup(fd))
    try:
        return probe.getsockname() == f"{folder}/kernel-iopub"
    finally:
        probe.close()


def test_a_gone_relay_stops_the_kernel_and_is_the_reason() -> None:
    stopped: list[bool] = []
    budget = ByteBudget(stop=lambda: stopped.append(True), route=lambda: "the relay ran out")
    with pytest.raises(SentTooMuch, match="the relay ran out"):
        budget.check_route()
    assert budget.failure == "the relay ran out" and stopped == [True]
    ByteBudget(route=lambda: "").check_route()  # a relay that runs: nothing happens
