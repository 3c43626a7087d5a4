"""What the grader keeps of a kernel's messages: bounded, inert outputs, and the outputs sent to the grader.

:class:`OutputReceiver` is the part of :class:`~ptgrader.execute.GuardedExecute` that nbclient
calls for every output message of a cell. A kernel decides what it sends, so everything here is
bounded before it is kept:

- each cell keeps at most ``max_output_bytes``, cut while the output arrives, and the whole
  submission at most ``max_submission_output_bytes``: display updates count too, once for every
  output they rewrite (``display(..., display_id=..., update=True)`` on many earlier outputs made
  one message a 150 MiB notebook);
- rich outputs keep only text and raster images (:mod:`ptgrader.outputs`), display updates included;
- an output too deep or malformed to measure is dropped, never passed on; comm (widget) messages
  and messages of unknown types are dropped whole; a display id is remembered only while an output
  holds it, up to 256 characters, and charged to the budget;
- outputs of the grader's own type (:data:`ptgrader.channel.MIME`) leave the stream and are decoded
  without running anything; a name sent twice in one run of a cell is kept as a mistake, which
  fails the comparison, so code that runs late in a cell cannot overwrite a test's output;
- each of those is compared with the reference's as it arrives: at a test cell's first difference the
  part earns nothing whatever follows, so the kernel is asked to stop that cell
  (:meth:`~ptgrader.kernels.IsolatedKernelManager.ask_to_stop`) instead of running its later cases.
"""

from __future__ import annotations

import json
import time
from typing import Any

import nbformat
from nbclient.exceptions import CellExecutionComplete, CellTimeoutError
from nbformat.notebooknode import NotebookNode
from nbformat.v4 import output_from_msg

from . import channel
from .kernel_client import SentTooMuch
from .outputs import SAFE_TYPES, image_sizes, make_safe

TRUNCATED = "\n... output cut by the grader (more than {limit} bytes in this cell) ...\n"
OVER_BUDGET = "\n... output dropped by the grader (this submission sent more than {limit} bytes) ...\n"
#: The messages nbclient turns into outputs; any other type is dropped unread (and unlogged).
OUTPUT_TYPES = frozenset({"execute_result", "display_data", "stream", "error"})
#: Seconds past the submission's deadline that its last outputs may still take to arrive and be read.
OUTPUT_GRACE_S = 5
#: The longest display id remembered (IPython's own are 32 hex digits).
MAX_DISPLAY_ID = 256
#: The decoded outputs of one cell: name -> output, or None for a mistake (a name sent twice, a malformed one).
Received = dict[str, channel.Output | None]


#: The deepest nesting of lists and dicts an output may have; nbformat's own outputs nest a few levels.
MAX_OUTPUT_DEPTH = 64


def nesting_depth(value: object, limit: int = MAX_OUTPUT_DEPTH) -> int:
    """How deeply lists and dicts nest in ``value``, counted without recursion and only up to ``limit + 1``.

    Why not let json find out: whether its encoder runs out of stack depends on the Python (3.11 and 3.12
    raise RecursionError at a few thousand levels, 3.13 does not), and a grader must decide the same way
    on every Python.
    """
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, (list, tuple, dict)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return deepest


def measured_size(output: object) -> float:
    """Bytes of an output as JSON; infinite when it cannot be measured (nested deeper than MAX_OUTPUT_DEPTH,
    not JSON)."""
    if nesting_depth(output) > MAX_OUTPUT_DEPTH:
        return float("inf")
    try:
        return len(json.dumps(output, default=str))
    except (RecursionError, ValueError, TypeError):
        return float("inf")


#: What stands, in a raw message, for metadata emptied before nbformat copies it (not an image type: dropped).
METADATA_DROPPED = "metadata dropped by the grader"


def _empty_unsafe_formats(msg: dict) -> None:
    """Empty, in the raw message, every format :func:`~ptgrader.outputs.make_safe` will drop anyway.

    nbformat turns a message into an output node by node; a format the grader never keeps (a million-entry
    ``application/json``) cost seconds of the grader's time per message before being dropped. The key
    stays, so that make_safe still names what it dropped.
    """
    content = msg.get("content")
    if not isinstance(content, dict):
        return
    data = content.get("data")
    if isinstance(data, dict):
        for mime in data:
            if mime not in SAFE_TYPES and mime != channel.MIME:
                data[mime] = ""
    # The metadata too: six million empty dicts under one key (24 MB) took the grader to 3.4 GB and
    # 30 times the kernel's CPU as nbformat copied them, one object at a time, before make_safe dropped them.
    metadata = content.get("metadata")
    sizes = image_sizes(metadata)
    if metadata and metadata != sizes:
        content["metadata"] = {**sizes, METADATA_DROPPED: ""}  # make_safe still sees, and reports, a drop


