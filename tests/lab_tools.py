"""The lab pipeline: nbgrader source notebooks -> student releases -> graded submissions.

The labs/ folder is an nbgrader course (labs/nbgrader_config.py makes its own folder the course
root). Everything here drives nbgrader through its command line, exactly as an instructor does,
so the tests prove the commands in book/instructors.md, not a private shortcut around them.

Tests never grade inside the real labs/ folder: they copy the course (config + source/) into a
temporary folder, regenerate the release there, drop submissions into submitted/<student>/<lab>/
and run ``nbgrader autograde <lab>``, which grades every submitted student. Scores are read back
from the gradebook. To save time the labs are split over a few copies of that course, one command each
(``nbgrader autograde "*"`` where a copy holds several labs), graded side by side (see grade_labs).

`make refresh` (tests/refresh.py) executes the lab sources like every other notebook, then calls
regenerate_releases() here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from tests.manifest import ROOT

LABS = ROOT / "labs"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CONFIG_NAME = "nbgrader_config.py"

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"

#: Student ids of the two reference submissions; fixtures are graded in groups (``fixture_groups``).
SOLUTION_STUDENT = "solution"
BLANK_STUDENT = "blank"
#: The honest student graded in the same run as the runtime-only hostile cases, after them.
HONEST_AFTER_HOSTILE = "solution-graded-after-hostile"

#: Appended to the configuration of the course that grades hostile cases with the code policy off:
#: what the runtime defences alone achieve. Shorter limits keep the endless loop and the silent cells
#: (hostile.SILENT_CELLS, 40 s in all) cheap; lab 01's solution takes a few seconds.
RUNTIME_ONLY_CONFIG = """
c.GuardedExecute.enforce_code_policy = False
c.GuardedExecute.timeout = 5
c.GuardedExecute.submission_timeout = 30
c.GuardedExecute.received_bytes_budget = 16 * 1024 * 1024
"""
#: The grader's report beside each graded notebook (ptgrader.execute.REPORT_NAME; a test holds them equal).
REPORT_NAME = "ptgrader-report.json"

# A fixture file is tests/fixtures/<lab>/<solution grade_id>__<short wrong idea>.py
_FIXTURE_NAME = re.compile(r"^(?P<grade_id>[A-Za-z0-9_]+?)__(?P<idea>[A-Za-z0-9_]+)$")


#: The folder of a lab's fixtures that holds its correct alternative answers (``alternatives``).
RIGHT = "right"

#: The line of a fixture whose mistake only a check inside the kernel sees (see Fixture.in_kernel_only).
IN_KERNEL_MARK = "# caught inside the kernel only: the part keeps the outputs' share of its points"


class LabToolError(Exception):
    """nbgrader failed or a lab is malformed; the message carries nbgrader's own output."""


# ---------------------------------------------------------------------------------------- discovery


