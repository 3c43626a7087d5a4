"""One bad submission cannot stop or harm a grading run, and nothing it wrote runs in a page (issue 25).

- the submission folder check (:mod:`ptgrader.intake`) on links, FIFOs, devices, odd names and timestamps;
- image metadata kept only as a numeric size (:mod:`ptgrader.outputs`), Markdown rendered inert
  (:mod:`ptgrader.safe_html`);
- a small course graded by ``python -m ptgrader.autograde --jobs 2`` (two ``nbgrader autograde``
  commands) with :class:`ptgrader.failsafe.GuardedExporter` and :class:`ptgrader.repair.RestoreCellFlags`,
  and a step that fails the way a grader can fail on one student: every other student is graded,
  each failing one gets 0 and its report, the run exits 0 and prints no escape code. It runs no
  kernel (a few seconds); the labs' hostile cases (tests/hostile.py) prove the same through the
  course's own configuration.
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
import runpy
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from ptgrader import autograde, intake
from ptgrader.autograde import relay
from ptgrader.outputs import METADATA, make_safe
from ptgrader import safe_html
from ptgrader.safe_html import markdown_to_safe_html
from tests import hostile, html_pages, lab_tools, run_profile

ESCAPE_CODES = "\x1b[2J\x1b[H[AutogradeApp | INFO] fine"
#: A student id that nbgrader's comma-joined exclusion option read as two: it took "honest" out of every job.
COMMA_ID = "honest,x"


def _submission(tmp_path: Path) -> Path:
    folder = tmp_path / "submitted" / "alice" / "lab"
    folder.mkdir(parents=True)
    (folder / "lab.ipynb").write_text("{}")
    return folder


def test_a_folder_of_regular_files_with_plain_names_is_admitted(tmp_path: Path) -> None:
    folder = _submission(tmp_path)
    (folder / ".ipynb_checkpoints").mkdir()
    (folder / ".ipynb_checkpoints" / "lab-checkpoint.ipynb").write_text("{}")
    (folder / "timestamp.txt").write_text("2026-12-01 10:00:00.000000 UTC")
    assert intake.problems(folder) == []


@pytest.mark.parametrize("shape", ["link to the source", "link to stdin", "FIFO", "linked lab folder",
                                   "link in a subfolder", "device"])
def test_anything_but_a_regular_file_is_refused_without_being_opened(tmp_path: Path, shape: str) -> None:
    folder = _submission(tmp_path)
    notebook = folder / "lab.ipynb"
    if shape == "device" and os.geteuid() != 0:
        pytest.skip("making a device file needs root")
    if shape != "linked lab folder":
        notebook.unlink()
    if shape == "link to the source":
        (tmp_path / "source.ipynb").write_text("{}")
        notebook.symlink_to(tmp_path / "source.ipynb")
    elif shape == "link to stdin":
        notebook.symlink_to("/dev/stdin")
    elif shape == "FIFO":
        os.mkfifo(notebook)  # a read would block this test forever: the check must not open it
    elif shape == "device":
        os.mknod(notebook, 0o600 | 0o020000, os.makedev(1, 3))  # a character device, like /dev/null
    elif shape == "link in a subfolder":
        (folder / "data").mkdir()
        (folder / "data" / "x.csv").symlink_to("/etc/passwd")
        notebook.write_text("{}")
    else:
        (tmp_path / "elsewhere").mkdir()
        folder.rename(tmp_path / "elsewhere" / "lab")
        folder.symlink_to(tmp_path / "elsewhere" / "lab", target_is_directory=True)
    found = intake.problems(folder)
    assert len(found) == 1 and ("link" in found[0] or "FIFO" in found[0] or "device" in found[0]), found


def test_odd_names_are_refused_and_reported_escaped(tmp_path: Path) -> None:
    folder = _submission(tmp_path)
    (folder / f"{ESCAPE_CODES}.ipynb").write_text("{}")
    (folder / "notes \u202egpj.exe").write_text("")  # a right-to-left override hides the real extension
    found = intake.problems(folder)
    assert len(found) == 2 and all("\x1b" not in line and "\u202e" not in line for line in found), found
    assert any("\\x1b[2J" in line for line in found) and any("\\u202e" in line for line in found)
    student = tmp_path / "submitted" / ESCAPE_CODES / "lab"
    student.mkdir(parents=True)
    assert "the student folder" in intake.problems(student)[0]


def test_a_hard_link_is_refused(tmp_path: Path) -> None:
    """A hard link looks like a regular file to lstat; linked to the lab's source it would be graded as the solution."""
    folder = _submission(tmp_path)
    source = tmp_path / "source.ipynb"
    source.write_text("{}")
    (folder / "lab.ipynb").unlink()
    os.link(source, folder / "lab.ipynb")
    assert intake.problems(folder) == ["lab.ipynb: a hard link (one of 2 names of the same file)"]


