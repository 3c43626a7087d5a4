"""A kernel client that looks at its sockets at least twice a second while it waits for a message.

Why: jupyter_client's asyncio channels wait for a message with one ``socket.poll(timeout)``, which
pyzmq wakes through the socket's edge-triggered file descriptor. When that wake-up is lost (libzmq
may consume a socket's read edge while it sends on the same socket), a reply that has already arrived
sits unnoticed until the wait times out, when pyzmq's last, non-blocking look finds it. In ``make
test`` a notebook cell of a few milliseconds waited out nbclient's whole 600 s timeout that way
(kernel idle, its reply unread; with ipykernel 7 and 6 alike), and a grading kernel would spend its
submission's time budget on it and be stopped, costing an honest student the parts after it. Polling
in slices turns a lost wake-up into a delay of at most :data:`POLL_SLICE_S`.

A grading kernel's client (:class:`OnceConnectedKernelClient`) also connects to each socket once only,
opens only the channels the grader reads, and charges every message's bytes to the submission.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from queue import Empty
from typing import Any, NoReturn

import zmq
from jupyter_client import session as jupyter_session
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.jsonutil import parse_date
from jupyter_client.manager import AsyncKernelManager
from traitlets import DottedObjectName, Type

#: The longest a message that has arrived can go unnoticed, in seconds.
POLL_SLICE_S = 0.5
#: When zmq may connect again after a connection to a kernel ended: 10 minutes, past any submission's time
#: (the client is closed long before). Not -1 (never), with which ending each kernel took a second longer.
RECONNECT_AFTER_MS = 600_000


class SlicedPollChannel(AsyncZMQSocketChannel):
    """A channel whose ``get_msg`` polls in slices of :data:`POLL_SLICE_S`, up to ``timeout`` in all."""

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message; raises ``queue.Empty`` when none came within ``timeout`` seconds (None: wait)."""
        assert self.socket is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = POLL_SLICE_S if left is None else min(POLL_SLICE_S, left)
            if await self.socket.poll(int(step * 1000)):
                return await self._recv()
            self._waited()
            if left is not None and left <= POLL_SLICE_S:
                raise Empty

    def _waited(self) -> None:
        """Called after each slice that brought no message."""


class RepollingKernelClient(AsyncKernelClient):
    """jupyter_client's asyncio kernel client, its message channels polled in slices."""

    shell_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]
    iopub_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]
    stdin_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]
    control_channel_class = Type(SlicedPollChannel)  # type: ignore[assignment]


class RepollingKernelManager(AsyncKernelManager):
    """jupyter_client's asyncio kernel manager, whose clients are :class:`RepollingKernelClient`."""

    client_class = DottedObjectName("ptgrader.kernel_client.RepollingKernelClient")
    client_factory = Type(RepollingKernelClient)  # AsyncKernelManager fixes its factory: set both


#: The most bytes of messages one grading kernel may send, in all: four times what the grader keeps of a
#: submission's outputs (ptgrader.channel.MAX_BYTES). A kernel printing 25 MB strings in a loop produced
#: them faster than the grader decoded them, and the messages waiting in zmq took the grader to 2.3 GB.
RECEIVED_BYTES_BUDGET = 256 << 20
#: The most frames one message may have. A Jupyter message has about seven (identities, delimiter, signature,
#: header, parent header, metadata, content), and a handful of buffers at most in a comm's.
MAX_FRAMES = 64
#: The largest header, parent header or metadata frame a message may have. A kernel's own headers are a few hundred
#: bytes. (Round 31: jupyter_client parsed every date string of four 64 MB headers into a datetime, and held the
#: grader at 3.9 GB for ten minutes; the grader now parses only each header's own date, see :func:`deserialize`.)
MAX_HEADER_BYTES = 64 << 10
#: What each frame is charged beyond its bytes: the record zmq keeps of it. Round 28: messages of millions of
#: empty frames were charged a few hundred bytes in all, and held the grader at 4.4 GB and 87 s of CPU.
FRAME_COST = 64
#: The least a message is charged, whatever its size: what it costs the grader to decode and handle (about
#: 0.2 ms of CPU), in bytes of the budget. Round 47 sent 260,000 small replies in 45 s, which cost the grader
#: 45 s of CPU; a whole lab's honest run sends fewer than 100 messages. So at most 65,536 messages.
MESSAGE_COST = 4 << 10


class SentTooMuch(RuntimeError):
    """A grading kernel sent more than :data:`RECEIVED_BYTES_BUDGET` bytes of messages, or one message of more than
    :data:`MAX_FRAMES` frames or with a header over :data:`MAX_HEADER_BYTES`, or its relay is gone: it is
    stopped."""


