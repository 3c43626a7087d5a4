"""The grader's guards outside the kernel: the code policy, the course record, the reaper.

The end-to-end proof (real nbgrader runs over hostile submissions) is in test_labs.py; these tests
pin down each guard's own behaviour, including the honest code each must let through.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ptlabs.autograde.policy import scan_cell, setup_module_names
from ptlabs.autograde.sandbox import CourseRecord, KernelPlace, become_subreaper, current_children, reap

SETUP = setup_module_names(
    [
        "import importlib.util, os, subprocess, sys",  # the Colab bootstrap cell
        "import math\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\nimport ptlabs\n"
        "import ptlabs.grading",
    ]
)

HONEST = [
    "def flatten(x):\n    b, h, t, d = x.shape\n    return x.transpose(1, 2).reshape(b, t, h * d)",
    "import math\nfrom collections import OrderedDict\nimport torch.nn.functional as F\n\ndef f(x):\n"
    "    return F.softmax(x / math.sqrt(x.shape[-1]), dim=-1)",
    "class Extractor:\n    def __init__(self, model):\n        super().__init__()\n        self._handles = []\n"
    "    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n        self.close()",
    "class Net(nn.Module):\n    def forward(self, input):\n        return input.relu()",
    "ptlabs.check_close(torch.ones(2), torch.ones(2), name='my own check')",
    "result = getattr(model, 'weight')",
    "import torch.nn.functional as F\nfrom torch import nn\nimport torch as torch",
    "print('debug', x.shape)\n%time y = x + 1",
    "%%timeit\nF.relu(flatten(x))",
]

CHEATS = {
    "torch.testing.assert_close = lambda *a, **k: None": "changes torch...assert_close",
    "ptlabs.check_close = print": "changes ptlabs...check_close",
    "import ptlabs.grading as g\ng.canaries = print": "imports ptlabs.grading",
    "get_ipython().ast_transformers.append(t)": "uses get_ipython",
    "!rm gradebook.db": "uses get_ipython",
    "os.system('sqlite3 ../../../gradebook.db')": "uses os",
    "sys.modules['torch'] = None": "uses sys",
    "import sqlite3": "imports sqlite3",
    "from os import path": "imports os",
    "def sorted(x):\n    return x": "rebinds 'sorted'",
    "F = None": "rebinds 'F'",
    "import math as F": "rebinds 'F'",
    "from operator import is_not as isinstance": "rebinds 'isinstance'",
    "getattr(torch, '_C')": "getattr with a computed or private attribute name",
    "torch._C._set_grad_enabled(True)": "private attribute",
    "x.__class__.__bases__": "uses the attribute __class__",
    "globals()['ptlabs'] = None": "uses globals",
    "eval('1')": "uses eval",
    "class T(torch.Tensor):\n    def __torch_function__(cls, *a):\n        pass": "defines __torch_function__",
    "from torch.overrides import TorchFunctionMode": "imports torch.overrides",
    "torch.save(x, 'file')": "uses .save",
    "def g():\n    yield\ng().gi_frame.f_back": "uses .gi_frame",
    "In[-1]": "uses In",
    "class Fake(torch.Tensor):\n    pass": "a subclass of torch.Tensor",
    "%time import os": "in %time: imports os",
    "%%timeit\nsys.exit()": "in %timeit: uses sys",
    "%env X=1": "uses get_ipython",
    "def f():\n    global torch\n    torch = None": "rebinds 'torch'",
}


@pytest.mark.parametrize("source", HONEST)
def test_policy_lets_honest_code_through(source: str) -> None:
    assert scan_cell(source, 3, SETUP) == []


@pytest.mark.parametrize(("source", "evidence"), CHEATS.items())
def test_policy_names_what_a_cheat_uses(source: str, evidence: str) -> None:
    findings = [str(finding) for finding in scan_cell(source, 3, SETUP)]
    assert any(evidence in finding for finding in findings), findings
    assert all(finding.startswith("cell 4, line ") for finding in findings)  # cell index 3, counted from 1


def test_a_submodule_imported_by_a_locked_cell_binds_only_its_package() -> None:
    """`import torch.distributed` in a locked cell binds `torch` to torch, not to torch.distributed: the name
    `torch` stays usable in student cells, while `dist` (an alias of the forbidden part) stays banned."""
    setup = setup_module_names(["import torch.distributed\nimport torch.distributed as dist\nimport os.path"])
    assert setup == {"torch": "torch", "dist": "torch.distributed", "os": "os"}
    assert scan_cell("y = torch.ones(2)", 3, setup) == []
    assert any("dist" in str(f) for f in scan_cell("dist.all_reduce(t)", 3, setup))
    assert any("os" in str(f) for f in scan_cell("os.getcwd()", 3, setup))


def test_policy_leaves_code_that_does_not_parse_to_the_kernel() -> None:
    assert scan_cell("def broken(:\n", 0, SETUP) == []


def test_course_record_puts_back_changed_created_and_deleted_files(tmp_path: Path) -> None:
    (tmp_path / "gradebook.db").write_bytes(b"grades")
    (tmp_path / "submitted" / "bob").mkdir(parents=True)
    (tmp_path / "submitted" / "bob" / "lab.ipynb").write_text("bob's work")
    record = CourseRecord.take(tmp_path)
    (tmp_path / "gradebook.db").write_bytes(b"forged")
    (tmp_path / "submitted" / "bob" / "lab.ipynb").unlink()
    (tmp_path / "gradebook.db-journal").write_bytes(b"hot journal")
    (tmp_path / "autograde.log").write_text("the instructor's own log, written while grading")
    changes = record.changes()
    assert changes == ["gradebook.db", "gradebook.db-journal", "submitted/bob/lab.ipynb"]
    record.restore(changes)
    assert record.changes() == []
    assert (tmp_path / "gradebook.db").read_bytes() == b"grades"


def test_kernel_place_is_outside_the_course_with_a_private_home() -> None:
    place = KernelPlace.make({"HOME": "/root", "PYTHONSTARTUP": "/evil.py", "JPY_SESSION_NAME": "x"})
    try:
        assert place.folder.is_dir() and place.env["HOME"] != "/root"
        assert "PYTHONSTARTUP" not in place.env and "JPY_SESSION_NAME" not in place.env
        assert place.env["PTLABS_GRADING_KERNEL"] == place.marker
    finally:
        place.remove()
    assert not place.folder.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaper reads /proc")
def test_reaper_kills_a_detached_grandchild() -> None:
    # Run the scenario in a child process: it becomes a subreaper, starts a "kernel" that double-forks a
    # detached sleeper and exits, then reaps. The sleeper must be gone afterwards.
    script = f"""