def test_a_file_with_the_set_user_or_group_id_bit_is_refused(tmp_path: Path) -> None:
    """nbgrader copies a submission's files as the grader (root, often), and a copy keeps the mode's bits."""
    submission = tmp_path / "submitted" / "mallory" / "lab"
    submission.mkdir(parents=True)
    tool = submission / "tool.bin"
    tool.write_bytes(b"\x7fELF")
    for bit in (0o4755, 0o2755):
        tool.chmod(bit)
        assert intake.problems(submission) == ["tool.bin: a file with the set-user-ID or set-group-ID bit"]
    tool.chmod(0o755)
    assert intake.problems(submission) == []


def test_only_the_labs_own_files_stay_in_the_graded_folder(tmp_path: Path) -> None:
    """Round 10: an HTML page handed in beside the notebook was served by the formgrader from the instructor's
    own Jupyter server, and a folder named like the feedback page stopped generate_feedback."""
    source, graded = tmp_path / "source" / "lab", tmp_path / "autograded" / "mallory" / "lab"
    (source / "data").mkdir(parents=True)
    (source / "data" / "table.csv").write_text("a,b\n")
    (source / "lab.ipynb").write_text("{}")
    (graded / "data").mkdir(parents=True)
    (graded / "data" / "table.csv").write_text("a,b\n")  # the lab's own, copied over by nbgrader
    (graded / "timestamp.txt").write_text("2026-12-05 03:00:00\n")
    (graded / "figure.html").write_text("<script>alert(1)</script>")
    (graded / "lab.html" / "deep").mkdir(parents=True)
    (graded / "lab.html" / "deep" / "index.html").write_text("x")
    (graded / "data" / "mine.html").write_text("x")
    dropped = intake.drop_files_not_of_the_lab(graded, source, also_kept=("report.json",))
    assert dropped == ["data/mine.html", "figure.html", "lab.html/deep/index.html"]
    assert sorted(str(p.relative_to(graded)) for p in graded.rglob("*")) == ["data", "data/table.csv", "timestamp.txt"]


def test_a_file_or_a_submission_too_large_to_read_is_refused(tmp_path: Path) -> None:
    """nbgrader reads a notebook whole, at about 48 times its size in memory: sizes are checked first (sparse files)."""
    folder = _submission(tmp_path)
    with open(folder / "lab.ipynb", "wb") as notebook:
        notebook.truncate(intake.MAX_FILE_BYTES + 1)
    assert intake.problems(folder) == ["lab.ipynb: 10,485,761 bytes, more than the 10 MiB a file may have"]
    (folder / "lab.ipynb").unlink()
    for index in range(3):
        with open(folder / f"data{index}.bin", "wb") as part:
            part.truncate(intake.MAX_FILE_BYTES - 1)
    assert intake.problems(folder) == ["more than 20 MiB of files"]


