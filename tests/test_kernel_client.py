"""A reply whose socket wake-up is lost is read within a poll slice, not at the end of the client's timeout.

The socket below loses its wake-up as the real one did in `make test`: a wait that starts with a message
already there returns only when its timeout ends (pyzmq's last, non-blocking look then finds it).
"""

from __future__ import annotations

import asyncio
import time
from queue import Empty

import pytest
import zmq
import zmq.asyncio
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session

from ptgrader.kernel_client import POLL_SLICE_S, RepollingKernelClient, SlicedPollChannel
from ptgrader.kernels import IsolatedKernelManager

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
        assert getattr(client, f"{name}_channel_class") is SlicedPollChannel, name
