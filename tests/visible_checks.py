"""A lab's visible checks as a learner working alone meets them, with wrong answers in place of one part.

A learner has the release notebook: its set-up, the parts and each part's visible check, and a ✅
that must mean something. ``python -m tests.visible_checks LAB`` runs, in this one process, the lab's
source cells as the release has them (hidden tests left out): first with the reference answers,
every visible check in one run, as a learner's Run All; then once per wrong answer in
tests/fixtures/visible/LAB/ (and per graded fixture that its graded.txt names: the same mistake,
kept once) with that answer in place of its part, stopping at that part's visible check.
``python -m tests.visible_checks LAB [LAB ...]`` prints one JSON object per line,
``{"lab": LAB, "results": {...}}``: ``reference`` and each fixture's file name -> the first failure
(``Type: message``), or null when every visible check passed; or ``{"lab": LAB, "error": "..."}``
when the lab could not be run at all.

One process per lab, forked from one that imported torch and the labs' helpers once (about two
seconds of CPU a lab on the 2-core machine): no lab's state reaches another, and within a lab the
set-up cell re-seeds and resets what a run changes. Where ``os.fork`` is missing, each lab runs in a
process of its own, started afresh.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import nbformat

from tests import lab_tools

VISIBLE_FIXTURES = lab_tools.FIXTURES / "visible"


def first_failure(nb: nbformat.NotebookNode, part: str | None, answer: str | None) -> str | None:
    """Run the notebook's cells up to ``part``'s visible check, ``answer`` replacing that part; ``part`` None:
    every cell and every visible check, in order, as a learner's Run All does."""
    namespace: dict[str, object] = {}
    for cell in nb.cells:
        meta = lab_tools.nbgrader_meta(cell)
        grade_id = meta.get("grade_id", "")
        if cell.cell_type != "code" or grade_id == "bootstrap":  # ptlabs is installed here
            continue
        if part is not None and meta.get("grade") and grade_id != f"test_{part}":  # other parts' checks
            continue
        source = answer if answer is not None and grade_id == part else cell.source
        source = source.split(lab_tools.BEGIN_HIDDEN)[0]
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"<{grade_id}>", "exec"), namespace)  # noqa: S102  (our own lab)
        except BaseException as exc:  # noqa: BLE001  (any failure is the verdict)
            return f"{type(exc).__name__}: {exc}"
        if grade_id == f"test_{part}":
            return None
    if part is None:
        return None
    raise lab_tools.LabToolError(f"no visible check test_{part} in the lab")


def visible_fixtures(lab: str) -> list[lab_tools.Fixture]:
    """The lab's wrong answers for its visible checks: its own files, then the graded fixtures listed."""
    listed = VISIBLE_FIXTURES / lab / "graded.txt"
    names = [line.strip() for line in listed.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")] if listed.exists() else []
    graded = {fixture.path.stem: fixture for fixture in lab_tools.fixtures(lab)}
    missing = sorted(set(names) - set(graded))
    if missing:
        raise lab_tools.LabToolError(f"{listed}: no graded fixture named {', '.join(missing)}")
    return lab_tools.fixtures(lab, VISIBLE_FIXTURES) + [graded[name] for name in names]


def run(lab: str) -> dict[str, str | None]:
    (path,) = lab_tools.source_notebooks(lab)
    nb = nbformat.read(path, as_version=4)
    results = {"reference": first_failure(nb, None, None)}  # the answers of the source: one run, every check
    for fixture in visible_fixtures(lab):
        results[fixture.path.name] = first_failure(nb, fixture.grade_id, fixture.source())
    for fixture in lab_tools.alternatives(lab):  # right in another way: every visible check must pass too
        results[f"{lab_tools.RIGHT}/{fixture.path.name}"] = first_failure(nb, fixture.grade_id, fixture.source())
    return results


def _outcome_line(lab: str) -> str:
    """One JSON line: the lab's results, or why it could not be run."""
    try:
        return json.dumps({"lab": lab, "results": run(lab)})
    except Exception:  # noqa: BLE001  (the test reports it for this lab alone)
        return json.dumps({"lab": lab, "error": traceback.format_exc(limit=5)})


def _forked(lab: str) -> str:
    """The lab's line, computed in a forked child: what its cells change dies with the child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        os.close(read)
        try:
            with os.fdopen(write, "w", encoding="utf-8") as out:
                out.write(_outcome_line(lab))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, encoding="utf-8") as inp:
        line = inp.read()
    _, status = os.waitpid(pid, 0)
    return line or json.dumps({"lab": lab, "error": f"its process ended without a result (wait status {status})"})


def each_lab(labs: list[str]) -> Iterator[str]:
    """Every lab's JSON line, each from a process of its own."""
    if not hasattr(os, "fork"):
        for lab in labs:
            ran = subprocess.run([sys.executable, "-m", "tests.visible_checks", lab], capture_output=True, text=True)
            yield ran.stdout.strip().splitlines()[-1] if ran.stdout.strip() else json.dumps(
                {"lab": lab, "error": ran.stderr[-3000:]})
        return
    import ptchecks  # noqa: F401  (imported once, before the forks; the set-up cells import them)
    import ptlabs  # noqa: F401
    import torch  # noqa: F401

    for lab in labs:
        yield _forked(lab)


if __name__ == "__main__":
    if len(sys.argv) == 2:
        print(_outcome_line(sys.argv[1]))
    else:
        for line in each_lab(sys.argv[1:]):
            print(line, flush=True)
