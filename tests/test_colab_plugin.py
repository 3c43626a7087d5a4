"""The one notebook run of `make test` really runs with other CPU kernels, in the Colab-like venv, and reaps.

These tests drive the session's own Colab-like environment (tests/colab_plugin.py), so they run when the
suite runs with ``--colab-like`` (as `make test` does) and are skipped, saying why, otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from ptgrader.kernel_client import RepollingKernelManager

from tests import colab_plugin
from tests.kernels import AVX2, ONE_THREAD, PORTABLE, SMOKE_TIMING, native_capability, validation_env
from tests.manifest import ROOT
from tests.notebook_tools import RUN_MARK, processes_marked, reap_leftovers


def test_validation_kernels_are_never_the_native_ones() -> None:
    for native, isa in (("AVX512", AVX2), ("AVX512_BF16", AVX2), ("AVX2", PORTABLE)):
        env = validation_env(native)
        assert env.items() >= {**isa, **ONE_THREAD, **SMOKE_TIMING}.items()  # short timings: their outputs are ignored
        # Inductor's cache ignores the ISA: the validation compiles into its own cache per setting
        assert env["TORCHINDUCTOR_CACHE_DIR"].endswith(f"torchinductor-validation-{isa['ATEN_CPU_CAPABILITY']}")
    assert validation_env("DEFAULT")["ATEN_CPU_CAPABILITY"] == "default"


@pytest.fixture(scope="module")
def colab_kernel() -> str:
    if colab_plugin._mark is None:
        pytest.skip("run with --colab-like (make test does): the test uses the session's Colab-like kernel")
    colab_plugin._wait_for_the_environment()
    return colab_plugin.kernel_name


def _notebook(*sources: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    return nb


def _run(nb: nbformat.NotebookNode, kernel: str, folder: Path) -> None:
    """Run the notebook's cells in ``kernel``, in ``folder``."""
    NotebookClient(nb, kernel_name=kernel, timeout=300, kernel_manager_class=RepollingKernelManager,
                   resources={"metadata": {"path": str(folder)}}).execute()


PROBE = ("import sys, torch\n"
         "print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())\n"
         "print(sys.prefix)")


def test_the_kernel_runs_other_cpu_kernels_in_the_fresh_venv(colab_kernel: str, tmp_path: Path) -> None:
    nb = _notebook(PROBE)
    _run(nb, colab_kernel, tmp_path)
    capability, threads, prefix = nb.cells[0].outputs[0].text.split()
    assert capability != native_capability() and threads == "1", nb.cells[0].outputs[0].text
    assert Path(prefix) == Path(os.environ[colab_plugin.ROOT_VARIABLE]) / "venv"


def test_an_output_that_depends_on_the_cpu_kernels_fails_the_validation(colab_kernel: str, tmp_path: Path) -> None:
    """Committed natively (as `make refresh` does), compared in the validation kernel: nbval must fail."""
    nb = _notebook("import torch\nprint(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())")
    _run(nb, "python3", tmp_path)
    path = tmp_path / "fragile.ipynb"
    nbformat.write(nb, path)
    command = [sys.executable, "-m", "pytest", "-q", "-c", str(ROOT / "pyproject.toml"), "-p", "no:xdist",
               "--nbval", "--colab-like", str(path)]
    strict = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert strict.returncode == 1 and "1 failed" in strict.stdout, strict.stdout[-3000:]
    native = subprocess.run([*command[:-2], "--nbval-current-env", str(path)], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert native.returncode == 0, native.stdout[-3000:]  # natively it matches: the kernels made the difference


def test_a_process_left_by_a_notebook_kernel_is_found_and_killed(colab_kernel: str, tmp_path: Path) -> None:
    nb = _notebook("import subprocess, sys\n"
                   "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)")
    _run(nb, colab_kernel, tmp_path)
    mark = f"{RUN_MARK}={colab_plugin._mark}"
    left = reap_leftovers(mark, grace_s=1.0)
    assert any("time.sleep(120)" in command for command in left.values()), left
    assert not processes_marked(mark)
