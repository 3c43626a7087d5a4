"""The score of a test cell is the grader's verdict (ptgrader.score), held against nbgrader's own scoring.

nbgrader scores a graded code cell by the first error, stderr stream or execute_result among its
outputs (nbgrader.utils.determine_grade). These tests build the outputs a kernel could send, let
the grader write its verdicts, and ask nbgrader what each cell scores. The end-to-end cases (a
forged execute_result, an honest answer that warns) are graded in the labs: tests/hostile.py.
"""

from __future__ import annotations

import json

import nbformat
import pytest
from nbgrader.utils import determine_grade

from ptgrader import channel, compare, score
from ptgrader.cells import number_cells
from ptgrader.receive import MAX_OUTPUT_DEPTH, OutputReceiver, measured_size
from ptgrader.report import GradingReport
from tests import html_pages

POINTS = 3.0


def _test_cell(grade_id: str, outputs: list[dict]) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("ptchecks.check_close(f(), expected, name='f')")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": grade_id,
                                 "points": POINTS, "schema_version": 3}
    cell.outputs = [nbformat.from_dict(output) for output in outputs]
    return cell


FORGED_RESULT = {"output_type": "execute_result", "execution_count": 3, "metadata": {},
                 "data": {"text/plain": "'full marks'"}}
FORGED_NUMBER = {**FORGED_RESULT, "data": {"text/plain": "3"}}
WARNING = {"output_type": "stream", "name": "stderr", "text": "UserWarning: To copy construct from a tensor...\n"}
FAILED = {"output_type": "error", "ename": "ExerciseError", "evalue": "f: wrong values", "traceback": ["tb"]}
PRINTED = {"output_type": "stream", "name": "stdout", "text": "✅ f\n"}


def _graded(cells: list[nbformat.NotebookNode], failures: dict[int, list[score.Failure]] | None = None,
            test_ids: set[str] | None = None, compared: set[int] = frozenset()
            ) -> tuple[nbformat.NotebookNode, dict[str, str]]:
    nb = nbformat.v4.new_notebook(cells=cells)
    ids = {cell.metadata.nbgrader["grade_id"] for cell in cells} if test_ids is None else test_ids
    return nb, score.write_verdicts(nb, failures or {}, ids, compared)


def _points(cell: nbformat.NotebookNode) -> float | None:
    return determine_grade(cell)[0]


def test_a_warning_on_stderr_costs_nothing_and_stays_visible() -> None:
    nb, scores = _graded([_test_cell("test_f", [WARNING, PRINTED])])
    (cell,) = nb.cells
    assert _points(cell) == POINTS and scores == {"test_f": "passed"}
    assert [o.get("name") for o in cell.outputs] == ["stdout", "stdout"]
    assert "UserWarning" in cell.outputs[0].text


def test_a_kernels_execute_result_earns_nothing() -> None:
    for forged in (FORGED_RESULT, FORGED_NUMBER):
        failed = score.Failure(score.DIFFER, "compared by the grader: f: not sent")
        nb, scores = _graded([_test_cell("test_f", [forged, FAILED])], {0: [failed]})
        (cell,) = nb.cells
        assert _points(cell) == 0
        assert [o.output_type for o in cell.outputs] == ["display_data", "stream", "error"]
        assert cell.outputs[0].data["text/plain"] == forged["data"]["text/plain"]  # still shown, never scored
        assert cell.outputs[-1].ename == score.DIFFER and scores["test_f"].startswith(score.DIFFER)


def test_the_kernels_own_error_fails_the_cell_once() -> None:
    nb, scores = _graded([_test_cell("test_f", [FAILED])])
    (cell,) = nb.cells
    assert _points(cell) == 0 and scores["test_f"] == "TestFailed: ExerciseError: f: wrong values"
    assert [o.output_type for o in cell.outputs] == ["stream", "error"]  # the traceback as text, then the verdict


def test_the_strongest_reason_is_the_verdict() -> None:
    withheld = score.Failure(score.WITHHELD, "the submission breaks the lab's code policy")
    nb, scores = _graded([_test_cell("test_f", [FAILED])], {0: [withheld]}, compared={0})
    assert scores["test_f"].startswith(score.WITHHELD) and len(nb.cells[0].outputs) == 2
    assert _points(nb.cells[0]) == 0