def lab_names(labs: Path = LABS) -> list[str]:
    """The labs of the course: every folder in labs/source that holds a notebook, sorted.

    Discovering labs (rather than listing them) lets a new lab join the tests by existing.
    """
    source = labs / "source"
    if not source.is_dir():
        return []
    return sorted(p.name for p in source.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def source_notebooks(lab: str, labs: Path = LABS) -> list[Path]:
    """The source notebooks of one lab (usually exactly one)."""
    return sorted((labs / "source" / lab).glob("*.ipynb"))


def release_notebooks(lab: str, labs: Path = LABS) -> list[Path]:
    """The generated student notebooks of one lab."""
    return sorted((labs / "release" / lab).glob("*.ipynb"))


def nbgrader_meta(cell: nbformat.NotebookNode) -> dict[str, Any]:
    """The cell's nbgrader metadata ({} for a cell nbgrader does not manage)."""
    return dict(cell.get("metadata", {}).get("nbgrader", {}))


def solution_cells(nb: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    """Cells a student edits (nbgrader ``solution: true``, not graded themselves), by grade_id."""
    return {
        meta["grade_id"]: cell
        for cell in nb.cells
        if (meta := nbgrader_meta(cell)).get("solution") and not meta.get("grade") and cell.cell_type == "code"
    }


def graded_cells(nb: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    """Autograded code cells (``grade: true``, not a solution), by grade_id."""
    return {
        meta["grade_id"]: cell
        for cell in nb.cells
        if (meta := nbgrader_meta(cell)).get("grade") and not meta.get("solution") and cell.cell_type == "code"
    }


def strip_solution_markers(source: str) -> str:
    """A solution cell's source as a student would write it: the BEGIN/END SOLUTION lines removed."""
    lines = [line for line in source.splitlines() if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION)]
    return "\n".join(lines)


@dataclass(frozen=True)
class Fixture:
    """A typical wrong answer: the full replacement source of one solution cell."""

    lab: str
    grade_id: str  # the solution cell it replaces; its test cell is "test_" + grade_id
    idea: str  # the short name of the mistake
    path: Path
    #: A correct alternative answer (tests/fixtures/<lab>/right/), right in another way than the reference:
    #: it must keep every point of its part.
    correct: bool = False

    @property
    def test_id(self) -> str:
        """The grade_id of the test cell that must reject this answer."""
        return f"test_{self.grade_id}"

    def source(self) -> str:
        """The replacement cell source."""
        return self.path.read_text(encoding="utf-8").rstrip("\n")

    @property
    def in_kernel_only(self) -> bool:
        """The mistake breaks a rule only a check inside the kernel sees (the part's outputs are right).

        Such a fixture says so on a line of its own (:data:`IN_KERNEL_MARK`), and must keep the rest of its
        part's points (``ptgrader.score.IN_KERNEL_SHARE``); every other fixture must lose all of them.
        """
        return IN_KERNEL_MARK in self.source().splitlines()


def fixture_groups(lab_fixtures: Iterable[Fixture]) -> dict[str, list[Fixture]]:
    """Student id -> the wrong answers submitted together: at most one fixture of each part.

    Why groups: every graded submission re-runs the whole lab (seconds of kernel time in labs 05 and
    06), and a lab's parts are independent, so one submission can prove several fixtures at once:
    each must lose its own part, and a part without a fixture in the group must keep full marks.
    Group ``k`` holds the ``k``-th fixture (in file-name order) of every part that has that many: as
    few submissions as the part with the most fixtures needs. The first groups are wrong in every
    part; the later ones leave the parts with fewer fixtures untouched, and show that the wrong
    answers beside them cost those parts nothing (the solution's submission shows every part's full
    marks). A part's correct alternatives (``alternatives``) come after its wrong answers, in the
    groups where it has none left: they cost a submission only where a part's wrong answers fill every
    group. What grouping cannot see is a fixture that also breaks another part of its group.
    Deterministic; the student id numbers the group, and the test's messages name its fixtures.
    """
    by_part: dict[str, list[Fixture]] = {}
    for fixture in sorted(lab_fixtures, key=lambda f: (f.correct, f.path.name)):
        by_part.setdefault(fixture.grade_id, []).append(fixture)
    depth = max(map(len, by_part.values()), default=0)
    return {
        f"wrong-{index + 1:02d}": [found[index] for _, found in sorted(by_part.items()) if index < len(found)]
        for index in range(depth)
    }


def blank_parts(groups: Mapping[str, list[Fixture]], parts: Iterable[str]) -> dict[str, set[str]]:
    """Student id -> the parts (solution grade_ids) its group submits as the release has them: blank.

    Why: every group runs the whole lab again, and some parts' checks cost seconds (lab 05's profiles,
    lab 06's exports). A part with no fixture in a group shows there that the wrong answers beside it
    cost it nothing; its first such group shows that, and in the later ones it is left blank, so its
    checks stop at once (a blank part earns nothing: ``test_untouched_release_earns_zero``).
    """
    blank: dict[str, set[str]] = {student: set() for student in groups}
    for part in parts:
        free = [student for student, group in groups.items() if all(f.grade_id != part for f in group)]
        for student in free[1:]:
            blank[student].add(part)
    return blank


def fixtures(lab: str, root: Path = FIXTURES) -> list[Fixture]:
    """The wrong-answer fixtures of one lab, sorted; a misnamed file raises instead of being skipped."""
    return _read_fixtures(root / lab, lab, correct=False)


def alternatives(lab: str, root: Path = FIXTURES) -> list[Fixture]:
    """The correct alternative answers of one lab (tests/fixtures/<lab>/right/), sorted.

    Why: a check that refuses a right answer is as wrong as one that accepts a wrong answer, and the
    outside rounds found one in most rounds (a dict's key order, the order of simulated ranks, serving
    without a graph). Each of these must keep every point of its part.
    """
    return _read_fixtures(root / lab / RIGHT, lab, correct=True)


def _read_fixtures(folder: Path, lab: str, *, correct: bool) -> list[Fixture]:
    found = []
    for path in sorted(folder.glob("*.py")):
        match = _FIXTURE_NAME.match(path.stem)
        if match is None:
            raise LabToolError(f"{path}: fixture names are <solution grade_id>__<short_idea>.py")
        found.append(Fixture(lab, match["grade_id"], match["idea"], path, correct))
    return found


# ------------------------------------------------------------------------------------ running nbgrader


def run_nbgrader(args: Iterable[str], course: Path, extra_env: Mapping[str, str] | None = None) -> str:
    """Run ``nbgrader ARGS`` in the course folder with this interpreter; return its output.

    ``python -m nbgrader`` with ``sys.executable`` uses the same environment as the tests (and its
    ``python3`` kernel), whatever is first on PATH. Running in the course folder makes nbgrader read
    that folder's nbgrader_config.py, hence that folder's gradebook.
    """
    command = [sys.executable, "-m", "nbgrader", *args]
    # nbgrader shells out to `alembic` (gradebook migrations), found on PATH: put this environment's
    # scripts first, as an activated virtual environment would.
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           **(extra_env or {})}
    result = subprocess.run(command, cwd=course, env=env, capture_output=True, text=True, check=False)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise LabToolError(
            f"`nbgrader {' '.join(args)}` in {course} failed ({result.returncode}).\n"
            f"Its errors:\n{nbgrader_errors(output)}\n\nIts whole output:\n{output}"
        )
    return output


def nbgrader_errors(output: str) -> str:
    """nbgrader's ERROR log lines with the tracebacks under them, from a run's whole output.

    A class's autograde log runs to hundreds of kilobytes, and a CI log shows only its ends; the
    traceback that says why a submission failed sits in the middle. A log record starts with "[";
    the lines after an ERROR record up to the next record are its traceback.
    """
    kept: list[str] = []
    in_error = False
    for line in output.splitlines():
        if line.startswith("["):
            in_error = "| ERROR]" in line and "ptlabs:" not in line  # ptlabs' own errors are verdicts, not failures
        if in_error:
            kept.append(line)
    return "\n".join(kept) or "(no ERROR lines: see the whole output)"


def copy_course(dest: Path, labs: Path = LABS) -> Path:
    """Make a fresh course at ``dest`` from the config and the sources only (no release, no grades).

    Starting from the sources alone means the copy reproduces what an instructor gets, and nothing
    a previous run left behind (gradebook, submissions) can leak into a test.
    """
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(labs / CONFIG_NAME, dest / CONFIG_NAME)
    shutil.copytree(labs / "source", dest / "source", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return dest


def one_part_lab(test_grade_id: str = "test_answer") -> nbformat.NotebookNode:
    """The smallest lab: a solution cell ``answer`` and its test cell ``test_grade_id`` (1 point).

    Naming the test cell ``answer`` too gives two cells one grade_id, a lab nbgrader refuses to generate.
    """
    def meta(grade_id: str, **flags: object) -> dict:
        return {"nbgrader": {"grade_id": grade_id, "grade": False, "solution": False, "locked": False,
                             "schema_version": 3, **flags}}

    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(f"{BEGIN_SOLUTION}\nanswer = 42\n{END_SOLUTION}",
                                  metadata=meta("answer", solution=True)),
        nbformat.v4.new_code_cell("assert answer == 42",
                                  metadata=meta(test_grade_id, grade=True, locked=True, points=1)),
    ])