def test_folders_nested_deeper_than_a_lab_needs_are_refused_without_a_deep_walk(tmp_path: Path) -> None:
    """A thousand levels exhausted os.walk's recursion (Python 3.11) and ended the whole run.

    The same happens here with 100 levels under a recursion limit 60 frames above the test's own depth.
    """
    folder = _submission(tmp_path)
    (hostile.nest_folders(folder, 100) / "leaf.txt").write_text("deep")
    with hostile.little_recursion():
        found = intake.problems(folder)
    assert found == [f"folders nested more than {intake.MAX_DEPTH} levels deep"]
    shallow = _submission(tmp_path / "other")
    shallow.joinpath(*["n"] * (intake.MAX_DEPTH - 1)).mkdir(parents=True)
    assert intake.problems(shallow) == []


@pytest.mark.parametrize("stamp", ["yesterday-ish", "9" * 300])
def test_a_timestamp_nbgrader_cannot_read_is_refused(tmp_path: Path, stamp: str) -> None:
    folder = _submission(tmp_path)
    (folder / "timestamp.txt").write_text(stamp)
    assert [problem.split(":")[0] for problem in intake.problems(folder)] == ["timestamp.txt"]


def test_the_parallel_grader_relays_its_jobs_lines_escaped() -> None:
    out = io.StringIO()
    relay([f"{ESCAPE_CODES}\n", "graded\n"], "[2] ", out)
    assert out.getvalue() == "[2] \\x1b[2J\\x1b[H[AutogradeApp | INFO] fine\n[2] graded\n"


def test_each_job_of_the_parallel_grader_gets_its_own_share_of_the_cores() -> None:
    """Shares split the cores without overlap (one core each, in turn, for more jobs than cores), and a process
    started in ``on_cores`` runs on its share while the grader's own thread gets all of its cores back."""
    assert autograde.core_shares([0, 1, 2, 3, 4], 2) == [[0, 1, 2], [3, 4]]
    assert autograde.core_shares([0, 1], 2) == [[0], [1]]
    assert autograde.core_shares([2, 5], 3) == [[2], [5], [2]]
    assert autograde.core_shares([0, 1, 2], 1) == [[0, 1, 2]]
    everything = os.sched_getaffinity(0)
    first = min(everything)
    with autograde.on_cores([first]):
        child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                               capture_output=True, text=True, check=True)
    assert child.stdout.strip() == f"[{first}]"
    assert os.sched_getaffinity(0) == everything


def test_image_metadata_keeps_only_a_numeric_size() -> None:
    """nbconvert writes width=... unquoted: "1 onerror=alert(1)" would be an attribute of the <img>."""
    figure = html_pages.encoded_image(40, 30)
    attack = nbformat.v4.new_output(
        "display_data", data={"image/png": figure, "text/plain": "<Figure>"},
        metadata={"image/png": {"width": "1 onerror=alert(1)", "height": 30, "alt": "x"}, "filenames": {}},
    )
    assert make_safe(attack) == [METADATA] and attack.metadata == {"image/png": {"height": 30}}
    honest = nbformat.v4.new_output("display_data", data={"image/png": figure, "text/plain": "<Figure>"},
                                    metadata={"image/png": {"width": 400, "height": 300}})
    assert make_safe(honest) == [] and honest.metadata == {"image/png": {"width": 400, "height": 300}}
    for size in (-1, 0, True, 2.5):
        odd = nbformat.v4.new_output("display_data", data={"image/png": figure},
                                     metadata={"image/png": {"width": size}})
        assert make_safe(odd) == [METADATA] and odd.metadata == {}, size