class ByteBudget:
    """The bytes of messages a client has received, charged before each one is decoded, and what happens once
    they are spent.

    ``stop``: called once the budget is spent, a header is too large, or the route is gone (it kills the kernel).
    Why at once: the reader that failed is nbclient's output task, which nbclient looks at again only when the
    cell's reply comes; until then nobody reads, and the kernel runs on to the end of its cell. ``failure`` says
    why, for the grading report; so for a message the grader cannot decode (:meth:`unreadable`). The few messages
    zmq holds meanwhile are bounded by the sockets' queue.
    """

    def __init__(self, limit: int = RECEIVED_BYTES_BUDGET, stop: Callable[[], None] | None = None,
                 route: Callable[[], str] | None = None) -> None:
        self.limit, self.spent, self.stop, self.route, self.failure = limit, 0, stop, route, ""

    def reason(self) -> str:
        """Why the kernel's messages stopped: the budget's failure, or why the route they came by is gone (a relay,
        :mod:`ptgrader.relay`, that refused one of them or ran out of memory holding it); "" while neither."""
        return self.failure or (self.route() if self.route is not None else "")

    def check_route(self) -> None:
        """Stop the kernel and raise SentTooMuch once the route its messages come by is gone."""
        if not self.failure and (broken := self.reason()):
            self._stop_for(broken)

    def charge(self, frames: list[bytes], *, more: bool = False) -> None:
        """Count ``frames`` (each :data:`FRAME_COST` beyond its bytes, the message at least :data:`MESSAGE_COST`);
        past the limit, or with ``more`` frames waiting past :data:`MAX_FRAMES`, record why, stop the kernel and
        raise SentTooMuch; and so for every message after that (what is left of a message cut short is no
        message)."""
        if self.failure:
            raise SentTooMuch(self.failure)
        self.spent += max(MESSAGE_COST, sum(len(frame) + FRAME_COST for frame in frames))
        if more:
            self._stop_for(f"the kernel sent a message of more than {MAX_FRAMES} frames")
        if self.spent > self.limit:
            self._stop_for(f"the kernel sent more than {self.limit >> 20} MiB of messages")

    def check_headers(self, message: list[bytes]) -> None:
        """Stop the kernel and raise SentTooMuch when a frame of ``message`` (the frames after the delimiter) that
        jupyter_client decodes as a header (the header, the parent header, the metadata) is over
        :data:`MAX_HEADER_BYTES`: checked before it is decoded."""
        if any(len(frame) > MAX_HEADER_BYTES for frame in message[1:4]):
            self._stop_for(f"the kernel sent a message whose header is over {MAX_HEADER_BYTES >> 10} KiB")

    def unreadable(self, problem: Exception) -> NoReturn:
        """Stop the kernel and raise SentTooMuch for a message the grader cannot read (no delimiter, a bad
        signature, JSON it cannot decode: round 42 sent single frames of one byte), with why in plain words: it
        ended the submission's grading in the failsafe, whose report gave Python's raw error."""
        first = (str(problem).strip().splitlines() or [""])[0][:200]
        self._stop_for(f"the kernel sent a message the grader cannot read ({type(problem).__name__}: {first})")

    def _stop_for(self, failure: str) -> NoReturn:
        self.failure = self.failure or failure
        if self.stop is not None:
            self.stop()
        raise SentTooMuch(self.failure)


def header_date(header: Any) -> Any:
    """``header`` with its own ``date`` (an ISO 8601 string) parsed into a datetime, and nothing else parsed.

    What jupyter_client's ``extract_dates`` does to every string of a header, at about 1 us of CPU a byte (a date
    parser tried on each): round 36 sent headers of date strings just under :data:`MAX_HEADER_BYTES`, and kept the
    grader decoding for 110 s, past the cell's 60 s, on 21 s of the kernel's CPU. nbclient reads only the date."""
    if isinstance(header, dict) and isinstance(header.get("date"), str):
        return {**header, "date": parse_date(header["date"])}
    return header