def generate_assignment(course: Path, lab: str) -> Path:
    """``nbgrader generate_assignment LAB --force`` in ``course``; return the release folder.

    This also records the lab (with its hidden tests and checksums) in the course gradebook, which
    autograde needs later.
    """
    run_nbgrader(["generate_assignment", lab, "--force"], course)
    release = course / "release" / lab
    if not release.is_dir():
        raise LabToolError(f"nbgrader wrote no {release}")
    return release


def generate_assignments(course: Path, labs: list[str]) -> dict[str, Path | LabToolError]:
    """Generate several labs in ``course``; lab -> its release folder, or why it could not be generated.

    Why one command: each ``nbgrader`` command pays its own start, and the first one in a course
    also makes the gradebook (nbgrader asks ``alembic`` for its schema version: about 2.5 s of CPU);
    all seven labs in one command took 5 s on the 2-core machine, one command per lab 35 s. When the
    one command fails, each lab is generated alone, so that a malformed lab fails by itself.
    """
    try:
        run_nbgrader(["generate_assignment", "*", "--force"], course)
        generated: dict[str, Path | LabToolError] = {lab: course / "release" / lab for lab in labs}
        if all(release.is_dir() for release in generated.values()):
            return generated
    except LabToolError:
        pass
    outcome: dict[str, Path | LabToolError] = {}
    for lab in labs:
        try:
            outcome[lab] = generate_assignment(course, lab)
        except LabToolError as exc:
            outcome[lab] = exc
    return outcome