CHECK_SAW = score.Failure(score.CHECKS_DIFFER, "check_true #2: the input is not modified: 'failed: ...', expected True")
OUTPUTS_WRONG = score.Failure(score.DIFFER, "compared by the grader: f: 1 of 3 values differ")
IN_KERNEL_REASONS = [
    ([FAILED], []),  # the test cell raised (its checks' failures, the canaries)
    ([PRINTED], [score.Failure(score.INCOMPLETE, "the test cell's last line did not run cleanly")]),
    ([PRINTED], [CHECK_SAW]),
]


@pytest.mark.parametrize(("outputs", "found"), IN_KERNEL_REASONS, ids=["raised", "incomplete", "checks_differ"])
def test_what_only_the_kernel_saw_costs_only_its_share(outputs: list[dict], found: list[score.Failure]) -> None:
    nb, scores = _graded([_test_cell("test_f", outputs)], {0: found}, compared={0})
    kept = POINTS * (1 - score.IN_KERNEL_SHARE)
    assert _points(nb.cells[0]) == kept, "nbgrader does not read the kept share from the verdict"
    assert scores["test_f"].startswith(f"partial, {kept:g} of {POINTS:g}")
    assert nb.cells[0].outputs[-1].output_type == "execute_result"


@pytest.mark.parametrize(("outputs", "found"), IN_KERNEL_REASONS, ids=["raised", "incomplete", "checks_differ"])
def test_without_compared_outputs_the_kernel_decides_nothing_alone(outputs: list[dict],
                                                                   found: list[score.Failure]) -> None:
    nb, scores = _graded([_test_cell("test_f", outputs)], {0: found})
    assert _points(nb.cells[0]) == 0 and not scores["test_f"].startswith("partial")


def test_an_outside_reason_beats_what_the_kernel_saw() -> None:
    nb, scores = _graded([_test_cell("test_f", [FAILED])], {0: [CHECK_SAW, OUTPUTS_WRONG]}, compared={0})
    assert _points(nb.cells[0]) == 0 and scores["test_f"].startswith(score.DIFFER)
    rule = score.Failure(score.RULE_BROKEN, "f must have no Python loop, and has a for loop")
    nb, scores = _graded([_test_cell("test_f", [PRINTED])], {0: [CHECK_SAW, rule]}, compared={0})
    assert _points(nb.cells[0]) == 0 and scores["test_f"].startswith(score.RULE_BROKEN)


def test_a_forged_number_cannot_raise_a_partial_score() -> None:
    nb, _ = _graded([_test_cell("test_f", [FORGED_NUMBER])], {0: [CHECK_SAW]}, compared={0})
    assert _points(nb.cells[0]) == POINTS * (1 - score.IN_KERNEL_SHARE)


def test_a_cell_whose_metadata_makes_it_a_test_earns_nothing() -> None:
    nb, scores = _graded([_test_cell("test_f", [PRINTED]), _test_cell("forged", [PRINTED])], test_ids={"test_f"})
    assert [_points(cell) for cell in nb.cells] == [POINTS, 0]
    assert scores["forged"].startswith(score.NOT_A_TEST)


def test_a_passing_cell_ends_with_no_scored_output() -> None:
    nb, _ = _graded([_test_cell("test_f", [PRINTED, WARNING, FORGED_RESULT])])
    scored = [o for o in nb.cells[0].outputs
              if o.output_type in ("error", "execute_result") or o.get("name") == "stderr"]
    assert scored == [] and _points(nb.cells[0]) == POINTS


class _Receiver(OutputReceiver):
    """The receiving half alone, with nbclient's bookkeeping reduced to what it reads."""

    max_output_bytes = 20_000
    max_submission_output_bytes = 50_000

    def __init__(self, nb: nbformat.NotebookNode) -> None:
        self.nb = nb
        self._display_id_map: dict[str, dict[int, list[int]]] = {}
        self.start_receiving(GradingReport("s", "lab", "nb"), {})


def _display(data: dict, display_id: str = "d") -> dict:
    return {"msg_type": "update_display_data", "header": {"msg_type": "update_display_data"},
            "parent_header": {}, "content": {"data": data, "metadata": {}, "transient": {"display_id": display_id}}}


