"""Static hygiene rules for committed notebooks: what nbval cannot see.

nbval re-runs the cells and compares outputs; these rules check that the committed outputs
themselves are trustworthy. Each rule returns the problems it found (an empty list when the
notebook is clean), so the tests can both apply it to the book and prove it rejects a bad notebook.
"""

from __future__ import annotations

import ast
import base64
import re
import struct
import sys
from collections.abc import Callable

import nbformat

from tests.manifest import ROOT
from tests.notebook_tools import SOLUTION_TITLE, is_lab, solution_cells, tags
from tests.timing_tables import notebook_tables

sys.path.insert(0, str(ROOT / "book" / "_ext"))
from claims_table import Claim, inconsistent_keys, read_claims, section_titles  # noqa: E402,F401  (book/_ext/claims_table.py: the generated pages read the same tables)

STDERR_TAG = "stderr-expected"
#: Tags that Jupyter's and Colab's Run All ignore: a notebook relying on them breaks for learners. nbval
#: honours the last two, so without them the validation's one execution is exactly a Run All.
RUN_ALL_IGNORES = ("raises-exception", "gpu", "skip-execution", "nbval-skip", "nbval-raises-exception")
#: The widest line the website's code column shows without scrolling (code and printed output).
PAGE_WIDTH = 88
#: The widest figure that keeps its labels readable in the column: 7 in at the book style's 100 dpi.
FIGURE_MAX_PX = 7 * 100 + 20  # 20 px of slack for the tight bounding box of inline figures

Rule = Callable[[nbformat.NotebookNode], list[str]]


def _code_cells(nb: nbformat.NotebookNode) -> list[tuple[int, nbformat.NotebookNode]]:
    return [(i, cell) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]


def cell_name(nb: nbformat.NotebookNode, index: int) -> str:
    """A cell as a reader finds it in Jupyter: the ``[N]`` beside it and its first line.

    Problems name cells this way, not by their position in the file, which counts markdown cells too
    and matches nothing Jupyter shows.
    """
    cell = nb.cells[index]
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "(empty)")
    first = first if len(first) <= 60 else first[:57] + "..."
    if cell.cell_type != "code":
        return f"{cell.cell_type} cell {first!r}"
    count = f"[{cell.execution_count}]" if cell.get("execution_count") else "[ ]"
    return f"code cell {count} {first!r}"


def executed_top_to_bottom(nb: nbformat.NotebookNode) -> list[str]:
    """Every code cell ran, in order, in one kernel (execution counts 1, 2, 3, ...)."""
    counts, never_run = [], []
    for index, cell in _code_cells(nb):
        if not cell.source.strip():
            continue
        if cell.execution_count is None:
            never_run.append(cell_name(nb, index))
        else:
            counts.append(cell.execution_count)
    problems = [f"{len(never_run)} code cell(s) never executed, first {never_run[0]}; run `make refresh`"] if never_run else []
    if counts != list(range(1, len(counts) + 1)):
        problems.append(f"cells executed out of order {counts[:15]}; run `make refresh`")
    return problems


def runs_all_without_tags(nb: nbformat.NotebookNode) -> list[str]:
    """No committed error, and no tag that only a test harness honours (Run All ignores tags).

    A deliberate error is shown with ``ptlabs.expect_error``; a GPU experiment is guarded in code.
    """
    problems = []
    for index, cell in _code_cells(nb):
        if any(out.output_type == "error" for out in cell.outputs):
            problems.append(f"{cell_name(nb, index)} raised; show a deliberate error with ptlabs.expect_error")
        ignored = sorted(set(RUN_ALL_IGNORES) & tags(cell))
        if ignored:
            problems.append(f"{cell_name(nb, index)} is tagged {ignored}, which Run All ignores; guard it in code")
    return problems


def no_stray_stderr(nb: nbformat.NotebookNode) -> list[str]:
    """Nothing on stderr, except in a cell tagged `stderr-expected` (where the warning is the lesson)."""
    problems = []
    for index, cell in _code_cells(nb):
        if STDERR_TAG in tags(cell):
            continue
        stderr = [out.text for out in cell.outputs if out.output_type == "stream" and out.name == "stderr"]
        if stderr:
            problems.append(f"{cell_name(nb, index)} wrote to stderr: {stderr[0][:300]!r}")
    return problems


def outputs_present(nb: nbformat.NotebookNode) -> list[str]:
    """Outputs were committed (from a CPU run, by `make refresh`)."""
    return [] if any(cell.outputs for _, cell in _code_cells(nb)) else ["no outputs committed; run `make refresh`"]


def _output_text(output: nbformat.NotebookNode) -> str:
    if output.output_type == "stream":
        return output.text
    return output.get("data", {}).get("text/plain", "") if "text/html" not in output.get("data", {}) else ""


