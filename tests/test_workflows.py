"""The GitHub Actions workflows are valid and run the README's commands where the README says.

actionlint (a pinned wheel in requirements.txt) checks syntax, expressions, action inputs and runner
labels; the GPU runner's custom label is declared in `.github/actionlint.yaml`. When `shellcheck` is
on PATH, actionlint also lints every `run:` script with it, so the steps are kept shellcheck-clean.
The structural tests below pin what actionlint cannot know: which triggers and commands each
workflow must keep.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.manifest import ROOT, supported_pythons

ACTIONLINT = Path(sys.executable).with_name("actionlint")
WORKFLOWS = ROOT / ".github" / "workflows"


def _actionlint(*paths: str) -> subprocess.CompletedProcess[str]:
    actionlint = str(ACTIONLINT) if ACTIONLINT.exists() else shutil.which("actionlint")
    assert actionlint, "actionlint is missing; it is in requirements.txt (`make test` installs it)"
    command = [actionlint, "-no-color", *paths]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _load(name: str) -> dict[str, Any]:
    path = WORKFLOWS / name
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    """The `on:` mapping. YAML 1.1 reads the bare key `on` as the boolean True."""
    triggers = workflow.get("on", workflow.get(True))
    if isinstance(triggers, (str, list)):
        triggers = dict.fromkeys([triggers] if isinstance(triggers, str) else triggers)
    assert isinstance(triggers, dict), f"no `on:` triggers in {workflow.get('name')}"
    return triggers


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def _runs(workflow: dict[str, Any]) -> list[str]:
    return [step["run"] for step in _steps(workflow) if "run" in step]


def _uses(workflow: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [step for step in _steps(workflow) if step.get("uses", "").split("@")[0] == action]


def test_actionlint_passes_on_every_workflow() -> None:
    workflows = sorted(str(p.relative_to(ROOT)) for p in WORKFLOWS.glob("*.yml"))
    assert workflows, "no workflows under .github/workflows"
    result = _actionlint(*workflows)
    assert result.returncode == 0, f"actionlint:\n{result.stdout[-4000:]}{result.stderr[-2000:]}"


def test_actionlint_can_fail(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  a:\n    steps:\n      - run: echo ${{ github.no_such_context }}\n",
        encoding="utf-8",
    )
    result = _actionlint(str(broken))
    assert result.returncode == 1, result.stdout + result.stderr
    assert '"runs-on" section is missing' in result.stdout, result.stdout


@pytest.mark.parametrize("name", ["ci.yml", "gpu.yml", "pages.yml"])
def test_every_job_has_a_timeout(name: str) -> None:
    """A hung notebook kernel must not hold a runner for GitHub's default six hours."""
    jobs = _load(name)["jobs"]
    assert all("timeout-minutes" in job for job in jobs.values()), f"{name}: a job has no timeout"


def test_ci_runs_make_test_on_every_push_and_pull_request() -> None:
    ci = _load("ci.yml")
    assert {"push", "pull_request"} <= set(_triggers(ci))
    assert ci["permissions"] == {"contents": "read"}
    assert any(run.strip() == "make test" for run in _runs(ci))
    (setup_python,) = _uses(ci, "actions/setup-python")
    assert setup_python["with"] == {
        "python-version": "${{ matrix.python }}",
        "cache": "pip",
        "cache-dependency-path": "requirements.txt",
    }
    (job,) = ci["jobs"].values()
    assert job["strategy"]["matrix"]["python"] == supported_pythons(), "CI runs every Python requires-python admits"
    assert "PIP_EXTRA_INDEX_URL" not in job.get("env", {}), "the set-up picks torch's build (tests/torch_build.py)"
    assert job["runs-on"] == "ubuntu-latest"
    assert job["env"]["CHROMIUM"] == "/usr/bin/google-chrome", "Ubuntu's chromium is a snap"
    assert any("graphviz" in run for run in _runs(ci))


def test_gpu_runs_make_test_gpu_on_the_self_hosted_gpu_runner() -> None:
    gpu = _load("gpu.yml")
    assert {"workflow_dispatch", "schedule"} <= set(_triggers(gpu))
    assert _triggers(gpu)["schedule"], "the schedule needs a cron entry"
    (job,) = gpu["jobs"].values()
    assert job["runs-on"] == ["self-hosted", "linux", "x64", "gpu"]
    assert any(run.strip() == "make test-gpu" for run in _runs(gpu))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "self-hosted, linux, x64, gpu" in readme, "README: how to register the GPU runner"


def test_pages_builds_main_and_deploys_with_the_pages_actions() -> None:
    pages = _load("pages.yml")
    assert "main" in _triggers(pages)["push"]["branches"]
    assert pages["concurrency"]["group"] == "pages"
    runs = [run.strip() for run in _runs(pages)]
    assert "make book" in runs and "make test" in runs, "the site shows the status of the run that validated it"
    assert runs.index("make test") < runs.index("make book")
    (upload,) = _uses(pages, "actions/upload-pages-artifact")
    assert upload["with"]["path"] == "_build/html"
    assert _uses(pages, "actions/deploy-pages")
    jobs = pages["jobs"].values()
    (deploy,) = [job for job in jobs if "github-pages" in str(job.get("environment"))]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}


def test_the_workflows_install_the_fonts_the_makefile_requires() -> None:
    """The runners' user is not root, so the Makefile cannot install them there (tests/pdf_edition.py: FONT_PACKAGES)."""
    from tests.pdf_edition import FONT_PACKAGES

    required = re.findall(r"\$\(call require_font,([0-9a-f]+),([\w.+-]+)\)", (ROOT / "Makefile").read_text())
    assert sorted(required) == sorted((f"{ord(char):x}", package) for char, package in FONT_PACKAGES.items())
    for name in ("ci.yml", "pages.yml"):
        installs = " ".join(run for run in _runs(_load(name)) if "apt-get install" in run)
        lacking = [package for _, package in required if package not in installs.split()]
        assert not lacking, f"{name} does not install {lacking}"