def test_display_updates_are_inert_and_charged_for_every_output_they_rewrite() -> None:
    cells = [nbformat.v4.new_code_cell() for _ in range(10)]
    for cell in cells:
        cell.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": "small"})]
    receiver = _Receiver(nbformat.v4.new_notebook(cells=cells))
    receiver._display_id_map["d"] = {index: [0] for index in range(10)}
    receiver._update_display_id("d", _display({"text/html": "<img src=x onerror=alert(1)>", "text/plain": "ok"}))
    assert all(cell.outputs[0].data == {"text/plain": "ok"} for cell in cells)  # the HTML never arrives
    receiver._update_display_id("d", _display({"text/plain": "x" * 10_000}))  # 10 outputs x 10 kB > 50 kB
    assert all(cell.outputs[0].data == {"text/plain": "ok"} for cell in cells)
    assert receiver._report.dropped_outputs == 1


@pytest.mark.parametrize("levels", [MAX_OUTPUT_DEPTH, 5_000])
def test_an_output_too_deep_to_measure_is_never_kept(levels: int) -> None:
    """The same verdict on every Python, whatever its json encoder's stack allows."""
    deep: list = []
    for _ in range(levels):
        deep = [deep]
    assert measured_size({"data": deep}) == float("inf")


def test_an_output_of_ordinary_depth_is_measured() -> None:
    nested: list = []
    for _ in range(MAX_OUTPUT_DEPTH - 2):
        nested = [nested]
    assert measured_size({"data": nested}) == len(json.dumps({"data": nested}))


def test_a_name_sent_twice_in_one_cell_counts_as_not_sent() -> None:
    receiver = _Receiver(nbformat.v4.new_notebook())
    for value in (1, 2):
        receiver._receive({"name": "answer", "typed": value}, 3)
    receiver._receive({"name": "broken", "safetensors": "not base64"}, 3)
    received = receiver.emitted[3]
    assert received["answer"] is None and "(sent twice: answer)" in received
    assert any(name.startswith("(malformed output") for name in received)


class _Kernel:
    """A kernel manager that only counts the grader's requests to stop the running cell."""

    def __init__(self) -> None:
        self.stops = 0

    def ask_to_stop(self) -> None:
        self.stops += 1


def test_the_kernel_is_asked_to_stop_a_cell_once_at_its_first_deciding_difference() -> None:
    """A part whose output already differs earns nothing whatever follows: its cell is stopped, once, there. What a
    check saw costs only a share (its later outputs may still earn the rest), and another cell is another part."""
    reference = {"right": channel.Output(1), "wrong": channel.Output(2), "later": channel.Output(3)}
    receiver = _Receiver(nbformat.v4.new_notebook())
    receiver.km = _Kernel()
    receiver.start_receiving(GradingReport("s", "lab", "nb"), {}, {3: reference, 4: {"twice": channel.Output(5)}})
    receiver._receive({"name": "right", "typed": 1}, 3)
    receiver._receive({"name": "not in the reference", "typed": 0}, 3)
    receiver._receive({"name": "seen", "typed": False, "observation": True}, 3)
    assert receiver.km.stops == 0 and receiver.stopped_cells == set()
    receiver._receive({"name": "wrong", "typed": 2.0}, 3)  # a float where the reference sent an int
    receiver._receive({"name": "later", "typed": 0}, 3)
    assert receiver.km.stops == 1 and receiver.stopped_cells == {3}
    for _ in range(2):  # a name sent twice is not sent: the part earns nothing
        receiver._receive({"name": "twice", "typed": 5}, 4)
    assert receiver.km.stops == 2 and receiver.stopped_cells == {3, 4}


def test_a_stopped_cells_verdict_counts_the_outputs_it_never_computed() -> None:
    reference = {name: channel.Output(index) for index, name in enumerate("abcd")}
    found = channel.differences({"a": channel.Output(0), "b": channel.Output(7)}, reference)
    assert compare.worded(found, stopped=False) == "b: 7, expected 1; c: not sent; d: not sent"
    assert compare.worded(found, stopped=True) == (
        "b: 7, expected 1; the grader stopped the cell there, so 2 later outputs were not computed")


