"""The records behind "what was this validated with": the refresh stamp and the execution-status table."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import nbformat
import pytest
import torch

from tests import conftest, validation
from tests.manifest import ROOT, load_manifest

sys.path.insert(0, str(ROOT / "book" / "_ext"))
from validation import ExecutionStatus  # noqa: E402  (book/_ext/validation.py, the Sphinx extension)


def test_stamp_records_torch_date_and_device() -> None:
    nb = nbformat.v4.new_notebook()
    validation.stamp(nb)
    assert nb.metadata["ptlabs"]["torch"] == torch.__version__
    assert nb.metadata["ptlabs"]["device"] == validation.device_name()
    assert nb.metadata["ptlabs"]["refreshed"] == validation.today()


def test_status_record_and_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    first, second, *_ = load_manifest()
    monkeypatch.setattr(conftest, "_cell_seconds", {first: 12.34, second: 3.0})
    monkeypatch.setattr(conftest, "_cpu_seconds", {first: 20.06, second: 2.5})
    monkeypatch.setattr(conftest, "_cell_outcomes", {first: Counter(passed=30, skipped=1), second: Counter(passed=2, failed=1)})
    path = validation.write_status(conftest._status(), tmp_path / "status.json")
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["torch"] == torch.__version__
    assert record["notebooks"][first]["result"] == "passed" and record["notebooks"][second]["result"] == "failed"

    manifest = {p: {} for p in load_manifest()}
    lines = ExecutionStatus.table(record, manifest)
    rows = {line.split("|")[1].strip(" `"): line for line in lines if line.startswith("| `")}
    assert set(rows) == set(manifest), "every notebook of the manifest gets a row"
    budget = load_manifest()[first].budget_s
    assert f"| passed | 30 / 0 / 1 | 20.1 s | {budget:.0f} s | 12.3 s |" in rows[first]
    assert "| failed | 2 / 1 / 0 | 2.5 s |" in rows[second] and rows[second].endswith("| 3.0 s |")
    assert all("not run in the last test run" in rows[p] for p in manifest if p not in (first, second))