def regenerate_releases(labs: Path = LABS) -> list[Path]:
    """Regenerate labs/release/<lab>/ for every lab; return the release folders.

    nbgrader runs in a temporary copy of the course so that the real labs/ folder gets only the
    release (no gradebook.db, no log); the release is then copied over the old one. The output is
    deterministic (nbgrader does not execute the notebook and stores no timestamps in it), so a
    regenerated release equals the committed one until a source notebook changes. The release of
    a lab whose source is gone is removed: it is generated output with nothing left to generate it.
    """
    names = lab_names(labs)
    written = []
    with tempfile.TemporaryDirectory(prefix="ptlabs-release-") as tmp:
        course = copy_course(Path(tmp) / "course", labs)
        for lab, generated in generate_assignments(course, names).items():
            if isinstance(generated, LabToolError):
                raise generated
            target = labs / "release" / lab
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(generated, target)
            written.append(target)
    for stale in stale_releases(labs):
        shutil.rmtree(stale)
    return written


def stale_releases(labs: Path = LABS) -> list[Path]:
    """Release folders without a source lab (left behind by a renamed or deleted lab)."""
    release = labs / "release"
    names = set(lab_names(labs))
    return sorted(p for p in release.iterdir() if p.is_dir() and p.name not in names) if release.is_dir() else []


# ----------------------------------------------------------------------------------------- submissions


def build_submission(release_nb: nbformat.NotebookNode, replacements: Mapping[str, str]) -> nbformat.NotebookNode:
    """A student notebook: the release with the sources of some solution cells replaced.

    ``replacements`` maps a solution cell's grade_id to its new source; an unknown grade_id raises
    (a stale fixture must not silently test nothing).
    """
    nb = nbformat.from_dict(release_nb)
    cells = solution_cells(nb)
    unknown = sorted(set(replacements) - set(cells))
    if unknown:
        raise LabToolError(f"no solution cell with grade_id {', '.join(unknown)} (known: {', '.join(sorted(cells))})")
    for grade_id, source in replacements.items():
        cells[grade_id].source = source
    return nb


def solution_sources(source_nb: nbformat.NotebookNode) -> dict[str, str]:
    """The source notebook's solution cells, markers removed: a perfect student's answers."""
    return {grade_id: strip_solution_markers(cell.source) for grade_id, cell in solution_cells(source_nb).items()}


def submit(course: Path, lab: str, student: str, notebooks: Mapping[str, nbformat.NotebookNode]) -> Path:
    """Place a submission where nbgrader looks for it: submitted/<student>/<lab>/<notebook>.ipynb."""
    folder = course / "submitted" / student / lab
    folder.mkdir(parents=True, exist_ok=True)
    for name, nb in notebooks.items():
        nbformat.write(nb, folder / name)
    return folder


#: student id -> notebook file name -> notebook
Submissions = dict[str, dict[str, nbformat.NotebookNode]]


