"""`make refresh` reports a missing file or a broken notebook and changes nothing."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tests import hygiene, notebook_tools
from tests.notebook_tools import NotebookError, execute_notebook, read_notebook, without_machine_warnings
from tests.refresh import main


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_missing_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope.ipynb")]) == 1
    assert "nope.ipynb: no such notebook" in capsys.readouterr().err
    assert not (tmp_path / "nope.ipynb").exists()


def test_invalid_json_is_reported_and_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [', encoding="utf-8")
    assert main([str(broken)]) == 1
    assert "not a valid notebook" in capsys.readouterr().err
    assert broken.read_text(encoding="utf-8") == '{"cells": ['


def test_failing_cell_is_reported_and_notebook_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _notebook(tmp_path / "fails.ipynb", "x = 1", "1 / 0")
    before = path.read_bytes()
    assert main([str(path)]) == 1
    err = capsys.readouterr().err
    assert "failed" in err and "ZeroDivisionError" in err
    assert path.read_bytes() == before


def test_every_cell_runs_whatever_its_tags(tmp_path: Path) -> None:
    path = _notebook(tmp_path / "ok.ipynb", "print('cpu')", "raise ValueError('shown on purpose')")
    nb = read_notebook(path)
    nb.cells[0].metadata["tags"] = ["gpu"]
    nb.cells[1].metadata["tags"] = ["raises-exception"]  # Run All ignores tags, and so does refresh
    with pytest.raises(NotebookError, match="code cell 1 failed"):
        execute_notebook(nb, tmp_path)
    assert nb.cells[0].outputs[0].text == "cpu\n"


def test_read_notebook_rejects_schema_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.ipynb"
    path.write_text('{"cells": 3, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}', encoding="utf-8")
    with pytest.raises(NotebookError, match="not a valid notebook"):
        read_notebook(path)


def test_a_process_left_running_fails_the_run_and_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook must clean up what it starts (chapter 06 launches workers): a survivor fails Run All."""
    monkeypatch.setattr(notebook_tools, "LEFTOVER_GRACE_S", 2.0)  # the sleeper never ends by itself
    pid_file = tmp_path / "pid"
    nb = read_notebook(_notebook(
        tmp_path / "leaks.ipynb",
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))",
    ))
    with pytest.raises(NotebookError, match=r"(?s)left 1 process\(es\) running.*time.sleep"):
        execute_notebook(nb, tmp_path)
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2], (
        "the leftover was reported but not killed"
    )


def test_processes_that_finish_in_the_notebook_are_fine(tmp_path: Path) -> None:
    nb = read_notebook(_notebook(tmp_path / "clean.ipynb", "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'])"))
    assert execute_notebook(nb, tmp_path) > 0


#: What compare() prints on a loaded machine, made without loading it: every round's machine check stalled
#: (the 512x512 matmul, 8x the work, took 1.1x the time of the 256x256 one). That a real load gives such
#: checks is test_ptlabs_runtime.py's test_compare_reports_a_loaded_machine, with spinning processes.
LOADED_TIMING = """\
import ptlabs
from ptlabs.timing import Comparison

stalled = {"256": 0.010, "512": 0.011}
times = {"a": [0.002] * 5, "b": [0.003] * 5}
print(Comparison(label="under load", baseline="a", times=times, checks=[stalled] * 5,
                 num_threads=2).table())
"""


def test_timing_on_a_loaded_machine_is_refused_unless_a_draft(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A notebook whose compare() table found the machine busy is not written; --allow-busy writes the
    draft, whose table says busy, which the hygiene rule then refuses."""
    path = _notebook(tmp_path / "timed.ipynb", LOADED_TIMING)
    before = path.read_bytes()
    assert main([str(path)]) == 1
    err = capsys.readouterr().err
    assert "timing measured while the machine was busy" in err and "under load" in err, err
    assert path.read_bytes() == before
    assert main(["--allow-busy", str(path)]) == 0
    problems = hygiene.timing_tables_hold_together(read_notebook(path))
    assert any("measured while the machine was busy" in problem for problem in problems), problems


@pytest.mark.parametrize("path", ["torch/utils", "/srv/venv/lib/python3.12/site-packages/torch/utils"])
def test_the_cuda_home_warning_is_taken_out_of_the_outputs_and_nothing_else(path: str) -> None:
    """What a CUDA build logs on a GPU-less machine with a CUDA toolkit, however the logger writes the path."""
    warning = f"W1202 14:51:22.085000 19014 {path}/cpp_extension.py:178] No CUDA runtime is found, using CUDA_HOME='/usr/local'\n"
    outputs = [nbformat.v4.new_output("stream", name="stderr", text=warning),
               nbformat.v4.new_output("stream", name="stderr", text=warning.replace("178]", "178] [0/0]") + "kept\n"),
               nbformat.v4.new_output("stream", name="stdout", text=warning)]
    assert [(o.name, o.text) for o in without_machine_warnings(outputs)] == [("stderr", "kept\n"), ("stdout", warning)]


def test_dynamos_note_on_python_3_13_0_is_taken_out_too() -> None:
    note = ("/venv/lib/python3.13/site-packages/torch/_dynamo/guards.py:1343: RuntimeWarning: Guards may run "
            "slower on Python 3.13.0. Consider upgrading to Python 3.13.1+.\n  warnings.warn(\n")
    other = "/x/torch/_dynamo/guards.py:9: RuntimeWarning: something else\n  warnings.warn(\n"
    outputs = [nbformat.v4.new_output("stream", name="stderr", text=note + other)]
    assert [o.text for o in without_machine_warnings(outputs)] == [other]
