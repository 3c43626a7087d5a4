"""Read a chapter's claims table: the statements from the source articles it tested, with verdicts.

Each chapter has a section ``## N. Claims checked in this chapter`` holding one markdown table with the
header ``| key | claim (source) | verdict | settled by | shown in |`` (CONTRIBUTING.md, "Claims table"). The
book's page of
tested claims (``book/claims.md``, built by ``claims.py``) is generated from these tables, and the
hygiene rule ``claims_table_follows_the_schema`` (tests/hygiene.py) holds every chapter to the schema,
so the page can never list a claim without a verdict or a link to the section that settles it. A key is
stable across the book: :func:`inconsistent_keys` finds one claim given two verdicts in two chapters.

Plain Python on purpose: the Sphinx extension and the tests both import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import nbformat

HEADER = ("key", "claim (source)", "verdict", "settled by", "shown in")
VERDICTS = ("True", "False", "Depends", "Not tested here")
#: How a row was settled: a cell that ran on this CPU, a citation of the official documentation, a guarded
#: GPU cell that did not run here, or a case no cell here can reproduce (two mismatched compiled packages,
#: say); the last two settle nothing, so their verdict is "Not tested here". A row may also name another
#: chapter whose row with the same key settles it (one chapter settles a claim; the others link there).
UNSETTLED = ("GPU, not run here", "not reproduced here")
SETTLED_BY = ("cell", "citation", *UNSETTLED)
SETTLED_ELSEWHERE = re.compile(r"^chapter (\d\d)$")
CLAIMS_HEADING = re.compile(r"^## (\d+)\. Claims checked in this chapter\s*$", re.MULTILINE)
SECTION_HEADING = re.compile(r"^## (\d+)\. (.+?)\s*$", re.MULTILINE)
VERDICT = re.compile(r"^\*\*(True|False|Depends|Not tested here)\.\*\*\s*(.*)$", re.DOTALL)
KEY = re.compile(r"^`([a-z0-9]+(?:-[a-z0-9]+)*)`$")
SECTION_REF = re.compile(r"§(\d+)")
LINK = re.compile(r"\]\(https?://")
CELL_SPLIT = re.compile(r"(?<!\\)\|")  # a table cell may hold `\|`, which is not a column border


@dataclass(frozen=True)
class Claim:
    """One row of a chapter's claims table."""

    key: str  # stable across the book: two rows with one key are one claim, with one verdict
    claim: str  # markdown: the statement and its source
    verdict: str  # True, False, Depends or Not tested here
    explanation: str  # markdown: the rest of the verdict cell, with the condition of a Depends
    settled_by: str  # one of SETTLED_BY, or "chapter NN"
    sections: tuple[int, ...]  # the chapter's `## N.` sections that show it
    shown_in: str  # markdown: the whole "shown in" cell (section numbers and any documentation links)

    @property
    def settled_in_chapter(self) -> str | None:
        """The two-digit chapter whose row settles this claim, for a row settled elsewhere."""
        match = SETTLED_ELSEWHERE.match(self.settled_by)
        return match.group(1) if match else None


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
        if len(row) != len(HEADER):
            problems.append(f"row {number} has {len(row)} cells, expected {len(HEADER)}: {line[:60]!r}")
            continue
        row_problems, claim = _read_row(row, sections)
        problems += [f"row {number}: {problem}" for problem in row_problems]
        if claim is not None:
            claims.append(claim)
    keys = [claim.key for claim in claims]
    problems += [f"key `{key}` is used by {keys.count(key)} rows; a key names one claim"
                 for key in sorted(set(keys)) if keys.count(key) > 1]
    return claims, problems


def _read_row(row: list[str], sections: dict[int, str]) -> tuple[list[str], Claim | None]:
    """One table row as a Claim, or the ways it breaks the schema."""
    key_cell, claim, verdict_cell, settled_by, shown_in = row
    problems = []
    key = KEY.match(key_cell)
    verdict = VERDICT.match(verdict_cell)
    refs = tuple(int(n) for n in SECTION_REF.findall(shown_in))
    elsewhere = SETTLED_ELSEWHERE.match(settled_by)
    if key is None:
        problems.append(f"the key must be a backticked kebab-case name such as `anomaly-mode-cost`: {key_cell!r}")
    if not claim:
        problems.append("the claim is empty")
    if verdict is None:
        problems.append(f"the verdict must start with **True.**, **False.**, **Depends.** or **Not tested here.**: "
                        f"{verdict_cell[:40]!r}")
    if settled_by not in SETTLED_BY and elsewhere is None:
        problems.append(f"'settled by' must be one of {list(SETTLED_BY)} or 'chapter NN': {settled_by!r}")
    if not refs:
        problems.append(f"'shown in' names no section (§N): {shown_in!r}")
    unknown = [n for n in refs if n not in sections]
    if unknown:
        problems.append(f"'shown in' names sections {unknown}, which this chapter does not have")
    if settled_by == "citation" and not LINK.search(shown_in):
        problems.append("a row settled by a citation links the documentation in 'shown in'")
    untested = verdict is not None and verdict.group(1) == "Not tested here"
    if elsewhere is None and untested != (settled_by in UNSETTLED):
        problems.append(f"a row is 'Not tested here' exactly when it is settled by one of {list(UNSETTLED)}")
    if problems:
        return problems, None
    return [], Claim(key.group(1), claim, verdict.group(1), verdict.group(2).strip(), settled_by, refs, shown_in)


def inconsistent_keys(chapters: dict[str, list[Claim]]) -> list[str]:
    """Across the book, every way its claims disagree: one key with two verdicts, or a row settled elsewhere
    that the named chapter does not settle. ``chapters`` maps a two-digit chapter number to its claims."""
    problems = []
    by_key: dict[str, list[tuple[str, Claim]]] = {}
    for chapter, claims in sorted(chapters.items()):
        for claim in claims:
            by_key.setdefault(claim.key, []).append((chapter, claim))
    for key, rows in sorted(by_key.items()):
        verdicts = sorted({claim.verdict for _, claim in rows})
        if len(verdicts) > 1:
            where = ", ".join(f"chapter {chapter}: {claim.verdict}" for chapter, claim in rows)
            problems.append(f"key `{key}` carries {len(verdicts)} verdicts ({where})")
        for chapter, claim in rows:
            target = claim.settled_in_chapter
            if target is None:
                continue
            settling = [c for ch, c in rows if ch == target and c.settled_in_chapter is None]
            if not settling:
                problems.append(f"chapter {chapter}'s `{key}` says chapter {target} settles it, "
                                f"but chapter {target} has no row with that key settled there")
    return problems