def reference_submissions(course: Path, lab: str, lab_fixtures: Iterable[Fixture]) -> Submissions:
    """The submissions that prove a lab's checks: student id -> notebook file name -> notebook.

    ``solution``: the release with the source's solution cells (markers removed) -- must earn full
    marks. ``blank``: the release untouched -- must earn nothing. ``wrong-<NN>``: the solution with
    the cells of several parts replaced by typical wrong answers or correct alternatives, at most one
    of each part (``fixture_groups``), so any points lost elsewhere come from those cells, and some
    parts left blank (``blank_parts``).
    """
    sources = {p.name: nbformat.read(p, as_version=4) for p in source_notebooks(lab, course)}
    releases = {p.name: nbformat.read(p, as_version=4) for p in release_notebooks(lab, course)}
    if sorted(sources) != sorted(releases):
        raise LabToolError(f"{lab}: release notebooks {sorted(releases)} differ from sources {sorted(sources)}")
    answers = {name: solution_sources(nb) for name, nb in sources.items()}
    submissions = {
        SOLUTION_STUDENT: {name: build_submission(releases[name], answers[name]) for name in releases},
        BLANK_STUDENT: releases,
    }
    groups = fixture_groups(lab_fixtures)
    blank = blank_parts(groups, [grade_id for name in releases for grade_id in answers[name]])
    for student, group in groups.items():
        for fixture in group:
            if not any(fixture.grade_id in answers[name] for name in releases):
                raise LabToolError(f"{fixture.path}: {lab} has no solution cell with grade_id {fixture.grade_id!r}")
        notebooks = {}
        for name, release in releases.items():
            wrong = {grade_id: source for grade_id, source in answers[name].items() if grade_id not in blank[student]}
            for fixture in group:
                if fixture.grade_id in wrong:
                    wrong[fixture.grade_id] = fixture.source()
            notebooks[name] = build_submission(release, wrong)
        submissions[student] = notebooks
    return submissions


# ------------------------------------------------------------------------------------------- grading

#: student -> graded cell grade_id -> (score, max score)
Scores = dict[str, dict[str, tuple[float, float]]]


def autograde(course: Path, lab: str, threads: int | None = None) -> str:
    """One ``nbgrader autograde LAB``: grades every student under submitted/ in one process (``lab`` "*": every
    lab submitted there).

    ``threads``: torch's threads in each grading kernel (OMP_NUM_THREADS, which the jail passes on), as
    ``python -m ptgrader.autograde --jobs`` sets them: jobs side by side, each with all the cores, make
    OpenMP threads wait for a core, and a waiting OpenMP thread spins on one.
    """
    return run_nbgrader(["autograde", lab], course, {"OMP_NUM_THREADS": str(threads)} if threads else None)


def read_scores(course: Path, lab: str) -> Scores:
    """Every submission's score per graded cell, from the course gradebook (nbgrader.api)."""
    from nbgrader.api import Gradebook  # imported late: nbgrader pulls in SQLAlchemy and friends

    scores: Scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for submission in gradebook.assignment_submissions(lab):
            per_cell = scores.setdefault(submission.student_id, {})
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    per_cell[grade.name] = (float(grade.score), float(grade.max_score))
    return scores


def read_reports(course: Path, lab: str) -> dict[str, dict[str, Any]]:
    """student id -> what the guarded grading run reported (autograded/<student>/<lab>/ptgrader-report.json)."""
    reports = {}
    for path in sorted((course / "autograded").glob(f"*/{lab}/{REPORT_NAME}")):
        reports[path.parent.parent.name] = json.loads(path.read_text(encoding="utf-8"))
    return reports


def graded_notebook_bytes(course: Path, lab: str) -> dict[str, int]:
    """student id -> size of the largest graded notebook nbgrader wrote for that student."""
    sizes: dict[str, int] = {}
    for path in (course / "autograded").glob(f"*/{lab}/*.ipynb"):
        student = path.parent.parent.name
        sizes[student] = max(sizes.get(student, 0), path.stat().st_size)
    return sizes


@dataclass
class GradedLab:
    """The outcome of one lab's round trip in temporary courses."""

    lab: str
    release: Path  # the release nbgrader regenerated from the sources (compare with labs/release)
    scores: Scores  # student id -> cell -> (score, max score)
    fixtures: list[Fixture]
    reports: dict[str, dict[str, Any]]  # student id -> the guarded grading report
    notebook_bytes: dict[str, int]  # student id -> size of the graded notebook
    courses: list[Path]  # the temporary courses it was graded in (for the feedback pages)