#: What the grader (nbclient, and ptgrader's hooks) reads of a message's content, by its type, and the types it
#: must have, as the messaging protocol states them: a message that decodes but has another shape made nbclient
#: raise (round 43: a content that is a JSON list), which ended the submission in the failsafe.
CONTENT_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "status": {"execution_state": str},
    "stream": {"name": str, "text": str},
    "display_data": {"data": dict, "metadata": dict},
    "update_display_data": {"data": dict, "metadata": dict},
    "execute_result": {"data": dict, "metadata": dict},
    "error": {"ename": str, "evalue": str, "traceback": list},
    "clear_output": {"wait": bool},
    "execute_input": {"code": str},
    "execute_reply": {"status": str},
}
#: Fields any message's content may hold, and their types when it does.
OPTIONAL_FIELDS: dict[str, type | tuple[type, ...]] = {"transient": (dict, type(None)),
                                                       "execution_count": (int, type(None))}


def misshapen(message: dict[str, Any], *, reply: bool = False) -> str:
    """Why a decoded message does not have the protocol's shape where the grader reads it, or "" when it does.

    ``reply``: a message of the shell channel, which nbclient (and nbgrader after it) takes as the reply to
    the request it names, whatever its type: it must be a reply with a status (round 45: a kernel_info_reply
    without one, sent as the cell's reply, ended the submission in the failsafe)."""
    for part in ("header", "parent_header", "metadata", "content"):
        if not isinstance(message.get(part), dict):
            return f"its {part} is not an object"
    if not (isinstance(message.get("msg_type"), str) and isinstance(message.get("msg_id"), str)):
        return "its header has no message type or id"
    content = message["content"]
    is_reply = message["msg_type"].endswith("_reply")
    if reply and not is_reply:
        return f"a {message['msg_type']} message came on the shell channel, where only replies come"
    if is_reply and not isinstance(content.get("status"), str):
        return "its reply has no status"
    fields = {**CONTENT_FIELDS.get(message["msg_type"], {}), **{k: t for k, t in OPTIONAL_FIELDS.items() if k in content}}
    wrong = [name for name, kind in fields.items() if not _of_type(content.get(name), kind)]
    if wrong:
        return f"its {message['msg_type']} content has no proper {', '.join(wrong)}"
    if type(content.get("execution_count")) is int and content["execution_count"] < 0:
        return "its execution count is below 0"  # nbclient writes it into the cell, which nbformat then refuses
    if message["msg_type"] == "stream" and content["name"] not in ("stdout", "stderr"):
        return "its stream is neither stdout nor stderr"
    if message["msg_type"] == "error" and not all(isinstance(line, str) for line in content["traceback"]):
        return "its traceback is not a list of strings"
    return ""


def _of_type(value: object, kind: type | tuple[type, ...]) -> bool:
    """isinstance, where a bool is no int (JSON's true is not a number)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return isinstance(value, kinds) and (type(value) is not bool or bool in kinds)


def deserialize(session: jupyter_session.Session, message: list[bytes]) -> dict[str, Any]:
    """``session.deserialize(message)`` (the signature checked, the frames unpacked, the protocol adapted), with
    :func:`header_date` for the headers' dates. The grader reads messages on one thread, its event loop's, so
    jupyter_client's function is swapped only for the length of this call."""
    everywhere = jupyter_session.extract_dates
    jupyter_session.extract_dates = header_date
    try:
        return session.deserialize(message)
    finally:
        jupyter_session.extract_dates = everywhere


class ChargedChannel(SlicedPollChannel):
    """A sliced-poll channel that charges each message to its client's :class:`ByteBudget` before decoding it,
    and so stops the kernel when a message is over the budget."""

    budget: ByteBudget | None = None
    replies: bool = False  # the shell channel's: only replies come there (see misshapen), each to a request

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unanswered: set[str] = set()  # the requests sent on this channel that no reply has answered yet

    def send(self, msg: dict[str, Any]) -> None:
        self.unanswered.add(msg["header"]["msg_id"])
        super().send(msg)

    async def _recv(self, **kwargs: Any) -> dict[str, Any]:
        """One message, read frame by frame: no more than :data:`MAX_FRAMES` of them become Python objects (each
        about 400 bytes and 8 us of the grader's), whatever the kernel sends."""
        assert self.socket is not None
        frames = [await self.socket.recv(**kwargs)]
        while (more := bool(self.socket.getsockopt(zmq.RCVMORE))) and len(frames) < MAX_FRAMES:
            frames.append(await self.socket.recv(**kwargs))
        if self.budget is None:
            return deserialize(self.session, self.session.feed_identities(frames)[1])
        self.budget.charge(frames, more=more)
        try:
            _, message = self.session.feed_identities(frames)
            self.budget.check_headers(message)
            decoded = deserialize(self.session, message)
            if why := misshapen(decoded, reply=self.replies) or self._answers_nothing(decoded):
                raise ValueError(why)
            return decoded
        except SentTooMuch:
            raise
        except Exception as problem:  # noqa: BLE001  (whatever fails to decode, the kernel is stopped with why)
            self.budget.unreadable(problem)

    def _answers_nothing(self, message: dict[str, Any]) -> str:
        """Why a reply on the shell channel answers no request the grader sent there and is still waiting on, or ""
        (and the request is answered). Round 47 sent 260,000 replies to nothing, each a fraction of a millisecond
        of the grader's CPU that no budget but the bytes' bounded."""
        if not self.replies:
            return ""
        asked = message["parent_header"].get("msg_id")
        if asked not in self.unanswered:
            return "a reply to no request the grader is waiting on (none it sent, or one already answered)"
        self.unanswered.discard(asked)
        return ""

    def _waited(self) -> None:
        if self.budget is not None:
            self.budget.check_route()


