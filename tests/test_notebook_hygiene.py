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
CLAIMS_HEADER = (
    "## 2. Claims checked in this chapter\n\n| key | claim (source) | verdict | settled by | shown in |\n|---|---|---|---|---|\n"
)


def _claims(row: str, header: str = CLAIMS_HEADER) -> nbformat.NotebookNode:
    return _notebook(nbformat.v4.new_markdown_cell("## 1. Demo"), nbformat.v4.new_markdown_cell(header + row))


_QUIET = {"256": 1e-3, "512": 7.5e-3}
_STALLED = {"256": 20e-3, "512": 21e-3}


def _timing(*, times: dict[str, list[float]] | None = None, checks: list[dict[str, float]] | None = None):
    """A ptlabs.Comparison as a notebook would print it: quiet and consistent unless told otherwise."""
    import ptlabs

    times = times or {"a": [1e-3] * 5, "b": [2e-3] * 5}
    return ptlabs.Comparison(label="t", baseline="a", times=times, checks=checks or [_QUIET] * 5)


CLEAN = _claims("| `x-is-one` | `x` is 1 (folklore) | **True.** It is. | cell | §1 |")
CLEAN.cells.insert(0, nbformat.v4.new_markdown_cell("# 09 · Demo\n\nWhat the chapter teaches."))
CLEAN.cells.append(nbformat.v4.new_markdown_cell("## 3. Summary and cheat sheet\n\n| want | write |"))
STATES = nbformat.v4.new_output("display_data", data={"text/html": "<div class='ptlabs-states'></div>", "text/plain": "x"})
CLEAN.cells += [
    _cell("print(1)", 1, [_stream("1\n")]),
    _cell("x = 2", 2),
    _cell("interact(f, x=(1, 3))", 3, tags=["remove-cell", "nbval-ignore-output"]),
    _cell("ptlabs.show_states({'1': f(1)})", 4, [STATES]),
    _cell("ptlabs.compare(...)", 5, [_stream(str(_timing()) + "\n")]),
]
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
        _claims("| `x` | x | §1 | cell | **True.** |", CLAIMS_HEADER.replace("verdict | settled by | shown in", "shown in | settled by | verdict")),
        "the table's header",
    ),
    "verdict word": (
        hygiene.claims_table_follows_the_schema, _claims("| `x` | x (folklore) | **Half true.** ... | cell | §1 |"), "must start with"
    ),
    "claim without section": (
        hygiene.claims_table_follows_the_schema, _claims("| `x` | x (folklore) | **True.** | cell | section 1 |"), "names no section"
    ),
    "claim in missing section": (
        hygiene.claims_table_follows_the_schema, _claims("| `x` | x (folklore) | **False.** | cell | §1, §7 |"), "sections [7]"
    ),
    "claim without key": (
        hygiene.claims_table_follows_the_schema, _claims("| x | x (folklore) | **True.** | cell | §1 |"), "backticked kebab-case"
    ),
    "old three-column row": (
        hygiene.claims_table_follows_the_schema, _claims("| x (folklore) | **True.** | §1 |"), "expected 5"
    ),
    "settled by what": (
        hygiene.claims_table_follows_the_schema, _claims("| `x` | x (folklore) | **True.** | a hunch | §1 |"), "'settled by'"
    ),
    "citation without link": (
        hygiene.claims_table_follows_the_schema, _claims("| `x` | x (folklore) | **True.** | citation | §1 |"), "links the"
    ),
    "GPU row with a verdict": (
        hygiene.claims_table_follows_the_schema,
        _claims("| `x` | x (folklore) | **True.** | GPU, not run here | §1 |"),
        "exactly when",
    ),
    "untested row said settled": (
        hygiene.claims_table_follows_the_schema, _claims("| `x` | x (folklore) | **Not tested here.** | cell | §1 |"), "exactly when"
    ),
    "one key twice": (
        hygiene.claims_table_follows_the_schema,
        _claims("| `x` | x (folklore) | **True.** | cell | §1 |\n| `x` | y (folklore) | **True.** | cell | §1 |"),
        "used by 2 rows",
    ),
    "open solution": (
        hygiene.solutions_wait_collapsed,
        _notebook(nbformat.v4.new_markdown_cell("```{solution-start} ex\n```"), _cell("x = 1", 1),
                  nbformat.v4.new_markdown_cell("```{solution-end}\n```")),
        "does not open collapsed",
    ),
    "no title line": (
        hygiene.opens_with_its_title_line, _notebook(nbformat.v4.new_markdown_cell("# Demo")), "'# NN · Title'"
    ),
    "code before the title": (
        hygiene.opens_with_its_title_line,
        _notebook(_cell("import torch", 1), nbformat.v4.new_markdown_cell("# 09 · Demo")),
        "'# NN · Title'",
    ),
    "no summary at the end": (
        hygiene.ends_with_the_summary,
        _notebook(nbformat.v4.new_markdown_cell("## 1. Summary\n\n## 2. Pitfalls")),
        "end the chapter with '## N. Summary and cheat sheet'",
    ),
    "no explorer": (hygiene.has_a_live_explorer, _notebook(_cell("print(1)", 1)), "no live explorer"),
    "explorer shown on the site": (
        hygiene.has_a_live_explorer, _notebook(_cell("interact(f, x=1)", 1, tags=["nbval-ignore-output"])), "remove-cell"
    ),
    "explorer without states": (
        hygiene.has_a_live_explorer,
        _notebook(_cell("interact(f, x=1)", 1, tags=["nbval-ignore-output", "remove-cell"])),
        "no static states",
    ),
    "figure without alt text": (
        hygiene.figures_have_alt_text, _notebook(_cell("plt.plot()", 1, [WIDE_FIGURE])), "without alt text"
    ),
    "two raw timings": (
        hygiene.timings_compared_by_the_helper,
        _notebook(_cell("a = ptlabs.measure(f)\nb = ptlabs.measure(g)\nprint(a.median / b.median)", 1)),
        "compare them with ptlabs.compare",
    ),
    "tiny figure text": (
        hygiene.figure_text_readable_on_a_phone,
        _notebook(_cell("ax.set_title(name, fontsize=8)\nax.legend(fontsize='small')", 1, [WIDE_FIGURE])),
        "draws text at 'fontsize=8'",
    ),
    "script written, result elsewhere, unsaid": (
        hygiene.written_scripts_show_where_they_run,
        _notebook(nbformat.v4.new_markdown_cell("### Unused parameters\n\nThe model below."),
                  _cell("%%writefile -a lessons.py\ndef unused(): ...", 1),
                  nbformat.v4.new_markdown_cell("### Changing the model\n\nSee [results](#results)."),
                  _cell("%%writefile -a lessons.py\ndef changed(): ...", 2),
                  nbformat.v4.new_markdown_cell("### Results"), _cell("run('lessons.py')", 3)),
        "section 'Unused parameters' writes a script but shows no result",
    ),
    "temporary path": (
        hygiene.outputs_hold_no_machine_paths,
        _notebook(_cell("%%writefile x.py", 1, [_stream("Writing /tmp/ch06_63xuw_1f/collectives.py\n")])),
        "prints a path of the machine that ran it: '/tmp/'",
    ),
    "site-packages path in a traceback": (
        hygiene.outputs_hold_no_machine_paths,
        _notebook(_cell("f()", 1, [nbformat.v4.new_output(
            "error", ename="E", evalue="", traceback=['File "/srv/x/.venv/lib/python3.11/site-packages/torch/a.py"'])])),
        "'/srv/x/.venv/lib/python3.11/site-packages/'",
    ),
    "home folder": (
        hygiene.outputs_hold_no_machine_paths,
        _notebook(_cell("print(p)", 1, [_stream("saved to /home/ana/ckpt.pt\n")])),
        "'/home/ana/'",
    ),
    "timing table without a machine check": (
        hygiene.timing_tables_hold_together, _notebook(_cell("ptlabs.compare(...)", 1, [_stream(
            "t: 5 interleaved rounds, median time per round\n            time  x baseline (IQR)\n"
            "  a    1.00 ms          baseline\n  b    2.00 ms  2.00 (1.90-2.10)\n"
            "b: 2.0x the time of a (slower)\n")])),
        "has no machine check",
    ),
    "timing table from a busy machine": (
        hygiene.timing_tables_hold_together,
        _notebook(_cell("ptlabs.compare(...)", 1, [_stream(str(_timing(checks=[_STALLED] * 5)))])),
        "measured while the machine was busy",
    ),
    "timing table whose medians contradict its ratios": (
        hygiene.timing_tables_hold_together,
        _notebook(_cell("ptlabs.compare(...)", 1, [_stream(str(_timing(
            times={"a": [10e-3, 10e-3, 0.1, 0.1, 0.1], "b": [20e-3, 20e-3, 50e-3, 50e-3, 0.2]})))])),
        "the load changed while it ran",
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


def test_problems_name_cells_as_jupyter_shows_them() -> None:
    """Not "code cell 14" (a position that counts markdown cells too) but the [N] beside it and its first line."""
    nb = _notebook(nbformat.v4.new_markdown_cell("# Title"), _cell("print(wide)\nmore", 7, [_stream("x" * 89 + "\n")]))
    assert hygiene.outputs_fit_the_page(nb)[0].startswith("code cell [7] 'print(wide)' prints 1 line(s) over 88")
    assert hygiene.no_stray_stderr(_notebook(_cell("\nwarn()", None, [_stream("w", "stderr")])))[0].startswith(
        "code cell [ ] 'warn()' wrote to stderr"
    )


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


def test_no_claim_key_carries_two_verdicts_across_the_book() -> None:
    """One claim, one verdict: a key shared by two chapters carries the same verdict in both."""
    chapters = {
        path.split("/")[1][:2]: hygiene.read_claims(nbformat.read(ROOT / path, as_version=4))[0]
        for path in MANIFEST if path.startswith("notebooks/")
    }
    assert all(chapters.values()), "a chapter has no claims to check"
    problems = hygiene.inconsistent_keys(chapters)
    assert not problems, "\n".join(problems)


def _claim(key: str, verdict: str, settled_by: str = "cell") -> hygiene.Claim:
    return hygiene.Claim(key, "x (folklore)", verdict, "", settled_by, (1,), "§1")


@pytest.mark.parametrize(
    ("chapters", "expected"),
    [
        ({"04": [_claim("anomaly-cost", "True")], "07": [_claim("anomaly-cost", "Depends")]}, "carries 2 verdicts"),
        ({"04": [_claim("a", "True")], "07": [_claim("a", "True", "chapter 05")]}, "chapter 05 has no row"),
        ({"04": [_claim("a", "True", "chapter 07")], "07": [_claim("a", "True", "chapter 04")]}, "no row with that key"),
    ],
)
def test_disagreeing_claims_are_found(chapters: dict, expected: str) -> None:
    assert any(expected in problem for problem in hygiene.inconsistent_keys(chapters))
    assert hygiene.inconsistent_keys({"04": [_claim("a", "True")], "07": [_claim("a", "True", "chapter 04")]}) == []