def default_jobs() -> int:
    """How many nbgrader processes to run at once: $PTLABS_LAB_JOBS, else the CPU count, at most 4.

    No more than the cores: in `make test` the other pytest worker runs beside the grading, and fills
    the time a grader waits (kernel start-up, messages between nbclient and the kernel), so the CPU
    each job costs decides. Measured on the 2-core machine, all seven labs and the runtime-only course
    alone: 4 jobs took 197 s and 325 busy core-seconds, 2 jobs 224 s and 305 (each command pays
    nbgrader's start and a warm server's imports, and more processes than cores share caches worse).
    """
    wanted = os.environ.get("PTLABS_LAB_JOBS", "").strip()
    return max(1, int(wanted)) if wanted.isdigit() else min(os.cpu_count() or 1, 4)


def hostile_cases_for(lab: str, *, policy: bool, labs: list[str] | None = None) -> list[Any]:
    """The hostile cases graded in ``lab``: with the policy off (runtime defences only), all of them, in
    the first lab only; with it on, all of them in the first lab, and in every other lab its round-robin
    share, so that each case is graded in two labs and each lab meets a few.

    Why not every case in every lab: a case attacks the grader, which is the same for every lab, and
    grading each of them seven times was a third of the suite's time. Why the cases that run go to the
    light labs only (those without a ``SUBMISSION_WEIGHT``): a case refused or withheld before its run
    costs the same in every lab, but one that runs pays for all of its lab's cells, five times as much in
    lab 05 as in lab 01.
    """
    from tests import hostile  # the catalogue imports this module

    labs = labs or lab_names()
    chosen = [case for case in hostile.cases() if case.policy == policy]
    if labs.index(lab) == 0:
        return chosen
    if not policy:
        return []
    others = labs[1:]
    light = [name for name in others if name not in SUBMISSION_WEIGHT] or others
    running = [case for case in chosen if case.flag not in NEVER_RUN]
    not_run = [case for case in chosen if case.flag in NEVER_RUN]
    second_lab = {case.student: light[k % len(light)] for k, case in enumerate(running)}
    second_lab |= {case.student: others[k % len(others)] for k, case in enumerate(not_run)}
    return [case for case in chosen if second_lab[case.student] == lab]


def hostile_submissions(course: Path, lab: str, lab_fixtures: list[Fixture], *, policy: bool) -> Submissions:
    """The hostile cases of ``hostile_cases_for`` graded with the code policy on (``policy``) or off."""
    from tests import hostile  # the catalogue imports this module

    (source_path,) = source_notebooks(lab, course)
    (release_path,) = release_notebooks(lab, course)
    release = nbformat.read(release_path, as_version=4)
    answers = solution_sources(nbformat.read(source_path, as_version=4))
    wrong = {**answers, **hostile.wrong_answers(lab_fixtures)}
    return {
        case.student: {release_path.name: case.build(release, answers, wrong)}
        for case in hostile_cases_for(lab, policy=policy)
    }


#: The report flags of a hostile case the grader never runs: grades withheld by the code policy, or refused.
NEVER_RUN = frozenset({"withheld", "refused"})

#: What a submission that runs costs to grade in a lab, against one of lab 01's (a lab not listed counts as 1): its
#: kernel's CPU and the grader's own (about 0.3 s), from the grader's reports of 2026-12-07 (lab 05 4.6 s of kernel
#: CPU: torch.compile and the profiler; lab 06 3.3 s: torch.export and ONNX; lab 07 1.25 s; the others 0.8 to
#: 1.1 s). Only how the commands share the labs depends on it: by students alone, labs 05 and 06 fell in one
#: command, which ran 370 s while the other ran 200.
SUBMISSION_WEIGHT = {"lab05_acceleration": 4.5, "lab06_distributed_export": 3.5, "lab07_bug_hunt": 1.5}

#: What a hostile case that never runs (``NEVER_RUN``) costs, in the same unit: nbgrader's steps and the code
#: policy's reading, no kernel (lab 01 has 35 of its 55 policy cases so, which counted as whole submissions put
#: it in the longer command).
NOT_RUN_WEIGHT = 0.25


