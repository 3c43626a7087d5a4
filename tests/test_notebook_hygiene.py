"""Every committed notebook follows the hygiene rules of tests/hygiene.py, and each rule can fail."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import nbformat
import pytest

from tests import hygiene
from tests.manifest import ROOT, load_manifest, notebooks_on_disk

MANIFEST = load_manifest()


def test_manifest_lists_exactly_the_notebooks_on_disk() -> None:
    assert sorted(MANIFEST) == notebooks_on_disk(), "add new notebooks to tests/notebooks.toml (and remove old ones)"


@pytest.fixture(params=sorted(MANIFEST), scope="module")
def notebook(request: pytest.FixtureRequest) -> tuple[str, nbformat.NotebookNode]:
    nb = nbformat.read(ROOT / request.param, as_version=4)
    nbformat.validate(nb)
    return request.param, nb


@pytest.mark.parametrize("rule", hygiene.RULES, ids=lambda rule: rule.__name__)
def test_committed_notebook_follows(rule: hygiene.Rule, notebook: tuple[str, nbformat.NotebookNode]) -> None:
    path, nb = notebook
    problems = rule(nb)
    assert not problems, f"{path}:\n  " + "\n  ".join(problems)


# ---- each rule rejects the notebook it exists to catch --------------------------------------------------


def _cell(source: str, count: int | None, outputs: list | None = None, tags: list[str] | None = None):
    cell = nbformat.v4.new_code_cell(source, execution_count=count, outputs=outputs or [])
    if tags:
        cell.metadata["tags"] = tags
    return cell


def _notebook(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _stream(text: str, name: str = "stdout") -> nbformat.NotebookNode:
    return nbformat.v4.new_output("stream", name=name, text=text)


ERROR = nbformat.v4.new_output("error", ename="ValueError", evalue="boom", traceback=[])
WIDE_FIGURE = nbformat.v4.new_output(
    "display_data",
    data={"image/png": base64.b64encode(b"\x89PNG\r\n\x1a\n" + struct.pack(">I4sII", 13, b"IHDR", 1300, 330)).decode()},
)
CLAIMS_HEADER = "## 2. Claims checked in this chapter\n\n| claim (source) | verdict | shown in |\n|---|---|---|\n"


def _claims(row: str, header: str = CLAIMS_HEADER) -> nbformat.NotebookNode:
    return _notebook(nbformat.v4.new_markdown_cell("## 1. Demo"), nbformat.v4.new_markdown_cell(header + row))


CLEAN = _claims("| `x` is 1 (folklore) | **True.** It is. | §1 |")
CLEAN.cells += [_cell("print(1)", 1, [_stream("1\n")]), _cell("x = 2", 2)]
CLEAN.metadata["ptlabs"] = {"torch": "2.13.0+cpu", "refreshed": "2026-11-29", "device": "cpu"}

BAD_NOTEBOOKS = {
    "out of order": (hygiene.executed_top_to_bottom, _notebook(_cell("a", 2), _cell("b", 1)), "out of order"),
    "never executed": (hygiene.executed_top_to_bottom, _notebook(_cell("a", 1), _cell("b", None)), "never executed"),
    "error": (hygiene.runs_all_without_tags, _notebook(_cell("a", 1, [ERROR])), "expect_error"),
    "tag Run All ignores": (
        hygiene.runs_all_without_tags,
        _notebook(_cell("a", 1, [_stream("1\n")], tags=["gpu"])),
        "which Run All ignores",
    ),
    "stderr": (hygiene.no_stray_stderr, _notebook(_cell("a", 1, [_stream("warn\n", "stderr")])), "stderr"),
    "no outputs": (hygiene.outputs_present, _notebook(_cell("a", 1)), "no outputs"),
    "wide output": (hygiene.outputs_fit_the_page, _notebook(_cell("a", 1, [_stream("x" * 89 + "\n")])), "over 88"),
    "wide figure": (hygiene.figures_fit_the_page, _notebook(_cell("a", 1, [WIDE_FIGURE])), "1300 px wide"),
    "check in solution": (
        hygiene.checks_apart_from_solutions,
        _notebook(
            nbformat.v4.new_markdown_cell("```{solution-start} ex\n```"),
            _cell("def f(): pass\ncheck(f)", 1, [_stream("✅\n")], ["nbval-check-output"]),
            nbformat.v4.new_markdown_cell("```{solution-end}\n```"),
        ),
        "inside a solution block",
    ),
    "check defines": (
        hygiene.checks_apart_from_solutions,
        _notebook(_cell("def f(): pass\ncheck(f)", 1, [_stream("✅\n")], ["nbval-check-output"])),
        "defines a function",
    ),
    "seed name": (hygiene.cites_the_sources_page, _notebook(nbformat.v4.new_markdown_cell("Seed 002 §3.1")), "Seed 002"),
    "no stamp": (hygiene.stamped_by_refresh, _notebook(_cell("a", 1)), "metadata.ptlabs lacks"),
    "numbering": (
        hygiene.sections_numbered,
        _notebook(nbformat.v4.new_markdown_cell("## 1. One\n\n## Three")),
        "'## 2. ...'",
    ),
    "no claims section": (
        hygiene.claims_table_follows_the_schema,
        _notebook(nbformat.v4.new_markdown_cell("## 1. Demo")),
        "found 0",
    ),
    "claims header": (
        hygiene.claims_table_follows_the_schema,
        _claims("| x | §1 | **True.** |", CLAIMS_HEADER.replace("verdict | shown in", "shown in | verdict")),
        "the table's header",
    ),
    "verdict word": (
        hygiene.claims_table_follows_the_schema, _claims("| x (folklore) | **Half true.** ... | §1 |"), "must start with"
    ),
    "claim without section": (
        hygiene.claims_table_follows_the_schema, _claims("| x (folklore) | **True.** | section 1 |"), "names no section"
    ),
    "claim in missing section": (
        hygiene.claims_table_follows_the_schema, _claims("| x (folklore) | **False.** | §1, §7 |"), "sections [7]"
    ),
    "unbalanced": (
        hygiene.exercises_balanced_verdicts_printed,
        _notebook(nbformat.v4.new_markdown_cell("```{exercise-start}\n:label: x\n```")),
        "1 exercise-start but 0",
    ),
    "silent verdict": (
        hygiene.exercises_balanced_verdicts_printed,
        _notebook(_cell("check()", 1, [_stream("ok\n")], ["nbval-check-output"])),
        "no '✅'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_NOTEBOOKS))
def test_rule_rejects(case: str) -> None:
    rule, nb, expected = BAD_NOTEBOOKS[case]
    problems = rule(nb)
    assert any(expected in problem for problem in problems), f"{rule.__name__} missed {case!r}: {problems}"


@pytest.mark.parametrize("rule", hygiene.RULES, ids=lambda rule: rule.__name__)
def test_rule_accepts_a_clean_notebook(rule: hygiene.Rule) -> None:
    assert rule(CLEAN) == []


def test_stderr_is_allowed_where_it_is_the_lesson() -> None:
    nb = _notebook(_cell("a", 1, [_stream("warn\n", "stderr")], [hygiene.STDERR_TAG]))
    assert hygiene.no_stray_stderr(nb) == []


def test_stray_nbconvert_outputs_are_not_notebooks_of_the_book(tmp_path: Path) -> None:
    """`jupyter nbconvert --execute` leaves `x.nbconvert.ipynb` copies: not notebooks to list."""
    stray = ("notebooks/01_x.nbconvert.ipynb", "labs/source/lab/lab.nbconvert.ipynb")
    for name in ("notebooks/01_x.ipynb", *stray):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}", encoding="utf-8")
    assert notebooks_on_disk(tmp_path) == ["notebooks/01_x.ipynb"]