def outputs_fit_the_page(nb: nbformat.NotebookNode) -> list[str]:
    """Printed output fits the website's column (code width is ruff's job, in tests/test_lint.py)."""
    problems = []
    for index, cell in _code_cells(nb):
        for output in cell.outputs:
            text = _output_text(output)
            wide = [line for line in text.splitlines() if len(line) > PAGE_WIDTH]
            if wide:
                problems.append(f"{cell_name(nb, index)} prints {len(wide)} line(s) over {PAGE_WIDTH} chars: {wide[0]!r}")
                break
    return problems


def _png_width(data: str) -> int:
    """Width in pixels from a base64 PNG's IHDR chunk (bytes 16-20 of the file)."""
    return struct.unpack(">I", base64.b64decode(data[:44])[16:20])[0]


def figures_fit_the_page(nb: nbformat.NotebookNode) -> list[str]:
    """Figures are at most ~7 in wide, so their labels stay readable when scaled to the column."""
    return [
        f"{cell_name(nb, index)} draws a figure {width} px wide (> {FIGURE_MAX_PX}); use figsize width <= 7"
        for index, cell in _code_cells(nb)
        for output in cell.outputs
        if "image/png" in output.get("data", {})
        for width in [_png_width(output.data["image/png"])]
        if width > FIGURE_MAX_PX
    ]


#: The smallest text a figure may draw, in points: the phone layout (_static/book.css) shows a figure at 480
#: px for about 640-700 px drawn, so 10 pt (13.9 px at the book's 100 dpi) stays 9 px or more on screen.
MIN_FIGURE_FONT_PT = 10
SMALL_FONT = re.compile(
    r"\b(?:fontsize|labelsize|size|titlesize|legend_fontsize)\s*=\s*(?:(\d+(?:\.\d+)?)\b"
    r"|[\"'](?:xx-small|x-small|small|smaller)[\"'])"
)


def figure_text_readable_on_a_phone(nb: nbformat.NotebookNode) -> list[str]:
    """A cell that draws a figure sets no text smaller than 10 pt (tick labels, legends, annotations)."""
    problems = []
    for index, cell in _code_cells(nb):
        if not any("image/png" in out.get("data", {}) for out in cell.outputs):
            continue
        for match in SMALL_FONT.finditer(cell.source):
            if match[1] is None or float(match[1]) < MIN_FIGURE_FONT_PT:
                problems.append(f"{cell_name(nb, index)} draws text at {match[0]!r}: under "
                                f"{MIN_FIGURE_FONT_PT} pt it is unreadable on a phone")
    return problems


def exercises_balanced_verdicts_printed(nb: nbformat.NotebookNode) -> list[str]:
    """Gated exercise/solution directives open and close in pairs; every verdict cell printed a ✅ line."""
    markdown = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    problems = []
    for directive in ("exercise", "solution"):
        starts = len(re.findall(rf"```\{{{directive}-start\}}", markdown))
        ends = len(re.findall(rf"```\{{{directive}-end\}}", markdown))
        if starts != ends:
            problems.append(f"{starts} {directive}-start but {ends} {directive}-end directives")
    for index, cell in _code_cells(nb):
        if "nbval-check-output" in tags(cell):
            text = "".join(out.get("text", "") for out in cell.outputs)
            if "✅" not in text:
                problems.append(f"verdict {cell_name(nb, index)} printed no '✅' verdict")
    return problems


def checks_apart_from_solutions(nb: nbformat.NotebookNode) -> list[str]:
    """A chapter's verdict cell defines nothing and sits after its solution block.

    The check then runs on whatever the reader defined: their own answer, or the solution.
    """
    if is_lab(nb):
        return []  # nbgrader's own cell kinds keep solutions and tests apart in labs
    problems, in_solution = [], False
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            if "{solution-start}" in cell.source:
                in_solution = True
            if "{solution-end}" in cell.source:
                in_solution = False
            continue
        if cell.cell_type != "code" or "nbval-check-output" not in tags(cell):
            continue
        if in_solution:
            problems.append(f"verdict {cell_name(nb, index)} is inside a solution block; put it after {{solution-end}}")
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue  # IPython syntax; nbval reports a real error when it runs
        if any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in tree.body):
            problems.append(f"verdict {cell_name(nb, index)} defines a function or class; it belongs to the solution")
    return problems


SEED_REFERENCE = re.compile(r"\b[Ss]eed\s+0\d\d\b")


def cites_the_sources_page(nb: nbformat.NotebookNode) -> list[str]:
    """Readers never see a working name such as "seed 002 §3.1"; articles are cited via the Sources page."""
    return [
        f"{cell_name(nb, index)} names {match.group(0)!r}; cite the article through the Sources page"
        for index, cell in enumerate(nb.cells)
        for match in [SEED_REFERENCE.search(cell.source)]
        if match
    ]