def class_work(lab: str, students: Iterable[str], not_run: set[str]) -> float:
    """What grading ``students`` of ``lab`` costs, in lab 01 submissions that run (``not_run``: the students whose
    submission is withheld or refused before it runs)."""
    weight = SUBMISSION_WEIGHT.get(lab, 1)
    return sum(NOT_RUN_WEIGHT if student in not_run else weight for student in students)


def command_groups(class_sizes: Mapping[str, float], commands: int) -> list[list[str]]:
    """The labs each grading command grades: at most ``commands`` groups of about as much work each.

    ``class_sizes``: each lab's students, weighted by what one costs (``SUBMISSION_WEIGHT``). Each lab,
    the largest first, joins the group with the least so far; the groups are returned largest first,
    and each keeps its labs in name order.
    """
    groups: list[list[str]] = [[] for _ in range(max(1, commands))]
    work = [0.0] * len(groups)
    for lab in sorted(class_sizes, key=lambda lab: (-class_sizes[lab], lab)):
        fewest = work.index(min(work))
        groups[fewest].append(lab)
        work[fewest] += class_sizes[lab]
    ranked = sorted(range(len(groups)), key=lambda index: -work[index])
    return [sorted(groups[index]) for index in ranked if groups[index]]


def grade_labs(
    labs: Iterable[str],
    workdir: Path,
    *,
    jobs: int | None = None,
    course_labs: Path = LABS,
    fixtures_root: Path = FIXTURES,
    runtime_lab: str | None = None,
) -> dict[str, GradedLab | LabToolError]:
    """Regenerate and autograde the reference and hostile submissions of several labs in temporary courses.

    Why the shape: one ``nbgrader autograde`` call grades its students one after the other, and
    each call pays a start of its own (nbgrader and a warm server importing torch: about 7 s of CPU on
    the 2-core machine, where four light labs graded by one command took 72 s of CPU and by four 100 s).
    So the labs are graded by ``jobs`` ordinary commands (``command_groups``: labs of about as much work
    together, in one copy of the course whose gradebook knows every lab, see
    generate_assignments), each of several labs by ``nbgrader autograde "*"``, which still runs each
    lab's source once for its reference outputs, with torch's threads set so that jobs times threads
    fits the cores, the commands side by side. ``runtime_lab`` also gets a course of its own whose
    configuration turns the code policy off: there the runtime-only hostile cases run, followed by an
    honest student who must keep full marks (the runtime defences do not depend on the lab, so one lab
    proves them); it starts with the classes' commands, beside them: its kernels mostly wait out time
    limits (52 students, 145 s of wall time for 80 s of CPU), and the classes' commands fill those
    waits. Queued behind them, it ran alone for the last 70 s of the grading. A lab that
    cannot be prepared maps to its LabToolError; a command that fails maps every lab it graded to its
    error, which names them.
    """
    from tests import hostile  # the catalogue imports this module
    from ptgrader.autograde import kernel_threads  # imported late: it pulls in nbgrader

    jobs = jobs or default_jobs()
    names = list(labs)
    outcome: dict[str, GradedLab | LabToolError] = {}
    submissions: dict[str, Submissions] = {}  # each lab's class: reference, fixture and hostile submissions
    courses: dict[str, list[Path]] = {lab: [] for lab in names}  # the courses each lab is graded in
    runtime_course = workdir / "runtime-only"
    generated_course = copy_course(workdir / "generated", course_labs)
    generated = generate_assignments(generated_course, names)

    def prepare(lab: str) -> None:
        if isinstance(generated[lab], LabToolError):
            raise generated[lab]
        lab_fixtures = fixtures(lab, fixtures_root)
        submissions[lab] = reference_submissions(generated_course, lab, lab_fixtures + alternatives(lab, fixtures_root))
        submissions[lab].update(hostile_submissions(generated_course, lab, lab_fixtures, policy=True))
        if lab == runtime_lab:
            course = runtime_course
            shutil.copytree(generated_course, course)
            with open(course / CONFIG_NAME, "a", encoding="utf-8") as config:
                config.write(RUNTIME_ONLY_CONFIG)
            runtime = hostile_submissions(generated_course, lab, lab_fixtures, policy=False)
            runtime[HONEST_AFTER_HOSTILE] = submissions[lab][SOLUTION_STUDENT]
            for student, notebooks in runtime.items():
                submit(course, lab, student, notebooks)
            hostile.arrange_submissions(course, lab)  # links, FIFOs and odd names, which nbformat does not write
            courses[lab].append(course)

    def submit_group(group: list[str], course: Path) -> None:
        shutil.copytree(generated_course, course)
        for lab in group:
            for student, notebooks in submissions[lab].items():
                submit(course, lab, student, notebooks)
            hostile.arrange_submissions(course, lab)
            courses[lab].append(course)

    with ThreadPoolExecutor(max_workers=jobs + 1) as pool:  # the classes' commands, and the runtime course's
        for lab, future in [(lab, pool.submit(prepare, lab)) for lab in names]:
            try:
                future.result()
            except LabToolError as exc:
                outcome[lab] = exc
            except Exception as exc:  # a malformed lab (bad notebook, bad fixture) fails its own tests only
                outcome[lab] = LabToolError(f"{lab}: {type(exc).__name__}: {exc}")
        not_run = {case.student for case in hostile.cases() if case.flag in NEVER_RUN}
        work = {lab: class_work(lab, submissions[lab], not_run) for lab in names if lab not in outcome}
        groups = command_groups(work, jobs)
        group_courses = [workdir / f"class{index}" for index in range(len(groups))]
        for future in [pool.submit(submit_group, group, course) for group, course in zip(groups, group_courses)]:
            future.result()
        commands = [(group, course, group[0] if len(group) == 1 else "*") for group, course in zip(groups, group_courses)]
        if runtime_course in courses.get(runtime_lab or "", []):
            commands.append(([runtime_lab], runtime_course, runtime_lab))
        threads = kernel_threads(jobs)
        tasks = [(group, pool.submit(autograde, course, assignment, threads)) for group, course, assignment in commands]
        for group, future in tasks:
            try:
                future.result()
            except LabToolError as exc:
                for lab in group:
                    outcome.setdefault(lab, LabToolError(f"{lab} was graded in one command with {', '.join(group)},"
                                                         f" which failed:\n{exc}") if len(group) > 1 else exc)
    for lab in names:
        for course in courses.get(lab, []):
            hostile.undo_arrangements(course, lab)
    for lab in names:
        if lab in outcome:
            continue
        scores: Scores = {}
        reports: dict[str, dict[str, Any]] = {}
        sizes: dict[str, int] = {}
        for course in courses[lab]:
            scores.update(read_scores(course, lab))
            reports.update(read_reports(course, lab))
            sizes.update(graded_notebook_bytes(course, lab))
        release = generated_course / "release" / lab
        outcome[lab] = GradedLab(lab, release, scores, fixtures(lab, fixtures_root), reports, sizes, courses[lab])
    return outcome


