"""One execution per notebook: nbval's strict comparison runs in the Colab-like kernel, with other CPU kernels.

`make test` executes every chapter and lab source once, and that one run serves every check that used to
need two:

* **Run All**: nbval runs every cell in order; the hygiene rule `runs_all_without_tags` forbids the tags
  that nbval would honour and a learner's Run All would not, so nbval's run *is* a Run All;
* **the Colab-like environment**: the kernel lives in a fresh venv holding only what Colab preinstalls,
  and the notebooks' bootstrap cell installed ``ptlabs[book]`` there (tests/colab_env.py);
* **other CPU kernels than the refresh**: the kernel's environment forces the settings of
  tests/kernels.py (AVX2 on an AVX-512 machine, ATen's portable kernels otherwise, one thread), so an
  output that depends on the kernels fails here, on the author's machine;
* **no process left behind**: when a notebook's kernel has shut down, no process it started may live;
* strict comparison and the time budgets (tests/conftest.py) as before.

Enabled by ``--colab-like`` (the Makefile passes it). The controller (or a plain run) builds the
environment in the background while the unit tests run (a pytest started inside such a run, as
tests/test_colab_plugin.py does, reuses it); each xdist worker writes its own kernel spec,
whose environment carries a mark of that worker, so the leftover check after one notebook sees only the
processes that notebook's kernel started.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Generator
from pathlib import Path

import pytest

from tests import colab_env
from tests.kernels import describe, validation_env
from tests.manifest import ROOT
from tests.notebook_tools import RUN_MARK, describe_leftovers, reap_leftovers

ROOT_VARIABLE = "PTLABS_COLAB_ROOT"
RESULT = "result.json"
BUILD_TIMEOUT_S = 900

_build: subprocess.Popen[bytes] | None = None
_mark: str | None = None
kernel_name: str | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--colab-like", action="store_true",
        help="run notebooks in a fresh Colab-like venv kernel, with other CPU kernels than `make refresh`",
    )


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    global _build, _mark, kernel_name
    if not config.getoption("colab_like", default=False) or not config.getoption("nbval", default=False):
        return
    if config.getoption("nbval_current_env"):
        raise pytest.UsageError("--colab-like runs notebooks in their own kernel: drop --nbval-current-env")
    reuse = os.environ.get(ROOT_VARIABLE) and (Path(os.environ[ROOT_VARIABLE]) / RESULT).exists()
    if not _is_worker(config) and not reuse:  # the controller, or a plain run: build once, in the background
        root = Path(tempfile.mkdtemp(prefix="ptlabs-colab-"))
        os.environ[ROOT_VARIABLE] = str(root)  # inherited by the xdist workers started after this hook
        log = open(root / "build.log", "wb")  # noqa: SIM115  (the child writes it; closed at exit)
        _build = subprocess.Popen([sys.executable, "-m", "tests.colab_plugin", str(root)], cwd=ROOT,
                                  stdout=log, stderr=subprocess.STDOUT)
    root = Path(os.environ[ROOT_VARIABLE])
    worker = config.workerinput["workerid"] if _is_worker(config) else "main"
    _mark = uuid.uuid4().hex
    name = kernel_name = f"colab-like-{worker}-{os.getpid()}"  # a pytest run inside this one gets its own
    venv = root / "venv"
    env = {
        **validation_env(),
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),  # cold, as on a fresh machine
        RUN_MARK: _mark,
        "VIRTUAL_ENV": str(venv),
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PTLABS_PIP_SOURCE": f"{root / 'checkout'}[book]",
    }
    colab_env.write_kernel_spec(root / "jupyter", name, venv / "bin" / "python", env)
    os.environ["JUPYTER_PATH"] = str(root / "jupyter")
    config.option.nbval_kernel_name = name


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller removes the environment it built (a killed run leaves it in the temp folder)."""
    if _build is None:
        return
    if _build.poll() is None:
        _build.kill()
        _build.wait()
    shutil.rmtree(os.environ.pop(ROOT_VARIABLE), ignore_errors=True)


def _wait_for_the_environment() -> None:
    """Block until the controller's build finished; fail with its log when it did not succeed."""
    result = Path(os.environ[ROOT_VARIABLE]) / RESULT
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    while not result.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the Colab-like environment was not built in {BUILD_TIMEOUT_S} s", pytrace=False)
        time.sleep(0.5)
    outcome = json.loads(result.read_text(encoding="utf-8"))
    if not outcome["ok"]:
        pytest.fail(f"the Colab-like environment could not be built:\n{outcome['error']}", pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if _mark is not None and item.nodeid.split("::")[0].endswith(".ipynb"):
        _wait_for_the_environment()  # before nbval starts the notebook's kernel


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """After a notebook's last cell, nbval stops its kernel; then nothing that kernel started may survive."""
    result = yield
    path = item.nodeid.split("::")[0]
    last_cell = nextitem is None or nextitem.nodeid.split("::")[0] != path
    if _mark is not None and path.endswith(".ipynb") and last_cell:
        left = reap_leftovers(f"{RUN_MARK}={_mark}")
        if left:
            raise AssertionError(f"{path}: {describe_leftovers(left)}")
    return result


def pytest_report_header(config: pytest.Config) -> str | None:
    if _mark is None or _is_worker(config):
        return None
    try:
        base = colab_env.choose_base().describe()
    except AssertionError as exc:  # the build fails with the same words, in every notebook
        base = f"no usable base ({exc})"
    return f"notebooks: one run each, in a fresh Colab-like venv with {base}; {describe(validation_env())}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The notebooks' pip calls must not have replaced what the environment was built with (torch above all)."""
    if _build is None:
        return
    _build.wait()
    result = Path(os.environ[ROOT_VARIABLE]) / RESULT
    if not result.exists() or not json.loads(result.read_text(encoding="utf-8"))["ok"]:
        return  # the notebooks already failed with the build's error
    try:
        colab_env.check_the_bootstrap_installed_only_ptlabs(colab_env.FreshVenv.reopen(Path(os.environ[ROOT_VARIABLE])))
    except AssertionError as exc:
        print(f"\nthe notebooks changed the Colab-like environment: {exc}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _build_environment(root: Path) -> int:
    """The background build: the environment, then the result file every worker waits for."""
    try:
        colab_env.build(root, colab_env.choose_base())
    except Exception as exc:  # any failure is reported by every notebook, with this text
        outcome = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    else:
        outcome = {"ok": True, "error": ""}
    (root / RESULT).write_text(json.dumps(outcome), encoding="utf-8")
    return 0 if outcome["ok"] else 1


if __name__ == "__main__":
    sys.exit(_build_environment(Path(sys.argv[1])))
