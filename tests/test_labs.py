"""The labs hold their promises: releases in sync with sources, checks that discriminate, grading that holds.

For every lab in labs/source/ (found, not listed) these tests prove, with nbgrader itself:
- the committed student version (labs/release/<lab>/) is what generate_assignment makes today;
- every graded part is complete: a solution cell, a test cell with points and hidden tests, and
  at least one wrong-answer fixture in tests/fixtures/<lab>/;
- the solution earns full marks, the untouched release earns zero, and each fixture (a typical
  wrong answer, tests/fixtures/<lab>/<grade_id>__<idea>.py) loses its own part's points while every
  other part keeps full marks (fixtures are graded together, at most one of each part, so the other
  parts of its group are what this cannot see: ``lab_tools.fixture_groups``; a part with no fixture
  left in a group is kept there once, and left blank after that: ``lab_tools.blank_parts``);
- every hostile submission of tests/hostile.py (cheats, a dead kernel, an endless loop, huge output,
  deleted or stripped cells) gets the grade it must get, the grader's report says what happened,
  and ``nbgrader autograde`` still exits 0 for the class.

Grading runs in temporary course copies, never in labs/: see tests/lab_tools.py.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from ptgrader.execute import UNREADABLE_FOR_RULES
from ptgrader.outputs import MAX_IMAGE_DECODING, MAX_IMAGE_HEIGHT, MAX_IMAGE_SIZE
from ptgrader.safe_html import CELL_METADATA_KEPT, FORMAT_CHARACTERS, NOTEBOOK_METADATA_KEPT
from ptgrader.score import IN_KERNEL_SHARE
from ptgrader.source_rules import call_rules, loop_rules
from tests import hostile, html_pages, lab_tools, run_profile
from tests.lab_tools import BEGIN_HIDDEN, BEGIN_SOLUTION, END_SOLUTION, LABS, Fixture, GradedLab, LabToolError

LAB_NAMES = lab_tools.lab_names()
FIXTURES = [pytest.param(f, id=f"{f.lab}-{f.path.stem}") for lab in LAB_NAMES for f in lab_tools.fixtures(lab)]
ALTERNATIVES = [pytest.param(f, id=f"{f.lab}-{f.path.stem}") for lab in LAB_NAMES for f in lab_tools.alternatives(lab)]
#: Cheats and broken runs: each graded in the first lab and in one other (lab_tools.hostile_cases_for).
HOSTILE = [
    pytest.param(lab, case, id=f"{lab}-{case.student}")
    for lab in LAB_NAMES
    for policy in (True, False)
    for case in lab_tools.hostile_cases_for(lab, policy=policy, labs=LAB_NAMES)
]
#: A graded notebook larger than this kept output it should have cut.
MAX_GRADED_NOTEBOOK_BYTES = 1_000_000
MIN_FIXTURES_PER_PART = 8
END_HIDDEN = "### END HIDDEN TESTS"
CANARIES = "ptchecks.canaries()"
#: Every hidden block sends at least one of the student's outputs out of the kernel, for the grader to compare.
#: The calls that send outputs to the grader: emit itself, and the contract harness.
SENDERS = ("ptchecks.emit(", "ptchecks.call(")


def _source_cells(lab: str) -> tuple[dict[str, nbformat.NotebookNode], dict[str, nbformat.NotebookNode]]:
    """Solution cells and test cells of a lab's source notebooks, by grade_id."""
    solutions: dict[str, nbformat.NotebookNode] = {}
    tests: dict[str, nbformat.NotebookNode] = {}
    for path in lab_tools.source_notebooks(lab):
        nb = nbformat.read(path, as_version=4)
        solutions.update(lab_tools.solution_cells(nb))
        tests.update(lab_tools.graded_cells(nb))
    return solutions, tests


def _ruled_parts(lab: str) -> list[str]:
    """The test cells of ``lab`` whose source states a rule about how the answer is written (ptgrader.source_rules)."""
    return [grade_id for grade_id, cell in _source_cells(lab)[1].items()
            if loop_rules(cell.source) or call_rules(cell.source)]