# ------------------------------------------------------------------------------- comparing notebooks


def notebook_signature(nb: nbformat.NotebookNode) -> list[tuple[str, str, dict[str, Any]]]:
    """What a release is made of: each cell's type, source and nbgrader metadata (checksums included)."""
    return [(cell.cell_type, cell.source, nbgrader_meta(cell)) for cell in nb.cells]


def release_differences(committed: Path, generated: Path) -> list[str]:
    """Where the committed release folder differs from a freshly generated one ([] when in sync)."""
    def files(folder: Path) -> set[str]:
        return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else set()

    problems = []
    have, want = files(committed), files(generated)
    problems += [f"missing {name}" for name in sorted(want - have)]
    problems += [f"stale extra file {name}" for name in sorted(have - want)]
    for name in sorted(have & want):
        if not name.endswith(".ipynb"):
            if (committed / name).read_bytes() != (generated / name).read_bytes():
                problems.append(f"{name} differs")
            continue
        old = notebook_signature(nbformat.read(committed / name, as_version=4))
        new = notebook_signature(nbformat.read(generated / name, as_version=4))
        if len(old) != len(new):
            problems.append(f"{name}: {len(old)} cells, the sources make {len(new)}")
        for index, (a, b) in enumerate(zip(old, new, strict=False)):
            if a != b:
                grade_id = b[2].get("grade_id", "no grade_id")
                problems.append(f"{name}: cell {index} ({grade_id}) differs")
    return problems
