"""What each notebook was validated with, recorded where the website can show it.

Two records, both written by the tools and read by book/_ext/validation.py at build time:

* ``make refresh`` stamps each notebook's metadata (``metadata.ptlabs``) with the torch version, the
  date (UTC) and the device its committed outputs come from;
* every pytest run that validates notebooks writes ``_build/execution-status.json``: per notebook, the
  kernel time, the budget and the outcome of its cells, with the run's date and torch version.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
from pathlib import Path

import nbformat

from tests.manifest import ROOT

STATUS_FILE = ROOT / "_build" / "execution-status.json"


def device_name() -> str:
    """The accelerator this process would use ("cuda: NVIDIA H200", "mps"), or "cpu".

    torch is imported here, not with the module: every pytest loads this module (tests/conftest.py),
    the short ones a test starts inside `make test` included, and most never write a record.
    """
    import torch

    if not torch.accelerator.is_available():
        return "cpu"
    device = torch.accelerator.current_accelerator()
    if device is not None and device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name()}"
    return str(device)


def today() -> str:
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def stamp(nb: nbformat.NotebookNode) -> None:
    """Record in the notebook what its outputs were produced with."""
    import torch

    nb.metadata["ptlabs"] = {"torch": torch.__version__, "refreshed": today(), "device": device_name()}


def write_status(notebooks: dict[str, dict[str, object]], path: Path = STATUS_FILE) -> Path:
    """Write the execution-status record of one test run."""
    import torch

    record = {
        "date": today(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device_name(),
        "notebooks": notebooks,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    return path
