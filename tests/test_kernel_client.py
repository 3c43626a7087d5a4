"""A reply whose socket wake-up is lost is read within a poll slice, not at the end of the client's timeout.

The socket below loses its wake-up as the real one did in `make test`: a wait that starts with a message
already there returns only when its timeout ends (pyzmq's last, non-blocking look then finds it).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import time
from collections.abc import Sequence
from queue import Empty

import pytest
import zmq
import zmq.asyncio
from jupyter_client import jsonutil
from jupyter_client import session as jupyter_session
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session

from ptgrader.kernel_client import (
    POLL_SLICE_S,
    FRAME_COST,
    MESSAGE_COST,
    MAX_FRAMES,
    MAX_HEADER_BYTES,
    ByteBudget,
    ChargedChannel,
    SentTooMuch,
    OnceConnectedKernelClient,
    RepollingKernelClient,
    SlicedPollChannel,
    misshapen,
    wait_until_listening,
)
from ptgrader.kernels import MAX_MESSAGE_BYTES, UNREAD_MESSAGES, IsolatedKernelManager

pytestmark = pytest.mark.mostly_waits  # 5 s of timeouts run out: handed out early (tests/run_order.py)


class LostWakeUp(zmq.asyncio.Socket):
    """A socket that notices a waiting message only when a wait for it times out."""

    async def poll(self, timeout: int | None = None, flags: int = zmq.POLLIN) -> int:
        ready = await super().poll(0, flags)
        if ready and timeout:
            await asyncio.sleep(timeout / 1000)
            return ready
        return ready if ready or not timeout else await super().poll(timeout, flags)


async def _time_to_read(channel_class: type[AsyncZMQSocketChannel], timeout: float) -> tuple[float, str]:
    """Seconds until ``channel_class`` reads a reply sent before it waits, and the reply's type."""
    context = zmq.asyncio.Context()
    receiver = context.socket(zmq.PAIR, socket_class=LostWakeUp)
    sender = context.socket(zmq.PAIR)
    try:
        receiver.bind("inproc://reply")
        sender.connect("inproc://reply")
        session = Session()
        session.send(sender, "execute_reply", {"status": "ok"})
        await asyncio.sleep(0.05)  # arrived before the wait starts
        start = time.monotonic()
        message = await channel_class(receiver, session).get_msg(timeout=timeout)
        return time.monotonic() - start, message["msg_type"]
    finally:
        sender.close(linger=0)
        receiver.close(linger=0)
        context.term()


def test_a_reply_with_a_lost_wake_up_is_read_within_a_slice() -> None:
    seconds, kind = asyncio.run(_time_to_read(SlicedPollChannel, timeout=30))
    assert kind == "execute_reply" and seconds < POLL_SLICE_S + 0.5, f"read after {seconds:.1f} s"


def test_jupyter_clients_own_channel_waits_out_the_timeout_on_such_a_reply() -> None:
    """What the sliced channel is for: without it the same reply is read only when the wait times out."""
    seconds, kind = asyncio.run(_time_to_read(AsyncZMQSocketChannel, timeout=3))
    assert kind == "execute_reply" and seconds >= 3


def test_no_message_is_empty_after_the_timeout_and_at_once_for_zero() -> None:
    async def wait(timeout: float) -> float:
        context = zmq.asyncio.Context()
        receiver = context.socket(zmq.PAIR)
        receiver.bind("inproc://silent")
        start = time.monotonic()
        try:
            with pytest.raises(Empty):
                await SlicedPollChannel(receiver, Session()).get_msg(timeout=timeout)
            return time.monotonic() - start
        finally:
            receiver.close(linger=0)
            context.term()

    assert 1.2 <= asyncio.run(wait(1.2)) < 1.2 + POLL_SLICE_S
    assert asyncio.run(wait(0)) < 0.1


def test_the_grader_and_the_notebook_tools_use_the_sliced_channels() -> None:
    client = IsolatedKernelManager(kernel_name="python3").client()
    assert isinstance(client, RepollingKernelClient)
    for name in ("shell", "iopub", "stdin", "control"):
        assert issubclass(getattr(client, f"{name}_channel_class"), SlicedPollChannel), name