def test_a_list_in_one_message_is_received_output_by_output() -> None:
    """ptchecks sends a cell's outputs as one list: each item is judged on its own, as if sent alone."""
    from ptgrader import channel

    grader, outs = _guarded_receiver()
    batch = [{"name": "answer", "typed": 1}, {"name": "answer", "typed": 2}, {"typed": 3}, {"name": "kept", "typed": 4}]
    content = {"data": {channel.MIME: batch}, "metadata": {}, "transient": {}}
    grader.output(outs, {"msg_type": "display_data", "header": {"msg_type": "display_data"}, "parent_header": {},
                         "content": content}, None, 0)
    received = grader.emitted[0]
    assert outs == [] and received["answer"] is None and "(sent twice: answer)" in received
    assert received["kept"].value == 4 and any(name.startswith("(malformed output") for name in received)


def test_outputs_sent_out_skip_nbclients_copy_and_honour_a_waiting_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    """A display sent to the grader is read from the message (nbclient's NotebookNode copy of it cost a third of the
    grader's CPU on messages); a clear_output(wait=True) before it clears as nbclient would; with a display id it
    takes nbclient's way, and is dropped just the same."""
    from nbclient import client as nbclient_module

    from ptgrader import channel

    copies: list[object] = []
    copy = nbclient_module.output_from_msg
    monkeypatch.setattr(nbclient_module, "output_from_msg", lambda msg: copies.append(msg) or copy(msg))
    grader, outs = _guarded_receiver()
    grader.output(outs, _message("display_data"), None, 0)
    grader.clear_before_next_output = True
    sent = {"msg_type": "display_data", "header": {"msg_type": "display_data"}, "parent_header": {},
            "content": {"data": {channel.MIME: [{"name": "a", "typed": 1}]}, "metadata": {}, "transient": {}}}
    assert grader.output(outs, sent, None, 0) is None
    assert outs == [] and not grader.clear_before_next_output and len(copies) == 1  # only the plain display
    shown = {**sent, "content": {**sent["content"], "data": {channel.MIME: [{"name": "b", "typed": 2}]},
                                 "transient": {"display_id": "d"}}}
    assert grader.output(outs, shown, "d", 0) is None
    assert outs == [] and len(copies) == 2 and grader._display_id_map == {}
    assert {name: output.value for name, output in grader.emitted[0].items()} == {"a": 1, "b": 2}


def test_past_the_most_outputs_the_rest_of_a_message_is_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """A list of a million outputs costs the grader what MAX_OUTPUTS of them cost, no more."""
    from ptgrader import channel, receive

    measured: list[object] = []
    monkeypatch.setattr(receive, "measured_size", lambda payload: measured.append(payload) or 10)
    monkeypatch.setattr(channel, "MAX_OUTPUTS", 3)
    grader, outs = _guarded_receiver()
    batch = [{"name": f"o{index}", "typed": index} for index in range(1_000_000)]
    content = {"data": {channel.MIME: batch}, "metadata": {}, "transient": {}}
    grader.output(outs, {"msg_type": "display_data", "header": {"msg_type": "display_data"}, "parent_header": {},
                         "content": content}, None, 0)
    assert len(measured) == 4 and list(grader.emitted[0]) == ["o0", "o1", "o2", "(too many outputs)"]
    # Malformed outputs all go under one name: they are counted as received all the same (round 10).
    measured.clear()
    grader, outs = _guarded_receiver()
    content = {"data": {channel.MIME: [{"no name": index} for index in range(1_000_000)]}, "metadata": {},
               "transient": {}}
    grader.output(outs, {"msg_type": "display_data", "header": {"msg_type": "display_data"}, "parent_header": {},
                         "content": content}, None, 0)
    assert len(measured) == 4 and len(grader.emitted[0]) == 2 and "(too many outputs)" in grader.emitted[0]