import os, subprocess, sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent / 'src')!r})
from ptlabs.autograde.sandbox import become_subreaper, current_children, reap
assert become_subreaper()
before = current_children()
env = dict(os.environ, PTLABS_GRADING_KERNEL="m1")
kernel = subprocess.Popen([sys.executable, "-c",
    "import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    if os.fork() == 0:\\n        time.sleep(60)\\n"
    "    os._exit(0)\\n"], env=env)
kernel.wait()
time.sleep(0.3)
print(len(reap("m1", before)))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip()) >= 1, "the detached sleeper was not found"
    leftovers = subprocess.run(["pgrep", "-f", "time.sleep\\(60\\)"], capture_output=True, text=True).stdout
    assert leftovers == "", f"a detached process survived the reaper: {leftovers}"


def test_subreaper_and_children_are_harmless_to_call() -> None:
    assert isinstance(become_subreaper(), bool)
    assert os.getpid() not in current_children()
    start = time.perf_counter()
    assert reap("no-such-marker", current_children()) == []
    assert time.perf_counter() - start < 5


def test_report_lists_submissions_to_review(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ptlabs.autograde.report import main

    assert main(["lab01", "--course", str(tmp_path)]) == 2
    assert "no grading reports for lab01" in capsys.readouterr().err
    students = {"alice": {}, "mallory": {"withheld": "uses get_ipython"}, "trudy": {"tampered": ["test_f"]}}
    for student, extra in students.items():
        folder = tmp_path / "autograded" / student / "lab01"
        folder.mkdir(parents=True)
        (folder / "ptlabs-grading.json").write_text(json.dumps({"student": student, **extra}))
    assert main(["lab01", "--course", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "ok      alice",
        "REVIEW  mallory  grades withheld: uses get_ipython",
        "REVIEW  trudy  the grader's canaries found tampering in test_f",
        "3 submissions, 2 to review",
    ]


def test_grading_kernel_listens_on_private_sockets_not_ports() -> None:
    """Graders side by side must not race for TCP ports: the kernel's channels are socket files in its place."""
    import nbformat
    from nbclient import NotebookClient

    from ptlabs.autograde.execute import GuardedExecute

    nb = nbformat.v4.new_notebook()
    grader = GuardedExecute(kernel_name="python3")
    NotebookClient.__init__(grader, nb, None)
    place = KernelPlace.make(dict(os.environ))
    grader._socket_prefix = place.sockets
    try:
        # setup_kernel returns once the kernel has answered a kernel_info request over those sockets.
        with grader.setup_kernel(cwd=str(place.folder), env=place.env):
            info = grader.km.get_connection_info()
            sockets = sorted(path.name for path in place.sockets.parent.glob("ipc-*"))
    finally:
        place.remove()
    assert (info["transport"], info["ip"]) == ("ipc", str(place.sockets))
    assert len(sockets) == 5, sockets  # shell, iopub, stdin, control, heartbeat


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm kernels fork, and the reaper reads /proc")
def test_warm_kernel_is_forked_preloaded_in_its_place_and_leaves_nothing_behind() -> None:
    """A kernel forked by the warm server has torch already imported, runs in the student's folder and
    environment, and a process it detaches is killed and counted by the server's reap."""
    import nbformat
    from nbclient import NotebookClient

    from ptlabs.autograde.warm import WarmKernelManager, WarmKernels

    warm = WarmKernels(["torch"])
    warm.start()
    place = KernelPlace.make(dict(os.environ))
    source = (
        "import os, subprocess, sys\n"
        "print('torch' in sys.modules, os.getcwd(), os.environ['PTLABS_GRADING_KERNEL'])\n"
        "detached = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "print(detached.pid)"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    km = WarmKernelManager(kernel_name="python3")
    km.warm = warm
    try:
        NotebookClient(nb, km=km, timeout=60).execute(cwd=str(place.folder), env=place.env)
        preloaded, cwd, marker, sleeper = nb.cells[0].outputs[0]["text"].split()
        assert (preloaded, cwd, marker) == ("True", str(place.folder), place.marker)
        assert Path(f"/proc/{sleeper}").exists(), "the detached process should still run before the reap"
        assert warm.reap() == 1
        time.sleep(0.1)
        assert not Path(f"/proc/{sleeper}").exists() or "Z" in Path(f"/proc/{sleeper}/stat").read_text().split()[2]
    finally:
        warm.stop()
        place.remove()
    assert warm.process is not None and warm.process.returncode == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm kernels are Linux only")
def test_a_warm_server_that_cannot_start_leaves_grading_to_cold_kernels() -> None:
    from ptlabs.autograde.execute import GuardedExecute
    from ptlabs.autograde.warm import WarmKernels

    broken = WarmKernels(["ptlabs_no_such_module"])
    with pytest.raises(RuntimeError, match="did not start"):
        broken.start()
    broken.stop()
    assert GuardedExecute(preload=["ptlabs_no_such_module"])._warm_server() is None