@pytest.mark.parametrize(("mime", "data", "kept"), [
    ("image/png", html_pages.encoded_image(400, 300), True),
    ("image/png", "\n".join(textwrap.wrap(html_pages.encoded_image(400, 300), 76)), True),  # base64 in lines, as some tools write it
    ("image/gif", html_pages.encoded_image(4096, 2, "GIF"), True),
    ("image/png", html_pages.encoded_image(1, 100_000), False),  # round 51: 1 x 1,000,000 px by its own header, no metadata
    ("image/jpeg", html_pages.encoded_image(5000, 1, "JPEG"), False),
    ("image/gif", html_pages.encoded_image(3, 3), False),  # a PNG said to be a GIF
    ("image/png", "iVBOR", False),  # no image at all
    ("image/png", ["not", "a string"], False),
    ("image/png", html_pages.encoded_image(64, 64, frames=3), False),  # round 60: an APNG, redrawn while in view
    ("image/gif", html_pages.encoded_image(64, 64, "GIF", frames=3), False),
])
def test_an_image_is_kept_only_at_a_size_a_page_shows_by_its_own_header(mime: str, data: object, kept: bool) -> None:
    """A browser lays an image out at the size its file states: round 51's 2 kB PNG said 1 x 1,000,000 px, with no
    metadata to cap, and every later part of the feedback page lay a million pixels down."""
    output = nbformat.from_dict({"output_type": "display_data", "data": {mime: data}, "metadata": {}})
    dropped = make_safe(output)
    assert (mime in output.data) == kept and (dropped == []) == kept, (dropped, output.data)
    if not kept:
        assert output.data["text/plain"].startswith(f"[{mime} output not kept by the grader: {mime} ")


def test_markdown_renders_inert_and_readable() -> None:
    hostile = (lab_tools.FIXTURES / "hostile" / "broken" / "xss_markdown.md").read_text(encoding="utf-8")
    assert html_pages.active_parts(markdown_to_safe_html(hostile), markdown=True) == []
    honest = markdown_to_safe_html("# Part 1\n\nSee [the docs](https://pytorch.org) and `x.view(2, 3)`.\n\n"
                                   "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nx = 1\n```")
    for kept in ("<h1>Part 1", '<a href="https://pytorch.org">', "<code>x.view(2, 3)</code>", "<td>1</td>",
                 '<span class="n">x</span>'):
        assert kept in honest, (kept, honest)


def test_markdown_nested_past_a_limit_renders_at_once_as_text() -> None:
    """Round 7: 20,000 unclosed <ul><li> (160 KB) held the sanitiser for 179 s (its parser walks the stack of open
    tags at each new tag), and with it generate_feedback and the formgrader's server. Past MAX_DEPTH, MAX_TAGS or
    MAX_CHARS the cell is shown as escaped text, at once; a cell nested as deep as Markdown needs renders as ever."""
    bomb = (lab_tools.FIXTURES / "hostile" / "broken" / "markdown_nesting_bomb.md").read_text(encoding="utf-8") * 20
    started = time.process_time()
    page = markdown_to_safe_html(bomb)
    assert time.process_time() - started < 2.0
    assert page.startswith("<pre>&lt;ul&gt;&lt;li&gt;") and html_pages.active_parts(page, markdown=True) == []
    # Round 10: end tags that close nothing (<em></a>) nest as deep, and 20 cells of them held the page 4 min.
    for deep in ("<em></a>" * 12_000, "<b><i>x</b></i>" * 3_000):
        started = time.process_time()
        assert markdown_to_safe_html(deep).startswith("<pre>"), deep[:20]
        assert time.process_time() - started < 1.0
    assert markdown_to_safe_html("x" * (safe_html.MAX_CHARS + 10)).endswith("[cut by the grader]</pre>")
    lists = "\n".join("  " * level + "- item" for level in range(20))  # 20 levels: 40 open tags
    assert "<pre>" not in markdown_to_safe_html(lists) and markdown_to_safe_html(lists).count("<li>") == 20


