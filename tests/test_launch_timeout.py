"""Chapter 06's `launch` helper: no worker outlives the launcher's timeout under torchrun.

torchrun's agent starts every worker in a session of its own (``start_new_session=True``), so killing
the launcher, or its process group, leaves the workers running. The helper the chapter teaches must end
them too. This test takes the helper's code from the notebook itself (the cell that defines ``launch``,
and the imports it uses from the chapter's import cell), so it tests what the book teaches.

The job: two torchrun workers that write their pids to files and sleep forever; rank 0 also ignores
SIGTERM, so only a SIGKILL ends it (a worker stuck in C code, or one whose handler never returns).
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from tests.manifest import ROOT

pytestmark = pytest.mark.mostly_waits  # 10 s of sleeping workers: handed out early (tests/run_order.py)

NOTEBOOK = ROOT / "notebooks" / "06_distributed_export.ipynb"
#: torchrun and both workers start within the first on a 2-core machine; the second is for a very busy one
TIMEOUTS_S = (10, 30)

SLEEPER = """\
import os
import signal
import time
from pathlib import Path

rank = int(os.environ["RANK"])
if rank == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends this one
Path(f"sleeper{rank}.pid").write_text(str(os.getpid()))
while True:
    time.sleep(60)
"""


def _names_used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _bound_names(node: ast.Import | ast.ImportFrom) -> set[str]:
    return {(alias.asname or alias.name).split(".")[0] for alias in node.names}


def helper_source(notebook: Path = NOTEBOOK) -> str:
    """The notebook's ``TORCHRUN``, ``launch`` and its helpers, after the chapter's imports that they use."""
    cells = [  # the code cells, less the Colab bootstrap and the %%writefile scripts
        cell.source for cell in nbformat.read(notebook, as_version=4).cells
        if cell.cell_type == "code" and not cell.source.lstrip().startswith("%")
        and "bootstrap" not in cell.metadata.get("tags", [])
    ]
    trees = [ast.parse(source) for source in cells]
    helper = next(
        tree for tree in trees
        if any(isinstance(node, ast.FunctionDef) and node.name == "launch" for node in tree.body)
    )
    wanted = [  # the cell's functions (launch and what it calls) and TORCHRUN, not its demo
        node for node in helper.body
        if isinstance(node, ast.FunctionDef)
        or (isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "TORCHRUN" for t in node.targets))
    ]
    used = set().union(*(_names_used(node) for node in wanted))
    imports = [
        node for tree in trees for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom)) and _bound_names(node) & used
    ]
    return ast.unparse(ast.Module(body=[*imports, *wanted], type_ignores=[]))


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running sleeper (a zombie has ended; a reused pid is another program)."""
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and any("sleeper.py" in part for part in process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _kill_sleepers(pid_files: list[Path]) -> None:
    for path in pid_files:
        if path.exists():
            if _alive(pid := int(path.read_text())):
                os.kill(pid, signal.SIGKILL)
            path.unlink()


def test_a_timeout_ends_every_torchrun_worker(tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    namespace: dict[str, object] = {"WORK": str(tmp_path)}
    exec(compile(helper_source(), f"{NOTEBOOK.name}: launch", "exec"), namespace)
    launch, torchrun = namespace["launch"], namespace["TORCHRUN"]
    pid_files = [tmp_path / f"sleeper{rank}.pid" for rank in (0, 1)]
    try:
        for timeout in TIMEOUTS_S:  # a longer one only when the workers had not started
            _kill_sleepers(pid_files)  # those of a first try where only one had started
            started = time.monotonic()
            with pytest.raises(subprocess.TimeoutExpired):
                launch(*torchrun, "sleeper.py", timeout=timeout)
            took = time.monotonic() - started
            if all(path.exists() for path in pid_files):
                break
        else:
            pytest.fail(f"the workers had not started within {TIMEOUTS_S[-1]} s")
        pids = [int(path.read_text()) for path in pid_files]
        deadline = time.monotonic() + 2  # SIGKILL is delivered asynchronously: allow it a moment
        while any(map(_alive, pids)) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = [f"rank {rank} (pid {pid})" for rank, pid in enumerate(pids) if _alive(pid)]
        assert not survivors, f"launch returned after {took:.1f} s and left workers running: {survivors}"
    finally:  # whatever the helper did, leave nothing behind
        _kill_sleepers(pid_files)


def test_the_helper_is_read_from_the_notebook() -> None:
    source = helper_source()
    assert "def launch(" in source and "TORCHRUN =" in source
    compile(source, "launch", "exec")
