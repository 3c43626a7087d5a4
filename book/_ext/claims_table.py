"""Read a chapter's claims table: the statements from the source articles it tested, with verdicts.

Each chapter has a section ``## N. Claims checked in this chapter`` holding one markdown table with the
header ``| claim (source) | verdict | shown in |`` (CONTRIBUTING.md, "Claims table"). The book's page of
tested claims (``book/claims.md``, built by ``claims.py``) is generated from these tables, and the
hygiene rule ``claims_table_follows_the_schema`` (tests/hygiene.py) holds every chapter to the schema,
so the page can never list a claim without a verdict or a link to the section that settles it.

Plain Python on purpose: the Sphinx extension and the tests both import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import nbformat

HEADER = ("claim (source)", "verdict", "shown in")
VERDICTS = ("True", "False", "Depends")
CLAIMS_HEADING = re.compile(r"^## (\d+)\. Claims checked in this chapter\s*$", re.MULTILINE)
SECTION_HEADING = re.compile(r"^## (\d+)\. (.+?)\s*$", re.MULTILINE)
VERDICT = re.compile(r"^\*\*(True|False|Depends)\.\*\*\s*(.*)$", re.DOTALL)
SECTION_REF = re.compile(r"§(\d+)")
CELL_SPLIT = re.compile(r"(?<!\\)\|")  # a table cell may hold `\|`, which is not a column border


@dataclass(frozen=True)
class Claim:
    """One row of a chapter's claims table."""

    claim: str  # markdown: the statement and its source
    verdict: str  # True, False or Depends
    explanation: str  # markdown: the rest of the verdict cell, with the condition of a Depends
    sections: tuple[int, ...]  # the chapter's `## N.` sections that settle it
    shown_in: str  # markdown: the whole "shown in" cell (section numbers and any documentation links)


def chapter_title(nb: nbformat.NotebookNode) -> str:
    """The notebook's `# ` title, as the page shows it."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^# (.+?)\s*$", cell.source, re.MULTILINE)
            if match:
                return match.group(1)
    return ""


def section_titles(nb: nbformat.NotebookNode) -> dict[int, str]:
    """``{3: "Views and strides"}`` for every ``## 3. Views and strides`` heading."""
    return {
        int(number): title
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for number, title in SECTION_HEADING.findall(cell.source)
    }


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in CELL_SPLIT.split(line.strip().strip("|"))]


def read_claims(nb: nbformat.NotebookNode) -> tuple[list[Claim], list[str]]:
    """The chapter's claims and, separately, every way its claims section breaks the schema."""
    cells = [cell for cell in nb.cells if cell.cell_type == "markdown" and CLAIMS_HEADING.search(cell.source)]
    if len(cells) != 1:
        return [], [f"expected one '## N. Claims checked in this chapter' section, found {len(cells)}"]
    text = cells[0].source[CLAIMS_HEADING.search(cells[0].source).end():]
    lines = [line for line in text.splitlines() if line.lstrip().startswith("|")]
    if len(lines) < 3:
        return [], ["the claims section holds no table with at least one row"]
    problems: list[str] = []
    if tuple(_cells(lines[0])) != HEADER:
        problems.append(f"the table's header is {_cells(lines[0])}, expected {list(HEADER)}")
    sections = section_titles(nb)
    claims: list[Claim] = []
    for number, line in enumerate(lines[2:], start=1):
        row = _cells(line)
        if len(row) != 3:
            problems.append(f"row {number} has {len(row)} cells, expected 3: {line[:60]!r}")
            continue
        claim, verdict_cell, shown_in = row
        verdict = VERDICT.match(verdict_cell)
        refs = tuple(int(n) for n in SECTION_REF.findall(shown_in))
        if verdict is None:
            problems.append(f"row {number}: the verdict must start with **True.**, **False.** or **Depends.**: "
                            f"{verdict_cell[:40]!r}")
        if not refs:
            problems.append(f"row {number}: 'shown in' names no section (§N): {shown_in!r}")
        unknown = [n for n in refs if n not in sections]
        if unknown:
            problems.append(f"row {number}: 'shown in' names sections {unknown}, which this chapter does not have")
        if not claim:
            problems.append(f"row {number}: the claim is empty")
        if verdict is not None and refs and not unknown and claim:
            claims.append(Claim(claim, verdict.group(1), verdict.group(2).strip(), refs, shown_in))
    return claims, problems