def test_markdown_links_and_images_stay_beside_the_page() -> None:
    """Round 11: a link through ``..%2F`` reached a file handed in under submitted/ (its script ran as the
    instructor on one click), and an image of ``../../../logout`` logged the instructor out on each view."""
    page = markdown_to_safe_html(
        "[web](https://pytorch.org) [part](#part-1) [mail](mailto:a@b.c) [lab file](data/table.csv) "
        "![plot](plot.png) [up](..%2F..%2Fsubmitted%2Fc00%2Flab%2Ffigure.html) [up2](../../gradebook.db) "
        "![out](../../../logout) [root](/logout) [dot](./figure.html) [hidden](.ipynb_checkpoints/x) "
        "![remote](https://example.com/pixel.png) [js](javascript:alert(1)) [js2](javascript://x%0aalert(1))")
    hrefs = re.findall(r'href="([^"]*)"', page)
    sources = re.findall(r'src="([^"]*)"', page)
    assert hrefs == ["https://pytorch.org", "#part-1", "mailto:a@b.c", "data/table.csv"], hrefs
    assert sources == ["plot.png"], sources


def test_markdown_images_keep_no_size() -> None:
    """Round 32: an image of a Markdown cell said to be 40,000,000 px tall (Chromium lays it out 33,554,432 px
    tall) put every cell after it, the parts and their scores, past the end of the page. Round 74: sizes of 4096
    px, repeated, do the same; a Markdown image shows no file a student sent, so no size is kept at all."""
    page = markdown_to_safe_html('<img src="a" width="1" height="40000000"> <img src="b" width="320" height="240"> '
                                 '<img src="c" width="0" height="1e3"> <img src="d" width="4096" height=" 12 ">')
    sizes = re.findall(r'<img src="(\w)"((?: (?:width|height)="[^"]*")*)', page)
    assert sizes == [("a", ""), ("b", ""), ("c", ""), ("d", "")], sizes


def test_markdown_cannot_steer_the_pages_scripts_or_styles() -> None:
    """No id (the formgrader finds score fields by id) and no class but code highlighting's (Bootstrap's modal)."""
    page = markdown_to_safe_html('### test_flatten_heads\n\n<div class="modal show in">12 / 12</div>\n\n'
                                 '<span class="n">x</span> <p class="k navbar-fixed-top">y</p>')
    parts = html_pages.active_parts(page, markdown=True)
    assert not [part for part in parts if " id=" in part], parts
    assert parts == [], parts
    assert '<span class="n">x</span>' in page and "modal" not in page