SECTION = re.compile(r"^## (.*)$", re.MULTILINE)


def sections_numbered(nb: nbformat.NotebookNode) -> list[str]:
    """A chapter's `##` sections read `## 1. Title`, `## 2. Title`, ... in order."""
    if is_lab(nb):
        return []
    headings = [h for cell in nb.cells if cell.cell_type == "markdown" for h in SECTION.findall(cell.source)]
    problems = []
    for number, heading in enumerate(headings, start=1):
        if not heading.startswith(f"{number}. "):
            problems.append(f"section {heading!r} should read '## {number}. ...'")
    return problems


TITLE_LINE = re.compile(r"^# (?:Lab )?\d\d · \S")


def opens_with_its_title_line(nb: nbformat.NotebookNode) -> list[str]:
    """The first cell is markdown opening with `# NN · Title` (a lab: `# Lab NN · Title`).

    The sidebar, the claims page and the coverage map show that line; the bootstrap cell comes after it.
    """
    first = nb.cells[0] if nb.cells else None
    line = first.source.splitlines()[0] if first is not None and first.source else ""
    if first is not None and first.cell_type == "markdown" and TITLE_LINE.match(line):
        return []
    return [f"the first cell should be markdown opening with '# NN · Title' (a lab: '# Lab NN · Title'), not {line[:60]!r}"]


SUMMARY = re.compile(r"^\d+\. Summary( and cheat sheet)?$")


def ends_with_the_summary(nb: nbformat.NotebookNode) -> list[str]:
    """A chapter's last section is `## N. Summary and cheat sheet` (chapter 00, no API to cheat on: `## N. Summary`)."""
    if is_lab(nb):
        return []
    headings = [h for cell in nb.cells if cell.cell_type == "markdown" for h in SECTION.findall(cell.source)]
    if headings and SUMMARY.match(headings[-1].strip()):
        return []
    last = headings[-1] if headings else "no section"
    return [f"the last section is {last!r}; end the chapter with '## N. Summary and cheat sheet'"]


def stamped_by_refresh(nb: nbformat.NotebookNode) -> list[str]:
    """`make refresh` recorded what the outputs come from (the website shows it under the title)."""
    stamp = nb.metadata.get("ptlabs", {})
    missing = [key for key in ("torch", "refreshed", "device") if not stamp.get(key)]
    return [f"metadata.ptlabs lacks {missing}; run `make refresh`"] if missing else []


def claims_table_follows_the_schema(nb: nbformat.NotebookNode) -> list[str]:
    """A chapter's claims table has the schema the page of tested claims is generated from (CONTRIBUTING.md)."""
    return [] if is_lab(nb) else read_claims(nb)[1]


def solutions_wait_collapsed(nb: nbformat.NotebookNode) -> list[str]:
    """Every exercise solution's code opens collapsed in JupyterLab, Notebook 7, VS Code and Colab."""
    problems = []
    for cell in solution_cells(nb):
        hidden = cell.metadata.get("jupyter", {}).get("source_hidden") is True
        if not (hidden and cell.metadata.get("cellView") == "form" and cell.source.startswith(SOLUTION_TITLE)):
            problems.append(f"solution {cell_name(nb, nb.cells.index(cell))} does not open collapsed; run `make refresh`")
    return problems


WIDGET_CALL = re.compile(r"\b(?:interact(?:ive)?|widgets\.\w+)\(")


def has_a_live_explorer(nb: nbformat.NotebookNode) -> list[str]:
    """A chapter has an ipywidgets explorer (live in Jupyter, not on the site) and its states for the site."""
    if is_lab(nb):
        return []
    live = [c for _, c in _code_cells(nb) if WIDGET_CALL.search(c.source)]
    shown = [c for _, c in _code_cells(nb) if "show_states(" in c.source
             and any("ptlabs-states" in out.get("data", {}).get("text/html", "") for out in c.outputs)]
    problems = []
    if not live:
        problems.append("the chapter has no live explorer (an ipywidgets `interact` or widget)")
    for cell in live:
        if not {"remove-cell", "nbval-ignore-output"} <= tags(cell):
            problems.append(f"explorer {cell_name(nb, nb.cells.index(cell))} needs tags remove-cell and nbval-ignore-output")
    if live and not shown:
        problems.append("the explorer has no static states for the site (a `ptlabs.show_states` cell with output)")
    return problems


