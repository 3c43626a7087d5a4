"""A kernel client that looks at its sockets at least twice a second while it waits for a message.

Why: jupyter_client's asyncio channels wait for a message with one ``socket.poll(timeout)``, which
pyzmq wakes through the socket's edge-triggered file descriptor. When that wake-up is lost (libzmq
may consume a socket's read edge while it sends on the same socket), a reply that has already arrived
sits unnoticed until the wait times out, when pyzmq's last, non-blocking look finds it. In ``make
test`` a notebook cell of a few milliseconds waited out nbclient's whole 600 s timeout that way
(kernel idle, its reply unread; with ipykernel 7 and 6 alike), and a grading kernel would spend its
submission's time budget on it and be stopped, costing an honest student the parts after it. Polling
in slices turns a lost wake-up into a delay of at most :data:`POLL_SLICE_S`.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from traitlets import DottedObjectName, Type

#: The longest a message that has arrived can go unnoticed, in seconds.
POLL_SLICE_S = 0.5


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
            if left is not None and left <= POLL_SLICE_S:
                raise Empty


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