def test_the_formgrader_of_the_course_renders_markdown_through_the_sanitiser(monkeypatch: pytest.MonkeyPatch) -> None:
    """The formgrader reads the course's nbgrader_config.py from the folder Jupyter runs in, as here."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension

    monkeypatch.chdir(lab_tools.LABS)
    extension = FormgradeExtension()
    extension.root_dir = str(lab_tools.LABS.parent)
    extension.initialize([])
    exporter = HTMLExporter(config=extension.config)
    assert exporter.template_name == "formgrade"
    markdown = (lab_tools.FIXTURES / "hostile" / "broken" / "xss_markdown.md").read_text(encoding="utf-8")
    assert html_pages.active_parts(exporter.environment.filters["markdown2html"](markdown), markdown=True) == []


def test_no_cell_takes_long_to_render_whatever_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 23: 18 KB of code fences in Pygments' easytrieve language took generate_feedback 4 min 42 s, code cells
    whose metadata named that language 1 min 48 s, and 9 MB of ``[a](`` in Markdown 9 min 14 s. A fence is
    highlighted only in a few languages, a code cell always as Python, a cell past MAX_RENDERED_CHARS is text,
    and the graded notebook keeps at most RENDERED_BUDGET characters of a submission's own cells. Round 24: 98 KB of
    ``<a`` in a raw cell took the sanitiser 445 s (a ``<`` that begins no tag), and an image pasted into a
    Markdown cell stopped generate_feedback ("missing attachment")."""
    slow = "a" + "\t" * 3000 + "a"
    started = time.process_time()
    fenced = markdown_to_safe_html(f"```easytrieve\n{slow}\n```")
    code = safe_html.highlight_python(slow, "ipython3", {"magics_language": "easytrieve"})
    links = markdown_to_safe_html("[a](" * (safe_html.MAX_RENDERED_CHARS // 4 + 1))
    strays = [safe_html.clean("<a" * 49_000), markdown_to_safe_html("<div\n" + "<a" * 9_990)]
    assert time.process_time() - started < 2.0
    assert all(page.startswith("<pre>&lt;") for page in strays), [page[:20] for page in strays]
    assert markdown_to_safe_html("![shot.png](attachment:shot.png)") == '<p><img alt="shot.png"></p>\n' 
    assert fenced.startswith("<pre><code>") and 'class="' not in fenced
    assert 'highlight hl-ipython3"><pre><span></span><span class="n">a</span>' in code
    assert links.startswith("<pre>[a](")
    assert '<span class="n">x</span>' in markdown_to_safe_html("```Python\nx = 1\n```")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# The lab's own"),
                                               *[nbformat.v4.new_markdown_cell("m" * 15_000) for _ in range(4)],
                                               *[nbformat.v4.new_raw_cell("m" * 15_000) for _ in range(2)],
                                               *[nbformat.v4.new_code_cell("m" * 15_000) for _ in range(2)]])
    monkeypatch.setattr(safe_html, "release_cells", lambda config, resources: notebook.cells[:1])
    limited, _ = safe_html.LimitRenderedCells().preprocess(copy.deepcopy(notebook), {"nbgrader": {
        "student": "s", "assignment": "lab"}})
    kept = [cell.source for cell in limited.cells if cell.source.startswith("m")]
    assert len(kept) == safe_html.RENDERED_BUDGET // 15_000 and limited.cells[0].source == "# The lab's own"
    assert limited.cells[-1].source.startswith("# [cut by the grader: 15,000 characters")
    config = runpy.run_path(str(lab_tools.LABS / lab_tools.CONFIG_NAME), init_globals={"get_config": Config})["c"]
    assert safe_html.LimitRenderedCells in config.Autograde.autograde_preprocessors
    assert config.HTMLExporter.filters["highlight_code"] is safe_html.highlight_python


def test_a_notebook_of_too_many_cells_is_refused_before_its_cells_are_read() -> None:
    """Round 24: 20,000 cells of ``pass`` cost the grader 98 s of CPU past the kernel's time limit, and the
    pages 50 s. The course's first step refuses more than MAX_CELLS (the failsafe: no marks, the reason)."""
    cells = [nbformat.v4.new_code_cell("pass") for _ in range(intake.MAX_CELLS)]
    intake.CellCountCheck().preprocess(nbformat.v4.new_notebook(cells=cells), {})
    with pytest.raises(intake.TooManyCells, match="1,001 cells, more than the 1,000"):
        intake.CellCountCheck().preprocess(nbformat.v4.new_notebook(cells=[*cells, nbformat.v4.new_code_cell()]), {})
    config = runpy.run_path(str(lab_tools.LABS / lab_tools.CONFIG_NAME), init_globals={"get_config": Config})["c"]
    assert config.Autograde.sanitize_preprocessors[0] is intake.CellCountCheck


# --------------------------------------------------------------------------------- a small course

#: A lab of one part, graded without a kernel: a step in place of the run fails on the students it names.
SMALL_CONFIG = '''
import os

from nbgrader.preprocessors import (
    CheckCellMetadata, ClearOutput, DeduplicateIds, NbGraderPreprocessor, OverwriteCells, SaveAutoGrades,
)

from ptgrader.failsafe import GuardedExporter
from ptgrader.repair import RestoreCellFlags


class FailsOnSomeStudents(NbGraderPreprocessor):
    """Stands for any failure of the grader on one submission: a student "raises-<kind>" makes it raise <kind>."""

    def preprocess(self, nb, resources):
        student = resources["nbgrader"]["student"]
        kinds = {"recursion": RecursionError, "key": KeyError, "oserror": OSError}
        if student.startswith("raises-"):
            raise kinds[student.split("-")[1]]("while grading " + student + " \\x1b[2J")
        return nb, resources


c = get_config()
c.CourseDirectory.course_id = "small"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.Autograde.exporter_class = GuardedExporter
c.Application.logging_config = {"formatters": {"console": {"class": "ptgrader.intake.EscapingLogFormatter"}}}
c.Autograde.sanitize_preprocessors = [ClearOutput, RestoreCellFlags, DeduplicateIds, OverwriteCells, CheckCellMetadata]
c.Autograde.autograde_preprocessors = [FailsOnSomeStudents, SaveAutoGrades]
'''