def test_outputs_still_arriving_past_the_submissions_time_stop_within_one_message(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One message of a 30 MB list held the grader 40 s past the submission's time (round 10): the time is
    checked while a message's outputs are read, not only when it arrives."""
    from nbclient.exceptions import CellTimeoutError

    from ptgrader import channel, receive

    clock = [1000.0]
    monkeypatch.setattr(receive.time, "monotonic", lambda: clock[0])

    def slow_to_measure(payload: object) -> float:  # each output takes the grader a second
        clock[0] += 1.0
        return 10

    monkeypatch.setattr(receive, "measured_size", slow_to_measure)
    grader, outs = _guarded_receiver()
    grader._deadline = clock[0]  # spent just as the message arrives
    content = {"data": {channel.MIME: [{"no name": index} for index in range(1_000)]}, "metadata": {},
               "transient": {}}
    with pytest.raises(CellTimeoutError):
        grader.output(outs, {"msg_type": "display_data", "header": {"msg_type": "display_data"},
                             "parent_header": {}, "content": content}, None, 0)
    assert clock[0] - grader._deadline <= receive.OUTPUT_GRACE_S + 64


def test_a_cell_gets_only_what_is_left_of_the_submissions_time() -> None:
    import time

    from ptgrader.kernel_run import KernelRun

    run = KernelRun()
    run.timeout, run.submission_timeout = 60, 120
    assert run._get_timeout(None) == 60  # before the cells start: the cell's own limit
    run._deadline = time.monotonic() + 15.2
    assert run._get_timeout(None) == 16  # three cells busy 45 s each cannot take 135 s
    cell = nbformat.v4.new_code_cell()
    run._deadline = time.monotonic() + 0.5
    assert run._get_timeout(None) == 1 and "longer than its 120 s" in run._timeout_reason(cell, 4)
    run._deadline = time.monotonic() + 30
    assert run._timeout_reason(cell, 4) == "cell 5 ran longer than 60 s; the kernel was stopped"


def test_comm_messages_keep_nothing_in_the_grader() -> None:
    from ptgrader.execute import GuardedExecute

    grader = GuardedExecute()
    message = {"msg_type": "comm_open", "header": {"msg_type": "comm_open"}, "parent_header": {},
               "content": {"comm_id": "c1", "target_name": "jupyter.widget",
                           "data": {"state": {"_model_name": "OutputModel", "blob": "x" * 1_000}}}}
    grader.handle_comm_msg([], message, 0)
    assert grader.widget_state == {} and grader.comm_objects == {}


def _guarded_receiver() -> tuple[object, list]:
    from ptgrader.execute import GuardedExecute

    grader = GuardedExecute()
    grader.reset_execution_trackers()
    grader.clear_before_next_output = False
    grader.nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell()])
    grader.start_receiving(GradingReport("s", "lab", "nb"), {})
    return grader, grader.nb.cells[0].outputs


def _message(msg_type: str, display_id: str = "") -> dict:
    content = {"data": {"text/plain": "x"}, "metadata": {}, "transient": {"display_id": display_id} if display_id else {}}
    return {"msg_type": msg_type, "header": {"msg_type": msg_type}, "parent_header": {}, "content": content}


def test_display_ids_are_remembered_only_short_and_while_an_output_holds_them() -> None:
    grader, outs = _guarded_receiver()
    for index in range(20):  # a red team's 4,500 ids of 1 MiB held 5.7 GiB in nbclient's map
        display_id = "A" * 100_000 + str(index)
        grader.output(outs, _message("display_data", display_id), display_id, 0)
    assert len(outs) == 20 and grader._display_id_map == {}
    grader.output(outs, _message("display_data", "short-id"), "short-id", 0)
    assert grader._display_id_map == {"short-id": {0: [20]}}


def test_messages_of_unknown_types_are_dropped_unlogged(caplog: pytest.LogCaptureFixture) -> None:
    grader, outs = _guarded_receiver()
    assert grader.output(outs, _message("B" * 10_000), None, 0) is None
    assert outs == [] and "BBBB" not in caplog.text


def test_a_cell_keeps_its_share_and_the_submission_its_budget() -> None:
    grader, outs = _guarded_receiver()
    stream = {"msg_type": "stream", "header": {"msg_type": "stream"}, "parent_header": {},
              "content": {"name": "stdout", "text": "x" * 100_000}}
    grader.output(outs, stream, None, 0)
    assert len(outs) == 1 and outs[0].text.startswith("x" * 100) and "output cut by the grader" in outs[0].text
    assert len(outs[0].text) < grader.max_output_bytes + 200
    grader.nb.cells += [nbformat.v4.new_code_cell() for _ in range(80)]
    for index in range(1, 81):  # 80 cells of 19 kB each: past the submission's 1 MB
        grader.output(grader.nb.cells[index].outputs, {**stream, "content": {"name": "stdout", "text": "y" * 19_000}},
                      None, index)
    texts = [cell.outputs[0].text for cell in grader.nb.cells[1:]]
    assert texts[0] == "y" * 19_000 and "this submission sent more than" in texts[-1]
    assert grader._submission_bytes <= grader.max_submission_output_bytes