def wait_until_listening(paths: list[str], timeout_s: float) -> None:
    """Return once a Unix socket listens at every path; raise RuntimeError after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    waiting = list(paths)
    while waiting:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(1.0)
            probe.connect(waiting[0])
            waiting.pop(0)
            continue
        except OSError:  # not bound yet (no file), or not listening yet
            if time.monotonic() > deadline:
                raise RuntimeError(f"the kernel's socket {waiting[0]} did not open within {timeout_s:g} s") from None
            time.sleep(0.01)
        finally:
            probe.close()


def connect_once_listening(context: zmq.Context, paths: list[str], timeout_s: float) -> None:
    """Before ``context`` makes the sockets for ``paths``: wait until each listens, and put zmq's reconnection
    off past any submission's time (see :class:`OnceConnectedKernelClient`)."""
    wait_until_listening(paths, timeout_s)
    context.setsockopt(zmq.RECONNECT_IVL, RECONNECT_AFTER_MS)


class OnceConnectedKernelClient(RepollingKernelClient):
    """A client that connects to each of a jailed kernel's sockets once, when the kernel listens, and never again.

    Why: the kernel's sockets are files the kernel owns, reached through ``/proc/<kernel pid>/root``, where an
    absolute symlink resolves on the grader's side. (A jailed kernel's client connects to its relay's sockets,
    :mod:`ptgrader.relay`, which connects to the kernel's in the same way, once.) zmq connects again after a
    connection ends, and a heartbeat channel opens a new socket when the kernel stops answering: a kernel that
    closed its socket and left a symlink in its place would have the grader, as the grader, connect to whatever
    socket of the machine it names. So the client waits until every socket listens (at the start,
    before any student code has run), connects with reconnection put off past any submission's time
    (:data:`RECONNECT_AFTER_MS`), and starts no heartbeat: the kernel manager knows whether the kernel
    lives (it holds a pidfd on it). Every message it reads is charged to :data:`RECEIVED_BYTES_BUDGET`
    before it is decoded (:class:`ChargedChannel`).
    """

    shell_channel_class = Type(ChargedChannel)  # type: ignore[assignment]
    iopub_channel_class = Type(ChargedChannel)  # type: ignore[assignment]

    #: How long a kernel may take to open its sockets, in seconds.
    listen_timeout_s = 60.0
    #: What stops the kernel when its messages cannot be read further, and the bytes of messages it may send
    #: (both set by its kernel manager).
    stop_kernel: Callable[[], None] | None = None
    byte_budget: int = RECEIVED_BYTES_BUDGET
    #: Why the kernel's messages no longer come ("" while they may), set by its kernel manager.
    route_failure: Callable[[], str] | None = None

    def start_channels(self, shell: bool = True, iopub: bool = True, stdin: bool = True, hb: bool = True,
                       control: bool = True) -> None:
        """Start the shell and IOPub channels, the only ones the grader reads (see the class).

        No stdin (the kernel runs with ``allow_stdin`` off, and messages sent there would wait, unread,
        in the grader's memory), no control channel (the kernel manager has its own), no heartbeat.
        """
        ports = [port for port, wanted in ((self.shell_port, shell), (self.iopub_port, iopub)) if wanted]
        paths = [f"{self.ip}-{port}" for port in ports] if self.transport == "ipc" else []
        connect_once_listening(self.context, paths, self.listen_timeout_s)
        super().start_channels(shell, iopub, stdin=False, hb=False, control=False)
        self.received = ByteBudget(self.byte_budget, stop=self.stop_kernel, route=self.route_failure)
        for channel in (self.shell_channel, self.iopub_channel):
            channel.budget = self.received
        self.shell_channel.replies = True