def _hidden_block(source: str) -> str:
    return source.split(END_HIDDEN)[0].split(BEGIN_HIDDEN)[-1]


def _last_hidden_line(source: str) -> str:
    """The last non-blank line before END HIDDEN TESTS."""
    lines = [line.strip() for line in _hidden_block(source).splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.fixture(scope="module")
def graded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Grade, once, every lab this session's tests ask about (one batched round trip, see grade_labs)."""
    wanted: set[str] = set()
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "lab" in params:
            wanted.add(params["lab"])
        if isinstance(params.get("fixture"), Fixture):
            wanted.add(params["fixture"].lab)
    runtime_lab = LAB_NAMES[0] if LAB_NAMES and LAB_NAMES[0] in wanted else None
    outcome = lab_tools.grade_labs(sorted(wanted), tmp_path_factory.mktemp("labs"), runtime_lab=runtime_lab)
    run_profile.count_grading_kernels(
        report for lab in outcome.values() if isinstance(lab, GradedLab) for report in lab.reports.values()
    )
    return outcome


def _outcome(graded: dict, lab: str) -> GradedLab:
    result = graded[lab]
    if isinstance(result, LabToolError):
        pytest.fail(f"{lab} could not be graded:\n{result}", pytrace=False)
    return result


def test_labs_exist() -> None:
    assert LAB_NAMES, f"no lab found in {LABS / 'source'}"



def test_a_failed_grading_run_is_explained_first() -> None:
    """CI shows only the ends of a long log: the traceback of a failed submission must come first."""
    log = (
        "[AutogradeApp | INFO] Autograding submitted/ann/lab/lab.ipynb\n"
        "[AutogradeApp | ERROR] ptlabs: bob/lab: grades withheld: the submission breaks the lab's code policy\n"
        "[AutogradeApp | ERROR] There was an error processing assignment: submitted/eve/lab\n"
        "[AutogradeApp | ERROR] Traceback (most recent call last):\n"
        "RuntimeError: Kernel died before replying to kernel_info\n"
        "[AutogradeApp | INFO] Setting destination file permissions to 444\n"
    )
    assert lab_tools.nbgrader_errors(log).splitlines() == [
        "[AutogradeApp | ERROR] There was an error processing assignment: submitted/eve/lab",
        "[AutogradeApp | ERROR] Traceback (most recent call last):",
        "RuntimeError: Kernel died before replying to kernel_info",
    ]
    assert "no ERROR lines" in lab_tools.nbgrader_errors("[AutogradeApp | INFO] fine\n")


def test_a_malformed_lab_fails_alone_when_labs_are_generated_together(tmp_path: Path) -> None:
    """generate_assignments makes every lab in one command; a lab nbgrader refuses must not take the others."""
    (tmp_path / lab_tools.CONFIG_NAME).write_text("c = get_config()\n")
    for lab, grade_id in {"good": "test_answer", "broken": "answer"}.items():
        (tmp_path / "source" / lab).mkdir(parents=True)
        nbformat.write(lab_tools.one_part_lab(grade_id), tmp_path / "source" / lab / f"{lab}.ipynb")
    outcome = lab_tools.generate_assignments(tmp_path, ["good", "broken"])
    assert outcome["good"] == tmp_path / "release" / "good"
    assert (outcome["good"] / "good.ipynb").is_file()
    assert isinstance(outcome["broken"], LabToolError), outcome["broken"]


def test_every_release_has_a_source() -> None:
    stale = [str(p.relative_to(LABS.parent)) for p in lab_tools.stale_releases()]
    assert not stale, f"release folders without a source lab: {stale}; run `make refresh` to remove them"


@pytest.mark.parametrize("lab", LAB_NAMES)
def test_every_part_is_complete(lab: str) -> None:
    solutions, tests = _source_cells(lab)
    problems = []
    if not solutions:
        problems.append("no solution cell (nbgrader metadata solution: true)")
    for grade_id, cell in solutions.items():
        if BEGIN_SOLUTION not in cell.source or END_SOLUTION not in cell.source:
            problems.append(f"solution cell {grade_id}: no {BEGIN_SOLUTION} / {END_SOLUTION} region")
        test = tests.get(f"test_{grade_id}")
        if test is None:
            problems.append(f"solution cell {grade_id}: no test cell with grade_id test_{grade_id}")
        count = sum(f.grade_id == grade_id for f in lab_tools.fixtures(lab))
        if count < MIN_FIXTURES_PER_PART:
            problems.append(
                f"solution cell {grade_id}: {count} wrong-answer fixtures tests/fixtures/{lab}/{grade_id}__<idea>.py, "
                f"at least {MIN_FIXTURES_PER_PART} needed"
            )
    for grade_id, cell in tests.items():
        meta = lab_tools.nbgrader_meta(cell)
        if not grade_id.startswith("test_") or grade_id.removeprefix("test_") not in solutions:
            problems.append(f"test cell {grade_id}: no solution cell {grade_id.removeprefix('test_')} for it to test")
        if not meta.get("points", 0) > 0:
            problems.append(f"test cell {grade_id}: no points")
        if not meta.get("locked"):
            problems.append(f"test cell {grade_id}: not locked")
        if BEGIN_HIDDEN not in cell.source or END_HIDDEN not in cell.source:
            problems.append(f"test cell {grade_id}: no {BEGIN_HIDDEN} / {END_HIDDEN} region")
        elif _last_hidden_line(cell.source) != CANARIES:
            problems.append(f"test cell {grade_id}: the hidden tests must end with {CANARIES}")
        elif not any(sender in _hidden_block(cell.source) for sender in SENDERS):
            problems.append(f"test cell {grade_id}: the hidden tests send no output to the grader ({SENDERS[0]}...)")
    for path in lab_tools.source_notebooks(lab):
        cells = nbformat.read(path, as_version=4).cells
        code = [cell for cell in cells if cell.cell_type == "code"]
        if not code or not lab_tools.nbgrader_meta(code[0]).get("locked"):
            problems.append(f"{path.name}: the first code cell (the Colab set-up) is not locked; run `make refresh`")
        setup = [cell for cell in code if lab_tools.nbgrader_meta(cell).get("grade_id") == "setup"]
        if not setup or "import ptchecks" not in setup[0].source:
            problems.append(f"{path.name}: no locked cell with grade_id 'setup' that imports ptchecks")
    for fixture in _all_fixtures(lab):
        if fixture.grade_id not in solutions:
            problems.append(f"{fixture.path.name}: {lab} has no solution cell {fixture.grade_id}")
        if not fixture.source().startswith("#"):
            problems.append(f"{fixture.path.name}: must start with a comment naming the mistake or the other way")
    assert not problems, f"{lab}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("lab", LAB_NAMES)
def test_fixtures_are_graded_in_groups_of_different_parts(lab: str) -> None:
    lab_fixtures = _all_fixtures(lab)
    groups = lab_tools.fixture_groups(lab_fixtures)
    grouped = sorted(f.path for group in groups.values() for f in group)
    assert grouped == sorted(f.path for f in lab_fixtures), f"{lab}: a fixture is graded twice or never"
    mixed = [student for student, group in groups.items() if len({f.grade_id for f in group}) != len(group)]
    assert not mixed, f"{lab}: groups with two fixtures of one part: {mixed}"
    most = max(sum(f.grade_id == part for f in lab_fixtures) for part in {f.grade_id for f in lab_fixtures})
    assert len(groups) == most, f"{lab}: {len(groups)} submissions for fixtures that {most} can hold"
    untouched = [student for student, group in groups.items() if len(group) < len(_source_cells(lab)[1])]
    assert untouched, f"{lab}: every group is wrong in every part, so none shows that the others keep their marks"
    parts = list(_source_cells(lab)[0])
    blank = lab_tools.blank_parts(groups, parts)
    for part in parts:  # each part without a fixture somewhere keeps its solution in one such group
        free = [student for student, group in groups.items() if all(f.grade_id != part for f in group)]
        kept = [student for student in free if part not in blank[student]]
        assert len(kept) == min(1, len(free)), f"{lab}: {part} is kept beside wrong answers in {kept}, not once"


def test_grading_commands_take_labs_of_about_as_much_work_each() -> None:
    """Each command pays nbgrader's start and a warm server's imports once: labs share commands, balanced by their
    students, weighted by what one costs (lab_tools.SUBMISSION_WEIGHT)."""
    sizes = {"a": 55, "b": 26, "c": 25, "d": 24, "e": 22, "f": 22, "g": 22}
    assert lab_tools.command_groups(sizes, 4) == [["a"], ["b", "g"], ["c", "f"], ["d", "e"]]
    assert lab_tools.command_groups(sizes, 1) == [sorted(sizes)]
    assert lab_tools.command_groups({"a": 3, "b": 1}, 4) == [["a"], ["b"]]  # never an empty command
    assert lab_tools.command_groups({}, 4) == []
    heavy = sorted(lab_tools.SUBMISSION_WEIGHT)  # the costliest labs, graded by different commands
    assert set(heavy) <= set(LAB_NAMES), f"SUBMISSION_WEIGHT names labs that do not exist: {set(heavy) - set(LAB_NAMES)}"
    weighted = {lab: 25 * lab_tools.SUBMISSION_WEIGHT.get(lab, 1) for lab in {*LAB_NAMES, *heavy}}
    assert not any(set(heavy) <= set(group) for group in lab_tools.command_groups(weighted, 2))
    # a hostile case withheld or refused before it runs costs a fraction of a submission that runs
    lab = LAB_NAMES[0]
    assert lab_tools.class_work(lab, ["solution", "hostile-a", "hostile-b"], {"hostile-b"}) == (
        2 * lab_tools.SUBMISSION_WEIGHT.get(lab, 1) + lab_tools.NOT_RUN_WEIGHT)


@pytest.mark.parametrize("lab", LAB_NAMES)
def test_release_is_in_sync(lab: str, graded: dict) -> None:
    differences = lab_tools.release_differences(LABS / "release" / lab, _outcome(graded, lab).release)
    assert not differences, (
        f"labs/release/{lab} is out of date with labs/source/{lab}: run `make refresh` "
        "and commit the result.\n  " + "\n  ".join(differences)
    )


@pytest.mark.parametrize("lab", LAB_NAMES)
def test_solution_earns_full_marks(lab: str, graded: dict) -> None:
    _, tests = _source_cells(lab)
    scores = _outcome(graded, lab).scores[lab_tools.SOLUTION_STUDENT]
    assert set(scores) >= set(tests), f"cells missing from the gradebook: {sorted(set(tests) - set(scores))}"
    lost = {cell: score for cell, score in scores.items() if score[0] != score[1]}
    assert not lost, f"{lab}: the solution loses points (cell: (score, max)): {lost}"


@pytest.mark.parametrize("lab", LAB_NAMES)
def test_untouched_release_earns_zero(lab: str, graded: dict) -> None:
    scores = _outcome(graded, lab).scores[lab_tools.BLANK_STUDENT]
    earned = {cell: score for cell, score in scores.items() if score[0] != 0}
    assert scores and not earned, f"{lab}: the untouched student notebook earns points (cell: (score, max)): {earned}"


def _all_fixtures(lab: str) -> list[Fixture]:
    """A lab's wrong answers and correct alternatives: what its fixture groups hold."""
    return lab_tools.fixtures(lab) + lab_tools.alternatives(lab)


def _group_of(fixture: Fixture) -> tuple[str, list[Fixture]]:
    """The student id of the submission that holds ``fixture``, and the fixtures submitted with it."""
    return next((student, group) for student, group in lab_tools.fixture_groups(_all_fixtures(fixture.lab)).items()
                if fixture in group)


def _blank_tests(lab: str, student: str) -> set[str]:
    """The test cells of the parts ``student``'s group submits blank (lab_tools.blank_parts)."""
    groups = lab_tools.fixture_groups(_all_fixtures(lab))
    return {f"test_{part}" for part in lab_tools.blank_parts(groups, _source_cells(lab)[0])[student]}


@pytest.mark.parametrize("fixture", FIXTURES)
def test_wrong_answer_loses_only_its_part(fixture: Fixture, graded: dict) -> None:
    student, group = _group_of(fixture)
    scores = _outcome(graded, fixture.lab).scores[student]
    with_fixtures = {f.test_id for f in group if not f.correct}
    assert fixture.test_id in scores, f"no graded cell {fixture.test_id} in the gradebook"
    got, points = scores[fixture.test_id]
    if fixture.in_kernel_only:  # a rule seen only in the kernel costs its share, never more (book/instructors.md)
        assert got == points * (1 - IN_KERNEL_SHARE), (
            f"{fixture.path.name} is marked as caught inside the kernel only, and scores {got:g} of {points:g}, not "
            f"{points * (1 - IN_KERNEL_SHARE):g}: remove the mark if its outputs are wrong too"
        )
    else:
        assert got == 0, (
            f"{fixture.path.name}: {fixture.test_id} gives this wrong answer {got:g} of {points:g}; its checks do not "
            "discriminate" + (", or only a check inside the kernel sees its mistake: then mark it with "
                              f"{lab_tools.IN_KERNEL_MARK!r}" if got else "")
        )
    blank = _blank_tests(fixture.lab, student)
    others = {cell: score for cell, score in scores.items()
              if cell not in with_fixtures | blank and score[0] != score[1]}
    assert not others, (
        f"{fixture.path.name}: other parts lost points too (cell: (score, max)): {others}; "
        f"graded as {student} with {[f.path.name for f in group]}"
    )


@pytest.mark.parametrize("fixture", ALTERNATIVES)
def test_correct_alternative_keeps_full_marks(fixture: Fixture, graded: dict) -> None:
    """A right answer written another way than the reference keeps every point of its part: its checks hold
    the part's stated rules, not the reference's way of meeting them."""
    student, _ = _group_of(fixture)
    got, points = _outcome(graded, fixture.lab).scores[student][fixture.test_id]
    assert got == points, (
        f"{fixture.path.name}: {fixture.test_id} gives this correct answer {got:g} of {points:g}: a check asks for "
        "more than the part's text, or the text asks for more than it says"
    )


@pytest.mark.parametrize(("lab", "case"), HOSTILE)
def test_hostile_submission_is_graded_as_stated(lab: str, case: hostile.HostileCase, graded: dict) -> None:
    outcome = _outcome(graded, lab)
    scores = outcome.scores.get(case.student)
    assert scores, f"{case.student} is missing from the gradebook: nbgrader did not grade it"
    tests = [grade_id for grade_id in _graded_ids_in_order(lab)]
    expected = case.expect(tests)
    report = outcome.reports.get(case.student, {})
    unreadable = []  # round 92: with the policy off, a rule about how code is written holds only for code it vouches for
    if not case.policy and report.get("findings"):
        unreadable = [cell for cell in _ruled_parts(lab) if expected.get(cell) == "full"]
        expected |= {cell: 0 for cell in unreadable}
    got = {cell: scores[cell][0] for cell in tests}
    wanted = {cell: scores[cell][1] if want == "full" else float(want) for cell, want in expected.items()}
    assert got == wanted, f"{case.student}: scores (cell: got) {got}, expected {wanted}"
    verdicts = report.get("scores", {})
    unexplained = [cell for cell in unreadable if UNREADABLE_FOR_RULES not in verdicts.get(cell, "")]
    assert not unexplained, f"{case.student}: parts with a source rule failed without saying why: {unexplained}"
    if case.flag:
        assert any(report.get(flag) for flag in case.flag.split(" or ")), (
            f"{case.student}: the grading report does not say '{case.flag}': {report}"
        )
        assert not report.get("survivors"), f"{case.student}: processes survived the kernel: {report['survivors']}"
    if case.reason:
        assert any(reason in str(report.get("stopped")) for reason in case.reason.split(" or ")), (
            f"{case.student}: stopped for another reason: {report}")
    size = outcome.notebook_bytes.get(case.student, 0)
    assert size < MAX_GRADED_NOTEBOOK_BYTES, f"{case.student}: the graded notebook holds {size} bytes of output"
    lab_files = {str(path.relative_to(LABS / "source" / lab)) for path in (LABS / "source" / lab).rglob("*")}
    foreign = [f"{course.name}: {relative}" for course in outcome.courses
               if (graded_folder := course / "autograded" / case.student / lab).is_dir()
               for relative in (str(path.relative_to(graded_folder)) for path in graded_folder.rglob("*"))
               if relative not in lab_files | {lab_tools.REPORT_NAME, "timestamp.txt"}]
    assert not foreign, f"{case.student}: files of the submission in autograded/, served to the instructor: {foreign}"
    numbered = [cell.execution_count for course in outcome.courses
                for path in (course / "autograded" / case.student / lab).glob("*.ipynb")
                for cell in nbformat.read(path, as_version=4).cells
                if cell.cell_type == "code" and cell.execution_count is not None]
    assert numbered == list(range(1, len(numbered) + 1)), (  # round 48: 4,290 digits, off the feedback page
        f"{case.student}: the graded notebook's cells are numbered {str(numbered)[:200]}, not 1, 2, 3 ... by the grader"
    )


@pytest.mark.parametrize("lab", LAB_NAMES[:1])
def test_feedback_shows_a_failed_test_cell_in_pythons_traceback_format(lab: str, graded: dict) -> None:
    """A wrong answer's feedback holds the kernel's traceback as Python prints it: each frame's file, line and
    code, then the error; not IPython's default "Context" format, which lists the code around every frame and
    costs seconds of kernel time per class (``ptgrader.kernels.PLAIN_TRACEBACKS``)."""
    outcome = _outcome(graded, lab)
    streams = [
        re.sub(r"\x1b\[[0-9;]*m", "", output.get("text", ""))  # without the colours
        for course in outcome.courses
        for path in sorted((course / "autograded").glob(f"wrong-*/{lab}/*.ipynb"))
        for cell in nbformat.read(path, as_version=4).cells
        for output in cell.get("outputs", [])
        if output.output_type == "stream"
    ]
    tracebacks = [text for text in streams if "Traceback (most recent call last)" in text]
    assert tracebacks, f"no wrong answer's graded notebook of {lab} shows the traceback of a failed test cell"
    context = [text for text in tracebacks if "---->" in text]
    assert not context, f"{len(context)} of {len(tracebacks)} tracebacks in IPython's Context format:\n{context[0]}"
    # The error line: "ValueError: why", or the name alone (a blank part's NotImplementedError()).
    assert all(re.search(r"^\w+(: .*)?$", text, re.MULTILINE) for text in tracebacks), "a traceback without its error line"


#: The students whose pages the page test makes (a glob nbgrader expands): every hostile one, and the honest
#: ones (``solution...``) whose pages show what the templates themselves run.
PAGE_STUDENTS = "[hs]*"


def withheld_twins(cases: list[hostile.HostileCase]) -> list[str]:
    """The policy-on cases whose pages the page test leaves out: withheld, each with a twin graded with the policy off.

    A withheld submission is never run: its graded notebook is its own cells (the same cells as its twin's, whose
    page is made) and the grader's GradingWithheld errors, which name the rule, a cell, a line and an attribute
    or module. The first of them keeps its pages, for the shape of a withheld notebook; the others' (two pages of
    about half a second each, for each of 23 cases) would show the same student cells again.
    """
    runtime = {case.name for case in cases if not case.policy}
    withheld = sorted(case.student for case in cases if case.policy and case.flag == "withheld" and case.name in runtime)
    return withheld[1:]


@pytest.mark.parametrize("lab", LAB_NAMES[:1])
def test_feedback_and_formgrader_pages_run_nothing_a_submission_wrote(lab: str, graded: dict) -> None:
    """Every hostile case's feedback page and formgrader view hold nothing active an honest submission's page does not.

    The first lab meets every hostile case, the XSS ones in Markdown and in an image's metadata included;
    a case refused before grading has no graded notebook, hence no page, and a withheld case whose twin was
    graded with the policy off shows its cells on its twin's pages (``withheld_twins``).
    """
    outcome = _outcome(graded, lab)
    cases = [case for policy in (True, False) for case in lab_tools.hostile_cases_for(lab, policy=policy)]
    left_out = withheld_twins(cases)
    makers = {"feedback": html_pages.feedback_pages, "formgrader": html_pages.formgrader_pages}
    pages: dict[str, dict[str, str]] = {kind: {} for kind in makers}
    with ThreadPoolExecutor(max_workers=2) as pool:  # the feedback pages are made by nbgrader, in processes of its own
        made = [(kind, pool.submit(make, course, lab, PAGE_STUDENTS, left_out)) for kind, make in makers.items()
                for course in outcome.courses]
        for kind, future in made:
            pages[kind].update(future.result())
    reports = [str(path) for course in outcome.courses for path in (course / "feedback").rglob(lab_tools.REPORT_NAME)]
    assert not reports, f"the grader's report was copied into a student's feedback: {reports[:3]}"
    problems = []
    for kind, by_student in pages.items():
        honest_pages = [page for student, page in by_student.items() if student.startswith(lab_tools.SOLUTION_STUDENT)]
        assert honest_pages, f"no honest submission's {kind} page to compare with"
        honest = {part for page in honest_pages for part in html_pages.active_parts(page)}  # none on a feedback page
        for student, page in sorted(by_student.items()):
            added = [part for part in html_pages.active_parts(page) if part not in honest]
            if added:
                problems.append(f"{kind} page of {student}: {added[:3]}")
    missing = sorted(case.student for case in cases if case.flag != "refused" and case.student not in left_out
                     for kind in pages if case.student not in pages[kind])
    assert not missing, f"no page made for {missing}"
    shown = sorted(student for by_student in pages.values() for student in by_student if student in left_out)
    assert not shown, f"pages made for withheld twins that were to be left out: {shown}"
    assert not problems, "active content from a submission:\n  " + "\n  ".join(problems)
    # Round 25: TeX in a Markdown cell drew a passing verdict over a failed part, and hung the page for minutes
    typeset = sorted(f"{kind} page of {student}" for kind, by_student in pages.items()
                     for student, page in by_student.items() if html_pages.typesetting(page))
    assert not typeset, f"pages that load a TeX typesetter: {typeset[:3]}"
    tall = sorted(f"{kind} page of {student}: {html_pages.oversized_images(page, MAX_IMAGE_SIZE)[:1]}"
                  for kind, by_student in pages.items() for student, page in by_student.items()
                  if html_pages.oversized_images(page, MAX_IMAGE_SIZE))
    assert not tall, f"pictures larger than a page shows: {tall[:3]}"
    # Round 74: tiny pictures, each said to be 4096 px tall, 95 of them
    towering = sorted(f"{kind} page of {student}: {html_pages.images_height(page)} px of images"
                      for kind, by_student in pages.items() for student, page in by_student.items()
                      if html_pages.images_height(page) > MAX_IMAGE_HEIGHT)
    assert not towering, f"pages whose pictures together are taller than the budget: {towering[:3]}"
    # Round 84: pictures of a few kB, each 4096 x 4096 px in hundreds of progressive JPEG scans
    decoding = {(kind, student): html_pages.images_decoding(page)
                for kind, by_student in pages.items() for student, page in by_student.items()}
    slow = sorted(f"{kind} page of {student}: {asked:,} pixels to decode"
                  for (kind, student), asked in decoding.items() if asked > MAX_IMAGE_DECODING)
    assert not slow, f"pages whose pictures together ask a browser more decoding than the budget: {slow[:3]}"
    # Round 58: a text-direction override in a comment made it read otherwise than it ran
    drawn = sorted(f"{kind} page of {student}" for kind, by_student in pages.items()
                   for student, page in by_student.items() if FORMAT_CHARACTERS.search(page))
    assert not drawn, f"pages that draw invisible or text-direction characters: {drawn[:3]}"
    # Round 63: a cell's tags became classes of its <div> (``hidden`` hid a failed part and its verdict,
    # ``navbar-fixed-top`` pinned a fake score over the page), and the notebook's title named the browser's tab
    tagged = sorted(f"{kind} page of {student}" for kind, by_student in pages.items()
                    for student, page in by_student.items() if "celltag_" in page)
    assert not tagged, f"pages whose cells carry a submission's tags as classes: {tagged[:3]}"
    titles = {kind: {html_pages.title(page) for student, page in by_student.items()
                     if student.startswith(lab_tools.SOLUTION_STUDENT)} for kind, by_student in pages.items()}
    retitled = sorted(f"{kind} page of {student}: {html_pages.title(page)!r}" for kind, by_student in pages.items()
                      for student, page in by_student.items() if html_pages.title(page) not in titles[kind])
    assert not retitled, f"pages titled otherwise than an honest submission's: {retitled[:3]}"


@pytest.mark.parametrize("lab", LAB_NAMES)
def test_graded_notebooks_keep_only_the_metadata_grading_needs(lab: str, graded: dict) -> None:
    """The pages are drawn from the graded notebooks, and nbconvert's templates act on metadata (round 63: tags,
    ``transient``, a title): every graded notebook of every submission keeps nbgrader's cell metadata and the
    kernel's, nothing a student wrote."""
    kept = []
    for course in _outcome(graded, lab).courses:
        for path in sorted((course / "autograded").glob(f"*/{lab}/*.ipynb")):
            nb = json.loads(path.read_text(encoding="utf-8"))
            extra = {key for cell in nb["cells"] for key in cell.get("metadata", {})} - set(CELL_METADATA_KEPT)
            extra |= set(nb["metadata"]) - set(NOTEBOOK_METADATA_KEPT)
            if extra:
                kept.append(f"{path.parent.parent.name}: {sorted(extra)}")
    assert not kept, f"graded notebooks that keep a submission's metadata: {kept[:5]}"


@pytest.mark.parametrize("lab", LAB_NAMES[:1])
def test_honest_student_graded_after_hostile_ones_keeps_full_marks(lab: str, graded: dict) -> None:
    scores = _outcome(graded, lab).scores.get(lab_tools.HONEST_AFTER_HOSTILE)
    assert scores, "the honest student of the runtime-only course was not graded"
    lost = {cell: score for cell, score in scores.items() if score[0] != score[1]}
    assert not lost, f"an honest student graded after the hostile submissions lost points: {lost}"
    report = _outcome(graded, lab).reports[lab_tools.HONEST_AFTER_HOSTILE]
    assert not report["restored_files"] and not report["killed_processes"], report


def _graded_ids_in_order(lab: str) -> list[str]:
    return [
        lab_tools.nbgrader_meta(cell)["grade_id"]
        for path in lab_tools.source_notebooks(lab)
        for cell in nbformat.read(path, as_version=4).cells
        if lab_tools.nbgrader_meta(cell).get("grade") and not lab_tools.nbgrader_meta(cell).get("solution")
    ]