@pytest.fixture(scope="module")
def small_course(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A course graded once by ``python -m ptgrader.autograde small --jobs 2``: (course, its output)."""
    course = tmp_path_factory.mktemp("small-course")
    (course / lab_tools.CONFIG_NAME).write_text(SMALL_CONFIG)
    (course / "source" / "small").mkdir(parents=True)
    nbformat.write(lab_tools.one_part_lab(), course / "source" / "small" / "small.ipynb")
    (course / "source" / "small" / "data.txt").write_text("the lab's data, copied over every submission")
    release = nbformat.read(lab_tools.generate_assignment(course, "small") / "small.ipynb", as_version=4)
    flagged = nbformat.from_dict(release)
    flagged.cells[1].metadata.nbgrader.update(solution=True, points=100)  # nbgrader: "Inconsistent checksums"
    for student, nb in {"honest": release, "raises-recursion": release, "raises-key": release,
                        "raises-oserror": release, "flags-edited": flagged, "fifo": release,
                        ESCAPE_CODES: release, "unreadable": release, COMMA_ID: release,
                        "folder-over-data": release}.items():
        lab_tools.submit(course, "small", student, {"small.ipynb": nb})
    lab_tools.submit(course, "small", "renamed", {"small-Copy1.ipynb": release})  # Jupyter's "Make a copy"
    (course / "submitted" / "unreadable" / "small" / "small.ipynb").write_text("{ not a notebook")
    fifo = course / "submitted" / "fifo" / "small" / "small.ipynb"
    fifo.unlink()
    os.mkfifo(fifo)
    # A folder where the lab has a file: nbgrader's copy of the lab's files over the submission raises.
    (course / "submitted" / "folder-over-data" / "small" / "data.txt").mkdir()
    (course / "submitted" / "folder-over-data" / "small" / "data.txt" / "notes.txt").write_text("")
    everyone = autograde.students(course, "small")
    assert everyone.index("honest") % 2 != everyone.index(COMMA_ID) % 2, "the two must fall in different jobs"
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    run = subprocess.run([sys.executable, "-m", "ptgrader.autograde", "small", "--jobs", "2"], cwd=course, env=env,
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300, check=False)
    assert run.returncode == 0, f"the run exited {run.returncode}:\n{run.stdout}{run.stderr}"
    run_profile.count_grading_kernels(lab_tools.read_reports(course, "small").values())
    return course, run.stdout + run.stderr


def test_every_failing_submission_gets_no_marks_and_a_report(small_course: tuple[Path, str]) -> None:
    course, _ = small_course
    scores = {student: cells["test_answer"][0] for student, cells in lab_tools.read_scores(course, "small").items()}
    assert scores == {"honest": 1.0, "flags-edited": 1.0, "raises-recursion": 0.0, "raises-key": 0.0,
                      "raises-oserror": 0.0, "unreadable": 0.0, "fifo": 0.0, "renamed": 0.0, "folder-over-data": 0.0}
    reports = lab_tools.read_reports(course, "small")
    assert reports["renamed"]["refused"] == ["none of the lab's notebooks (small.ipynb); found small-Copy1.ipynb"]
    assert reports["folder-over-data"]["unprocessed"].startswith("IsADirectoryError: "), reports["folder-over-data"]
    for student in ("raises-recursion", "raises-key", "raises-oserror", "unreadable"):
        assert reports[student]["unprocessed"], reports[student]
        graded = nbformat.read(course / "autograded" / student / "small" / "small.ipynb", as_version=4)
        assert "Needs review" in graded.cells[0].source
    assert reports["raises-recursion"]["unprocessed"].startswith("RecursionError: while grading raises-recursion")
    assert reports["fifo"]["refused"] == ["small.ipynb: a FIFO, not a regular file"]
    assert reports["flags-edited"]["restored_flags"] == ["test_answer: points, solution"]
    assert "honest" not in reports


def test_the_run_logs_no_escape_code_and_the_listing_names_every_submission(small_course: tuple[Path, str]) -> None:
    course, output = small_course
    assert "\x1b" not in output and "\\x1b[2J" in output
    listing = subprocess.run([sys.executable, "-m", "ptgrader.report", "small"], cwd=course, capture_output=True,
                             text=True, check=True).stdout
    assert "\x1b" not in listing
    review = {line.split()[1] for line in listing.splitlines() if line.startswith("REVIEW")}
    assert review == {"raises-recursion", "raises-key", "raises-oserror", "unreadable", "fifo", "flags-edited",
                      "renamed", "folder-over-data", intake.escaped(ESCAPE_CODES).split()[0], COMMA_ID}
    report = json.loads((course / "autograded" / "fifo" / "small" / lab_tools.REPORT_NAME).read_text())
    assert report["student"] == "fifo"


def test_a_copy_of_a_lab_cell_is_an_ordinary_cell_or_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 19: a lab cell copied and pasted in Jupyter (metadata and all) stopped nbgrader with a KeyError, no
    marks and "needs review". Of a solution's copies the last stays the lab's, as in nbgrader, and the others
    run as the student's own code; of a cell the lab wrote, the copy with the release's cell id stays where it
    is (round 21: keeping the last let a pasted copy move the lab's set-up below student code), and the others
    are left out; the report names each by its place. (tests/hostile.py's ``pasted_cells`` grades one in full.)"""
    from ptgrader import repair

    def cell(kind: str, grade_id: str, source: str, cell_id: str, **flags: bool) -> nbformat.NotebookNode:
        make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        made = make(source, metadata={"nbgrader": {"grade_id": grade_id, "grade": False, "solution": False,
                                                   "locked": False, **flags}})
        made["id"] = cell_id
        return made

    release = [cell("code", "setup", "import torch", "lab-setup", locked=True)]
    monkeypatch.setattr(repair, "release_cells", lambda config, resources: release)
    cells = [cell("code", "setup", "import torch", "lab-setup", locked=True),
             cell("markdown", "text", "Read me.", "t1", locked=True), cell("markdown", "text", "Read me.", "t2",
                                                                            locked=True),
             cell("code", "answer", "x = 1", "a1", solution=True), cell("code", "answer", "x = 2", "a2", solution=True),
             nbformat.v4.new_code_cell("y = x"),
             cell("code", "setup", "import torch", "pasted", locked=True),
             cell("code", "test_answer", "check(x)", "c1", grade=True, locked=True),
             cell("code", "test_answer", "check(x)", "c2", grade=True, locked=True)]
    nb = nbformat.v4.new_notebook(cells=cells)
    resources = {"nbgrader": {"student": "s", "assignment": "lab", "notebook": "lab"}}
    nb, resources = repair.DeduplicateCells().preprocess(nb, resources)
    assert [(c.get("id"), lab_tools.nbgrader_meta(c).get("grade_id")) for c in nb.cells] == [
        ("lab-setup", "setup"), ("t2", "text"), ("a1", None), ("a2", "answer"), (nb.cells[4].get("id"), None),
        ("c2", "test_answer")]
    assert resources["ptgrader"]["restored_flags"] == [
        "cell 2, a copy of text, a cell of the lab's: left out",
        "cell 4, a copy of answer: graded as an ordinary cell",
        "cell 7, a copy of setup, a cell of the lab's: left out",
        "cell 8, a copy of test_answer, a cell of the lab's: left out"]