def test_a_report_keeps_a_few_short_policy_findings_of_many() -> None:
    from ptgrader.execute import FINDING_CHARS, KEPT_FINDINGS, GuardedExecute

    # A red team's cell of 100,000 imports of os wrote a 118 MB graded notebook: every finding, in every test cell.
    cells = [nbformat.v4.new_code_cell(f"import {'m' * 1_000}\n" * 500)]  # each finding names the module
    findings = GuardedExecute()._policy_findings(nbformat.v4.new_notebook(cells=cells), {}, set())
    assert len(findings) == KEPT_FINDINGS + 1 and "more findings" in findings[-1]
    assert all(len(finding) <= FINDING_CHARS < 1_000 for finding in findings)  # cut: each names 1,000 characters


def test_a_cell_s_findings_are_remembered_only_for_cells_of_a_solution_s_size() -> None:
    """The same cell at the same place gives the same findings, remembered for the next student; a cell longer
    than any answer is read again each time, so a class of hostile cells fills no memory of the grader."""
    from ptgrader import execute
    from ptgrader.policy import LabNames, scan_cell

    modules, lab = (("torch", "torch"),), LabNames()
    for source in ("import os\nos.getcwd()\n", "x = 1\n" + "# padding\n" * execute.REMEMBERED_CELL_CHARS):
        expected = tuple(str(finding) for finding in scan_cell(source, 4, dict(modules), lab=lab))
        before = execute._remembered_findings.cache_info()
        assert execute._cell_findings(source, 4, modules, lab) == expected
        assert execute._cell_findings(source, 4, modules, lab) == expected
        after = execute._remembered_findings.cache_info()
        remembered = len(source) <= execute.REMEMBERED_CELL_CHARS
        assert (after.hits - before.hits, after.currsize - before.currsize) == ((1, 1) if remembered else (0, 0))
    assert expected == () and "os" in execute._cell_findings("import os\nos.getcwd()\n", 4, modules, lab)[0]


def test_an_outputs_metadata_is_emptied_before_it_is_copied() -> None:
    """A red team's 24 MB of empty dicts in a PNG's metadata took the grader to 3.4 GB, copied object by object."""
    grader, outs = _guarded_receiver()
    message = _message("display_data")
    message["content"]["data"]["image/png"] = html_pages.encoded_image(40, 30)
    bulk = [{}] * 200_000
    message["content"]["metadata"] = {"note": bulk, "image/png": {"width": 40, "height": "1 onerror=x"}}
    grader.output(outs, message, None, 0)
    assert message["content"]["metadata"]["image/png"] == {"width": 40}
    assert "note" not in message["content"]["metadata"]  # gone before nbclient and nbformat copied it
    assert outs[-1].metadata == {"image/png": {"width": 40}} and grader._report.unsafe_outputs == 1


def test_the_grader_numbers_the_cells_that_ran() -> None:
    """Round 48: a kernel that set its own count to 10**4290 had every later cell's label 4,290 digits wide on the
    feedback page. The grader numbers the cells that ran, and their results, in order; a cell that did not run
    keeps no number."""
    huge = 10**4290
    cells = [nbformat.v4.new_code_cell("x", execution_count=huge, outputs=[
                 nbformat.from_dict({**FORGED_RESULT, "execution_count": huge})]),
             nbformat.v4.new_markdown_cell("text"),
             nbformat.v4.new_code_cell("y", execution_count=None),
             nbformat.v4.new_code_cell("z", outputs=[nbformat.from_dict(PRINTED)])]
    nb = nbformat.v4.new_notebook(cells=cells)
    cells[-1].execution_count = 7  # a count the kernel skipped to
    number_cells(nb)
    assert [cell.get("execution_count") for cell in nb.cells] == [1, None, None, 2]
    assert nb.cells[0].outputs[0].execution_count == 1