def test_a_grading_client_connects_once_and_never_to_a_socket_put_in_the_place_of_the_kernels(tmp_path) -> None:
    """A round's lead: the kernel's sockets are reached through /proc/<pid>/root, where an absolute symlink
    resolves on the grader's side; zmq connected again after a kernel closed its socket, to whatever listened
    at the path then."""
    context = zmq.Context()
    ports = {"shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}
    kernel = {}
    for name, port in ports.items():
        if name != "hb_port":  # the kernel's sockets (its heartbeat is never connected)
            kernel[name] = context.socket(zmq.ROUTER if name != "iopub_port" else zmq.PUB)
            kernel[name].bind(f"ipc://{tmp_path}/ipc-{port}")
    client = IsolatedKernelManager(kernel_name="python3").client(
        transport="ipc", ip=f"{tmp_path}/ipc", session=Session(key=b""), **ports
    )
    assert isinstance(client, OnceConnectedKernelClient)
    client.start_channels()
    try:
        # Never made (the properties would make them): a heartbeat opens a new socket when the kernel stops
        # answering, and messages sent to a channel the grader never reads would wait in its memory.
        assert client._hb_channel is client._stdin_channel is client._control_channel is None
        assert client.shell_channel.budget is client.iopub_channel.budget is client.received
        client.kernel_info()
        assert kernel["shell_port"].poll(5_000), "the first connection failed"
        kernel["shell_port"].close(linger=0)
        (tmp_path / "ipc-1").unlink(missing_ok=True)
        in_its_place = context.socket(zmq.ROUTER)
        in_its_place.bind(f"ipc://{tmp_path}/ipc-1")
        time.sleep(0.5)  # zmq's own reconnection comes after 0.1 s
        client.kernel_info()
        assert not in_its_place.poll(1_500), "the client connected again, to a socket put in the kernel's place"
    finally:
        client.stop_channels()


def test_a_kernel_that_never_listens_is_reported(tmp_path) -> None:
    with pytest.raises(RuntimeError, match="did not open within"):
        wait_until_listening([str(tmp_path / "ipc-1")], 0.2)


def test_a_kernels_messages_are_charged_before_they_are_decoded() -> None:
    budget = ByteBudget(limit=2 * MESSAGE_COST + 2 * FRAME_COST + 10)
    budget.charge([b"ok"])  # at least MESSAGE_COST (round 47: 260,000 small replies, 45 s of the grader's CPU)
    budget.charge([b"1" * MESSAGE_COST, b"678"])  # its bytes, each frame FRAME_COST more
    assert budget.spent == 2 * MESSAGE_COST + 3 + 2 * FRAME_COST
    with pytest.raises(SentTooMuch, match="more than 0 MiB"):
        budget.charge([b""])  # an empty frame costs what zmq keeps of it (round 28: millions of them held 4 GB)


async def _read_through_a_charged_channel(messages: list[list[bytes]], budget: ByteBudget, *,
                                         requests: Sequence[dict] = ()) -> list[str]:
    """What a charged channel makes of raw messages, in order: each one's type, or the exception it raised."""
    return [got["msg_type"] if isinstance(got, dict) else type(got).__name__
            for got in await _decoded_by_a_charged_channel(messages, budget, requests=requests)]


async def _decoded_by_a_charged_channel(messages: list[list[bytes]], budget: ByteBudget, *,
                                       requests: Sequence[dict] = ()) -> list[dict | Exception]:
    """What a charged channel makes of raw messages, in order: each message, or the exception it raised. With
    ``requests``, it is a shell channel (only replies come) that has sent them first."""
    context = zmq.asyncio.Context()
    receiver, sender = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
    seen = []
    try:
        receiver.bind("inproc://charged")
        sender.connect("inproc://charged")
        channel = ChargedChannel(receiver, Session(key=b"the-grader"))
        channel.budget, channel.replies = budget, bool(requests)
        for request in requests:
            channel.send(request)
        for frames in messages:
            sender.send_multipart(frames)
            try:
                seen.append(await channel.get_msg(timeout=2))
            except Exception as problem:  # noqa: BLE001  (the outcome under test)
                seen.append(problem)
    finally:
        sender.close(linger=0)
        receiver.close(linger=0)
        context.term()
    return seen


def test_a_kernel_is_stopped_at_once_when_its_messages_go_over_the_budget() -> None:
    """Over the budget, the kernel is killed at the first such message, not when its cell ends (nbclient reads
    the failed output task only at the reply). So for a message the grader cannot read (a forged signature, no
    delimiter, an integer of 6,000 digits): round 42's single frames of one byte ended the submission in the
    failsafe, reported with Python's raw error."""
    signed = Session(key=b"the-grader")

    def good() -> list[bytes]:  # a new message each time: a signature seen twice is refused (a replay)
        return signed.serialize(signed.msg("stream", {"name": "stdout", "text": "ok"}))

    def dated(count: int) -> list[bytes]:  # a header of ``count`` date strings (24 bytes each in JSON)
        header = signed.msg_header("stream") | {"dates": ["2020-01-01T00:00:00Z"] * count}
        return signed.serialize(signed.msg("stream", {"name": "stdout", "text": "ok"}, header=header))

    forged = Session(key=b"not-the-grader").serialize(signed.msg("stream", {"name": "stdout", "text": "x"}))
    long_int = good()
    long_int[5] = b'{"n": ' + b"1" * 6_000 + b"}"
    long_int[1] = signed.sign(long_int[2:6])
    unreadable = "the kernel sent a message the grader cannot read (ValueError: "

    def shaped(msg_type: str, content: object, parent: object = None) -> list[bytes]:  # round 43: signed, misshapen
        frames = signed.serialize(signed.msg(msg_type, {}))
        frames[3], frames[5] = json.dumps({} if parent is None else parent).encode(), json.dumps(content).encode()
        frames[1] = signed.sign(frames[2:6])
        return frames
    for messages, outcome, why in (
        ([good(), good()], ["stream", "stream"], ""),
        ([forged, good()], ["SentTooMuch", "SentTooMuch"], unreadable + "Invalid Signature"),
        ([[b"x"]], ["SentTooMuch"], unreadable + "b'<IDS|MSG>' is not in list)"),
        ([long_int], ["SentTooMuch"], unreadable + "Exceeds the limit (4300 digits)"),
        ([shaped("stream", ["x", "y"])], ["SentTooMuch"], unreadable + "its content is not an object)"),
        ([shaped("stream", {"name": "stdout", "text": "x"}, [1, 2])], ["SentTooMuch"],
         unreadable + "its parent_header is not an object)"),
        ([shaped("status", {})], ["SentTooMuch"], unreadable + "its status content has no proper execution_state)"),
        ([shaped("stream", {"name": "log", "text": "x"})], ["SentTooMuch"],
         unreadable + "its stream is neither stdout nor stderr)"),
        ([shaped("execute_result", {"data": {}, "metadata": {}, "execution_count": True})], ["SentTooMuch"],
         unreadable + "its execute_result content has no proper execution_count)"),
        ([shaped("stream", {"name": "stdout", "text": "x", "execution_count": -7})], ["SentTooMuch"],
         unreadable + "its execution count is below 0)"),
        ([shaped("kernel_info_reply", {"protocol_version": "5.3"})], ["SentTooMuch"],  # round 45
         unreadable + "its reply has no status)"),
        ([shaped("display_data", {"data": {}, "metadata": {}, "transient": None}), good()], ["display_data", "stream"],
         ""),
        ([good(), good(), good()], ["stream", "SentTooMuch", "SentTooMuch"],
         "the kernel sent more than 0 MiB of messages"),
        ([good() + [b""] * MAX_FRAMES, good()], ["SentTooMuch", "SentTooMuch"],  # round 28: millions of frames
         f"the kernel sent a message of more than {MAX_FRAMES} frames"),
        ([dated(MAX_HEADER_BYTES // 40), dated(MAX_HEADER_BYTES // 10)], ["stream", "SentTooMuch"],  # round 31
         f"the kernel sent a message whose header is over {MAX_HEADER_BYTES >> 10} KiB"),
    ):
        stopped = []
        limit = max(MESSAGE_COST, sum(len(frame) + FRAME_COST for frame in good())) + 1 if len(messages) == 3 else 1 << 20
        budget = ByteBudget(limit=limit, stop=lambda: stopped.append(True))
        assert asyncio.run(_read_through_a_charged_channel(messages, budget)) == outcome
        assert (budget.failure.startswith(why) if why else budget.failure == "") and bool(stopped) == bool(why)


def test_a_reply_on_the_shell_channel_answers_a_request_the_grader_waits_on() -> None:
    """Round 47 sent 260,000 well-formed replies that answered nothing, each a fraction of a millisecond of the
    grader's CPU: a reply to no request the grader sent, or a second one to a request, stops the kernel."""
    signed = Session(key=b"the-grader")
    asked = [signed.msg("execute_request", {"code": ""}) for _ in range(2)]

    def reply(to: dict) -> list[bytes]:
        return signed.serialize(signed.msg("execute_reply", {"status": "ok", "execution_count": 1}, parent=to))

    stranger = signed.msg("execute_request", {"code": ""})
    why = "the kernel sent a message the grader cannot read (ValueError: a reply to no request the grader is waiting"
    for messages, outcome in (
        ([reply(asked[1]), reply(asked[0])], ["execute_reply", "execute_reply"]),
        ([reply(asked[0]), reply(asked[0]), reply(asked[1])], ["execute_reply", "SentTooMuch", "SentTooMuch"]),
        ([reply(stranger), reply(asked[0])], ["SentTooMuch", "SentTooMuch"]),
    ):
        budget = ByteBudget(stop=lambda: None)
        assert asyncio.run(_read_through_a_charged_channel(messages, budget, requests=asked)) == outcome
        assert budget.failure.startswith(why) == ("SentTooMuch" in outcome)


def test_only_a_headers_own_date_is_parsed() -> None:
    """Round 36: headers of date strings just under MAX_HEADER_BYTES, each string parsed by jupyter_client
    (about 1 us of the grader's CPU a byte), kept the grader decoding for 110 s on 21 s of the kernel's. The
    grader parses each header's own date only; every other string stays a string, and jupyter_client's
    own function is back in place after each message."""
    signed = Session(key=b"the-grader")
    stamp = "2026-12-06T01:54:14Z"  # with its time zone, as a kernel writes it
    header = signed.msg_header("stream") | {"dates": [stamp] * (MAX_HEADER_BYTES // 40)}
    parent = {"msg_id": "request", "date": stamp, "dates": [stamp] * 3}
    frames = signed.serialize(signed.msg("stream", {"name": "stdout", "text": "ok"}, header=header, parent=parent))
    (message,) = asyncio.run(_decoded_by_a_charged_channel([frames], ByteBudget()))
    assert isinstance(message["header"]["date"], datetime.datetime)
    assert isinstance(message["parent_header"]["date"], datetime.datetime)
    assert {type(value) for value in message["header"]["dates"] + message["parent_header"]["dates"]} == {str}
    assert jupyter_session.extract_dates is jsonutil.extract_dates


def test_what_a_grading_client_holds_unread_stays_within_the_byte_budget() -> None:
    """zmq's own queue in the grader (1000 messages by default) is cut to a few messages: the rest waits in the
    kernel, whose limits count it. The jailed kernel's client gets the manager's budget and its kill."""
    from ptgrader.kernel_client import RECEIVED_BYTES_BUDGET

    assert UNREAD_MESSAGES * MAX_MESSAGE_BYTES * 2 <= RECEIVED_BYTES_BUDGET  # two channels: shell and output
    manager = IsolatedKernelManager()
    manager.spec, manager.received_bytes_budget = object(), 16 << 20  # a jailed kernel's manager, as configured
    client = manager.client()
    try:
        assert client.context.getsockopt(zmq.RCVHWM) == UNREAD_MESSAGES
        assert client.context.getsockopt(zmq.MAXMSGSIZE) == MAX_MESSAGE_BYTES
        assert client.stop_kernel == manager.kill_at_once and client.byte_budget == 16 << 20
    finally:
        client.context.term()


def test_only_replies_come_on_the_shell_channel() -> None:
    """nbclient takes any shell message naming the cell's request as its reply: there, a message that is no reply
    is one the grader cannot read (round 45 sent a kernel_info_reply without a status as the cell's reply)."""
    signed = Session(key=b"the-grader")
    stream = signed.msg("stream", {"name": "stdout", "text": "x"})
    reply = signed.msg("execute_reply", {"status": "ok", "execution_count": 1})
    assert misshapen(stream) == "" and misshapen(reply, reply=True) == ""
    assert misshapen(stream, reply=True) == "a stream message came on the shell channel, where only replies come"


def test_the_graders_message_ids_cannot_be_guessed() -> None:
    """jupyter_client numbers a session's message ids (``<session>_<pid>_<n>``): round 49's kernel read one request's
    id and replied to the grader's next request before it was sent. The grader's ids are random, in its clients too."""
    manager = IsolatedKernelManager()
    client = manager.client()
    try:
        ids = [session.msg("execute_request", {})["msg_id"] for session in (manager.session, client.session) * 2]
    finally:
        client.context.term()
    assert all(re.fullmatch(r"[0-9a-f]{32}", found) for found in ids), ids
    assert len(set(ids)) == len(ids) and not any(manager.session.session in found for found in ids)