class OutputReceiver:
    """Mixin for GuardedExecute (a NotebookClient): bounded, inert outputs and the outputs sent to the grader."""

    # Set by GuardedExecute (traits) and by start_receiving() before each run.
    max_output_bytes: int
    max_submission_output_bytes: int
    nb: NotebookNode

    def start_receiving(self, report: Any, expected_tokens: dict[int, str],
                        expected_outputs: dict[int, dict[str, channel.Output]] | None = None) -> None:
        """Forget the last submission's outputs; ``expected_tokens``: cell index -> the completion line to look for;
        ``expected_outputs``: test cell index -> the reference's outputs that decide the part
        (:func:`~ptgrader.compare.deciding_outputs`), compared as they arrive."""
        self._report = report
        self._expected_tokens = expected_tokens
        self._expected_outputs = expected_outputs or {}
        self.seen_tokens: set[int] = set()
        self.stopped_cells: set[int] = set()  # test cells asked to stop at their first difference
        self.emitted: dict[int, Received] = {}
        self._emitted_bytes = 0
        self._emitted_count = 0  # every output received, a malformed one or one sent twice included
        self._cell_bytes: dict[int, int] = {}
        self._submission_bytes = 0
        self._stream_tail: dict[int, str] = {}
        self._display_ids: set[str] = set()

    # ------------------------------------------------------------------------------- nbclient hooks

    def process_message(self, msg: dict, cell: NotebookNode, cell_index: int) -> NotebookNode | None:
        """nbclient's processing of one of the kernel's messages, where a message that has the protocol's shape but
        that nbformat or the grader cannot take (a display id that is an object, an execution count below 0, a
        format that is a number) stops the kernel with why, as one the grader cannot decode does
        (:meth:`~ptgrader.kernel_client.ByteBudget.unreadable`). Rounds 42 to 44: each such message ended the
        submission in the failsafe, whose report gave Python's raw error."""
        try:
            return super().process_message(msg, cell, cell_index)  # type: ignore[misc]
        except (CellExecutionComplete, CellTimeoutError, SentTooMuch):
            raise
        except Exception as problem:  # noqa: BLE001  (whatever the message made fail, the kernel is stopped)
            budget = getattr(getattr(self, "kc", None), "received", None)
            if budget is None:
                raise
            budget.unreadable(problem)

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> NotebookNode | None:
        """Keep at most the cell's and the submission's share of output, cutting while it arrives; no active formats."""
        if msg.get("msg_type") not in OUTPUT_TYPES:
            return None  # nbclient would log the unknown type, a string the kernel chose (up to 32 MiB)
        self._charge_time(cell_index)
        _empty_unsafe_formats(msg)
        if not display_id and self._sent_out(outs, msg, cell_index):
            return None
        out = super().output(outs, msg, display_id, cell_index)  # type: ignore[misc]
        if out is None or not outs or outs[-1] is not out:
            return out
        if display_id and not self._display_id_kept(display_id):
            self._forget_display(display_id, cell_index, len(outs) - 1)
        if out.output_type == "display_data" and channel.MIME in out.get("data", {}):
            self._drop_last(outs, display_id, cell_index)  # sent to the grader: never in the graded notebook
            self._receive_all(out.data[channel.MIME], cell_index)
            return None
        if make_safe(out):
            self._report.unsafe_outputs += 1
        if out.output_type == "stream" and cell_index in self._expected_tokens:
            seen = self._stream_tail.get(cell_index, "") + out.text
            if self._expected_tokens[cell_index] in seen:
                self.seen_tokens.add(cell_index)
            self._stream_tail[cell_index] = seen[-200:]
        return self._bounded(outs, out, display_id, cell_index)

    def _sent_out(self, outs: list, msg: dict, cell_index: int) -> bool:
        """Take the outputs of a display sent to the grader (:data:`channel.MIME`, no display id) from the message
        itself; False for any other message, which takes nbclient's way.

        Why: nbclient first copies a display's data into a NotebookNode, key by key, to append it to the
        cell; a display sent out holds a cell's outputs (hundreds, in lab 06), only to be dropped at once.
        That copy was a third of the grader's CPU on a submission's messages. A ``clear_output(wait=True)``
        waiting for the next output is applied here, as nbclient would apply it.
        """
        content = msg.get("content")
        data = content.get("data") if isinstance(content, dict) else None
        if msg.get("msg_type") != "display_data" or not isinstance(data, dict) or channel.MIME not in data:
            return False
        if self.output_hook_stack[msg["parent_header"].get("msg_id")]:  # type: ignore[attr-defined]
            return False  # an output widget's hook (none is ever registered here: comm messages are dropped)
        if self.clear_before_next_output:  # type: ignore[attr-defined]
            outs[:] = []
            self.clear_display_id_mapping(cell_index)  # type: ignore[attr-defined]
            self.clear_before_next_output = False
        self._receive_all(data[channel.MIME], cell_index)
        return True

    def _charge_time(self, cell_index: int) -> None:
        """Stop the run once the submission's time is spent, also while its outputs are still arriving.

        Outputs cost the grader more than the kernel (a display of a million-entry JSON took the kernel
        0.05 s and the grader 3.7 s), and nbclient waits for them after a cell's reply outside the cell's
        timeout: without this, 15 such displays held the grader 328 s against a budget of 120.
        """
        deadline = getattr(self, "_deadline", None)
        if deadline is not None and time.monotonic() > deadline + OUTPUT_GRACE_S:
            raise CellTimeoutError(f"the submission's outputs were still arriving when its time was spent "
                                   f"(cell {cell_index})")

    def handle_comm_msg(self, outs: list, msg: dict, cell_index: int) -> None:
        """Comm messages (widgets) are dropped: nothing of them is kept, nothing is routed through them.

        nbclient keeps every widget's state for the notebook's metadata and lets an output widget
        capture outputs around these limits: 1,500 messages of 1 MiB took the grader from 383 MiB to
        2.7 GiB. A graded notebook needs neither; a widget's output in a lab shows as plain text.
        """

    def _update_display_id(self, display_id: str, msg: dict) -> None:
        """A display update rewrites earlier outputs: made inert, and charged once per output it rewrites."""
        targets = [
            (cell_index, position)
            for cell_index, positions in getattr(self, "_display_id_map", {}).get(display_id, {}).items()
            for position in positions
            if cell_index < len(self.nb.cells) and position < len(self.nb.cells[cell_index].get("outputs", []))
        ]
        if not targets:
            return
        try:
            out = output_from_msg({**msg, "msg_type": "display_data",
                                   "header": {**msg.get("header", {}), "msg_type": "display_data"}})
        except (ValueError, KeyError, TypeError):
            return
        if make_safe(out):
            self._report.unsafe_outputs += 1
        size = measured_size(out) * len(targets)
        if not self._charge(size):
            return
        for cell_index, position in targets:
            target = self.nb.cells[cell_index].outputs[position]
            if target.get("output_type") in ("display_data", "execute_result"):
                target["data"], target["metadata"] = out["data"], out["metadata"]

    # -------------------------------------------------------------------------------------- budgets

    def _charge(self, size: float) -> bool:
        """Count ``size`` bytes against the submission's budget; False (and counted as dropped) when it is spent."""
        if self._submission_bytes + size > self.max_submission_output_bytes:
            self._report.dropped_outputs += 1
            return False
        self._submission_bytes += int(size)
        return True

    def _drop_last(self, outs: list, display_id: str | None, cell_index: int) -> None:
        """Remove the output just appended, and the display id nbclient recorded for its position."""
        position = len(outs) - 1
        outs.pop()
        if display_id:
            self._forget_display(display_id, cell_index, position)

    def _display_id_kept(self, display_id: str) -> bool:
        """Whether a display id may be remembered: short, and charged to the budget the first time it is seen."""
        if display_id in self._display_ids:
            return True
        if len(display_id) > MAX_DISPLAY_ID or not self._charge(len(display_id)):
            return False
        self._display_ids.add(display_id)
        return True

    def _forget_display(self, display_id: str, cell_index: int, position: int) -> None:
        """Remove one position from nbclient's display id map, and the id itself when nothing is left of it.

        nbclient keeps every display id it was sent as a key: 4,500 ids of 1 MiB held 5.7 GiB in the grader.
        """
        id_map = getattr(self, "_display_id_map", {})
        cells = id_map.get(display_id, {})
        positions = cells.get(cell_index, [])
        if position in positions:
            positions.remove(position)
        if not positions:
            cells.pop(cell_index, None)
        if not cells:
            id_map.pop(display_id, None)

    def _bounded(self, outs: list, out: NotebookNode, display_id: str | None, cell_index: int) -> NotebookNode | None:
        """Keep ``out`` if the cell and the submission have room for it; else a note in its place (once per cell)."""
        size = measured_size(out)
        room = self.max_output_bytes - self._cell_bytes.get(cell_index, 0)
        if room <= 0:
            self._drop_last(outs, display_id, cell_index)
            return None
        if size <= room and self._charge(size):
            self._cell_bytes[cell_index] = self.max_output_bytes - room + int(size)
            return out
        self._drop_last(outs, display_id, cell_index)
        self._cell_bytes[cell_index] = self.max_output_bytes
        note = TRUNCATED.format(limit=self.max_output_bytes)
        if out.output_type == "stream" and size > room:
            note = out.text[:room] + note
        if size <= room or not self._charge(len(note)):  # the submission's budget, not the cell's, is spent
            note = OVER_BUDGET.format(limit=self.max_submission_output_bytes)
        if cell_index not in self._report.truncated_cells:
            self._report.truncated_cells.append(cell_index)
        kept = nbformat.v4.new_output("stream", name="stdout", text=note)
        outs.append(kept)
        return kept

    # ------------------------------------------------------------------------- outputs sent out (channel)

    def _receive_all(self, data: object, cell_index: int) -> None:
        """Keep each output of one display sent to the grader, until the submission's outputs are over their bounds.

        The submission's time is checked as they are read too: one message of a 30 MB list held the grader
        40 s past it (round 10).
        """
        for index, payload in enumerate(channel.payloads(data)):
            if index % 64 == 0:
                self._charge_time(cell_index)
            if not self._receive(payload, cell_index):
                break

    def _receive(self, payload: object, cell_index: int) -> bool:
        """Keep one output the kernel sent out (decoded as safetensors or JSON: nothing runs), within bounds.

        False once the submission's outputs are over their bounds: the rest of a message is not even measured.
        """
        emitted = self.emitted.setdefault(cell_index, {})
        self._emitted_bytes += measured_size(payload)
        self._emitted_count += 1  # counted as received: malformed ones all go under one name (round 10)
        if self._emitted_bytes > channel.MAX_BYTES or self._emitted_count > channel.MAX_OUTPUTS:
            emitted["(too many outputs)"] = None
            return False
        try:
            name, value = channel.decode(payload)
        except Exception as problem:  # noqa: BLE001  (whatever the kernel sent: a mistake of this cell, not the run's)
            emitted[f"(malformed output: {type(problem).__name__}: {str(problem)[:200]})"] = None
            return True
        if name in emitted:
            emitted[f"(sent twice: {name})"] = None
            emitted[name] = None
        else:
            emitted[name] = value
        self._stop_at_a_difference(cell_index, name, emitted[name])
        return True

    def _stop_at_a_difference(self, cell_index: int, name: str, output: channel.Output | None) -> None:
        """Ask the kernel to stop ``cell_index`` once an output that decides its part differs from the reference's.

        The comparison is the final one's (:func:`~ptgrader.channel.differences`), which runs again after the run and
        alone decides: a stopped cell earns nothing because that output differs, and its later outputs, not
        computed, change nothing. What a check saw (an observation) costs only a share of the part, so it stops
        nothing: the outputs after it may still earn the rest.
        """
        expected = self._expected_outputs.get(cell_index, {}).get(name)
        if expected is None or cell_index in self.stopped_cells:
            return
        if channel.differences({name: output}, {name: expected}):
            self.stopped_cells.add(cell_index)
            ask_to_stop = getattr(getattr(self, "km", None), "ask_to_stop", None)
            if ask_to_stop is not None:
                ask_to_stop()