def figures_have_alt_text(nb: nbformat.NotebookNode) -> list[str]:
    """Every figure says what it shows to a reader who cannot see it (`mystnb.image.alt` in the cell's metadata)."""
    return [
        f"{cell_name(nb, index)} draws a figure without alt text; set metadata.mystnb.image.alt"
        for index, cell in _code_cells(nb)
        if any("image/png" in out.get("data", {}) or "image/svg+xml" in out.get("data", {}) for out in cell.outputs)
        and not str(cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")).strip()
    ]


RAW_TIMING = re.compile(r"\.blocked_autorange\(|\.adaptive_autorange\(|\.timeit\(|\bptlabs\.measure\(")


def timings_compared_by_the_helper(nb: nbformat.NotebookNode) -> list[str]:
    """A cell that times two things to compare them uses ptlabs.compare (interleaved rounds, a verdict
    from the spread), not two separate measurements whose medians were taken minutes apart."""
    return [
        f"{cell_name(nb, index)} takes {count} separate timings; compare them with ptlabs.compare"
        for index, cell in _code_cells(nb)
        for count in [len(RAW_TIMING.findall(cell.source))]
        if count > 1
    ]


#: Paths that name the machine a notebook ran on: temporary folders (ipykernel's cell files, mkdtemp), a
#: virtual environment's or any site-packages, home folders, and this checkout. A reader's machine has none.
MACHINE_PATH = re.compile(
    r"(?:/tmp/|/var/folders/|/private/var/|/[\w.-]+(?:/[\w.-]+)*/site-packages/|/home/[\w.-]+/|/root/"
    r"|/Users/[\w.-]+/|[A-Za-z]:\\Users\\|" + re.escape(str(ROOT)) + r")"
)


def outputs_hold_no_machine_paths(nb: nbformat.NotebookNode) -> list[str]:
    """No committed output names a folder of the machine that ran it: print a relative path or a placeholder."""
    problems = []
    for index, cell in _code_cells(nb):
        for output in cell.outputs:
            texts = [output.get("text", ""), "\n".join(output.get("traceback", [])),
                     *(str(value) for key, value in output.get("data", {}).items() if key.startswith("text/"))]
            found = next((m for text in texts for m in [MACHINE_PATH.search(text)] if m), None)
            if found:
                problems.append(f"{cell_name(nb, index)} prints a path of the machine that ran it: {found[0]!r}")
                break
    return problems


HEADING = re.compile(r"^(#{2,3}) (.+?)\s*$", re.MULTILINE)
IN_PAGE_LINK = re.compile(r"\]\(#([\w-]+)\)")


def _anchor(title: str) -> str:
    """The id MyST gives a heading (myst_heading_anchors, GitHub's rule): lower case, punctuation dropped."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def written_scripts_show_where_they_run(nb: nbformat.NotebookNode) -> list[str]:
    """A section's results sit under its heading: a (sub)section that writes a script (`%%writefile`) and runs
    nothing itself links, in its text, to the heading in this chapter under which the script's output is shown."""
    sections: list[tuple[str, list[nbformat.NotebookNode]]] = [("(before the first heading)", [])]
    for cell in nb.cells:
        headings = HEADING.findall(cell.source) if cell.cell_type == "markdown" else []
        if headings:
            sections.append((headings[-1][1], []))
        sections[-1][1].append(cell)
    anchors = {_anchor(title) for cell in nb.cells if cell.cell_type == "markdown"
               for _, title in HEADING.findall(cell.source)}
    problems = []
    for title, cells in sections:
        code = [cell for cell in cells if cell.cell_type == "code"]
        if not any(cell.source.startswith("%%writefile") for cell in code):
            continue
        if any(not cell.source.startswith("%%writefile") for cell in code):
            continue  # it runs something under its own heading
        links = {link for cell in cells if cell.cell_type == "markdown" for link in IN_PAGE_LINK.findall(cell.source)}
        if not links & anchors:
            problems.append(f"section {title!r} writes a script but shows no result: run it there, or link the "
                            "heading under which its output appears")
    return problems


def timing_tables_hold_together(nb: nbformat.NotebookNode) -> list[str]:
    """A committed timing table describes the code, not the load: it ran its machine check, the machine was
    quiet, and its median times agree with its per-round ratios and its verdicts (tests/timing_tables.py)."""
    return [
        f"{cell_name(nb, table.cell)}: the timing table {table.label!r} {problem}"
        for table in notebook_tables(nb)
        for problem in table.problems()
    ]


RULES: tuple[Rule, ...] = (
    executed_top_to_bottom,
    runs_all_without_tags,
    no_stray_stderr,
    outputs_present,
    outputs_fit_the_page,
    figures_fit_the_page,
    figure_text_readable_on_a_phone,
    exercises_balanced_verdicts_printed,
    checks_apart_from_solutions,
    cites_the_sources_page,
    sections_numbered,
    opens_with_its_title_line,
    ends_with_the_summary,
    claims_table_follows_the_schema,
    stamped_by_refresh,
    solutions_wait_collapsed,
    has_a_live_explorer,
    figures_have_alt_text,
    timings_compared_by_the_helper,
    timing_tables_hold_together,
    outputs_hold_no_machine_paths,
    written_scripts_show_where_they_run,
)
