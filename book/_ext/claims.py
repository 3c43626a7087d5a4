"""The book's page of tested claims, generated at build time from the chapters' claims tables.

``{tested-claims}`` (book/claims.md) lists every row of every chapter's claims table (read by
``claims_table.py``): the statement and its source, the verdict (True / False / Depends with its
condition, or Not tested here), how it was settled (a cell on this CPU, a citation, a GPU cell that did
not run here, or another chapter), and links to the chapter sections that show it. The overview counts
each chapter's rows, and the book's distinct claims (keys), by verdict and by how they were settled. Nothing on the page is typed by hand; a key given two
verdicts in two chapters is a build warning.

A link to a section is resolved against the chapter's built page (the ids docutils gave its
headings), so a link that would not land on its section is a build warning, and ``make book`` (-W)
fails on it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import nbformat
from claims_table import SECTION_REF, SETTLED_BY, VERDICTS, Claim, chapter_title, inconsistent_keys, read_claims
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective, SphinxRole
from sphinx.util.nodes import nested_parse_with_titles

logger = logging.getLogger(__name__)
CHAPTERS = "notebooks"


class claim_section(nodes.Inline, nodes.TextElement):  # noqa: N801  (docutils names node classes in lower case)
    """A link to section N of a chapter, resolved once every page has its ids."""


class ClaimSectionRole(SphinxRole):
    """``{claim-section}`notebooks/01_tensors 3``` → a link "§3" to that chapter's section 3."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        docname, number = self.text.rsplit(" ", 1)
        return [claim_section(f"§{number}", f"§{number}", docname=docname, number=int(number))], []


#: The overview's columns for how rows were settled; rows settled in another chapter count as "another chapter".
#: The names are the chapters' own (claims_table.py), so the page and the tables read alike.
ANOTHER_CHAPTER = "another chapter"
SETTLED_COLUMNS = (*SETTLED_BY, ANOTHER_CHAPTER)


def _settled_kind(claim: Claim) -> str:
    return ANOTHER_CHAPTER if claim.settled_in_chapter else claim.settled_by


def _sections(docname: str, shown_in: str) -> str:
    """The "shown in" cell with each §N made a link to section N of ``docname``."""
    return SECTION_REF.sub(lambda m: f"{{claim-section}}`{docname} {m.group(1)}`", shown_in)


def _row(docname: str, claim: Claim, docnames: dict[str, str], settling: dict[str, Claim]) -> str:
    """A row of the page. A claim settled in another chapter links to the sections of that chapter's row that
    settle it, then to this chapter's own sections that mention it."""
    settled_by, settled_in = claim.settled_by, _sections(docname, claim.shown_in)
    target = claim.settled_in_chapter
    if target in docnames:
        settled_by = f"{{doc}}`chapter {target} </{docnames[target]}>`"
        there = settling.get(claim.key)
        if there is not None and there.sections:
            sections = ", ".join(f"§{number}" for number in there.sections)
            settled_in = f"{_sections(docnames[target], sections)} of chapter {target}; here: {settled_in}"
    return f"| {claim.claim} | **{claim.verdict}.** {claim.explanation} | {settled_by} | {settled_in} |"


def _verdict_counts(claims: list[Claim]) -> str:
    """Cells of the verdict table: the claims, then the count of each verdict."""
    verdicts = Counter(claim.verdict for claim in claims)
    return " | ".join(str(n) for n in (len(claims), *(verdicts[v] for v in VERDICTS)))


def _settled_counts(claims: list[Claim]) -> str:
    """Cells of the second table: the count of each way of settling."""
    kinds = Counter(_settled_kind(claim) for claim in claims)
    return " | ".join(str(kinds[k]) for k in SETTLED_COLUMNS)


def distinct(claims: list[Claim]) -> list[Claim]:
    """One row per key, the one that settles it where another chapter's row points to it: a claim in two
    chapters is one claim, counted once in the book's total."""
    kept: dict[str, Claim] = {}
    for claim in claims:
        if claim.key not in kept or kept[claim.key].settled_in_chapter:
            kept[claim.key] = claim
    return list(kept.values())


def _header(columns: list[str]) -> list[str]:
    return ["| chapter | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]


SETTLED_NOTE = (
    "How the verdicts are known: a **cell** that ran on this CPU, a **citation** of the official "
    "documentation, or **another chapter** (its row with the same claim settles it). Rows whose evidence is a "
    "**GPU** cell that did not run here, or a case **not reproduced here**, settle nothing: their verdict "
    "is *Not tested here*."
)

#: Each chapter's table folds away (plain HTML, no script): the page opens as an overview that fits a phone.
#: On a narrow screen each row becomes a card (_static/book.css, `.ptlabs-claims-table`).
FOLD_OPEN = '<details class="ptlabs-claims-table"><summary>Show the {count} claims of chapter {chapter}</summary>'
FOLD_CLOSE = "</details>"
#: The overview's two tables of counts, set tighter on a phone so that all their columns fit.
OVERVIEW_OPEN = '<div class="ptlabs-claims-overview">'
OVERVIEW_CLOSE = "</div>"


def _raw_html(text: str) -> list[str]:
    return ["```{raw} html", text, "```", ""]


class TestedClaims(SphinxDirective):
    """Every chapter's claims, chapter by chapter, in the order of the table of contents."""

    def run(self) -> list[nodes.Node]:
        root = Path(self.env.srcdir)
        lines: list[str] = []
        # Two narrow tables rather than one wide one: the page must fit a phone.
        verdict_table = _header(["claims", *VERDICTS])
        settled_table = _header(list(SETTLED_COLUMNS))
        everything: list[Claim] = []
        by_chapter: dict[str, list[Claim]] = {}
        published = [p for p in sorted((root / CHAPTERS).glob("*.ipynb")) if f"{CHAPTERS}/{p.stem}" in self.env.found_docs]
        docnames = {path.stem[:2]: f"{CHAPTERS}/{path.stem}" for path in published}
        read = {}
        for path in published:  # a notebook not in the table of contents is not published
            self.env.note_dependency(str(path))
            nb = nbformat.read(path, as_version=4)
            claims, problems = read_claims(nb)
            for problem in problems:
                logger.warning(f"{path.name}: claims table: {problem}", location=(self.env.docname, self.lineno))
            read[path] = (nb, claims)
        # key -> the row that settles it (not one that points to another chapter)
        settling = {claim.key: claim for _, claims in read.values() for claim in claims if not claim.settled_in_chapter}
        for path, (nb, claims) in read.items():
            docname = docnames[path.stem[:2]]
            if not claims:
                continue
            everything += claims
            by_chapter[path.stem[:2]] = claims
            link = f"{{doc}}`{path.stem[:2]} </{docname}>`"
            verdict_table.append(f"| {link} | {_verdict_counts(claims)} |")
            settled_table.append(f"| {link} | {_settled_counts(claims)} |")
            lines += [
                f"## {chapter_title(nb)}", "",
                f"{len(claims)} claims. Chapter: {{doc}}`/{docname}`.", "",
                *_raw_html(FOLD_OPEN.format(count=len(claims), chapter=path.stem[:2])),
                "| claim (source) | verdict | settled by | shown in |", "|---|---|---|---|",
                *(_row(docname, claim, docnames, settling) for claim in claims), "",
                *_raw_html(FOLD_CLOSE),
            ]
        for problem in inconsistent_keys(by_chapter):
            logger.warning(f"claims tables disagree: {problem}", location=(self.env.docname, self.lineno))
        overview = [
            "## Overview", "", "Verdicts, chapter by chapter:", "",
            *_raw_html(OVERVIEW_OPEN), *verdict_table, f"| **all** | {_verdict_counts(distinct(everything))} |", "",
            *_raw_html(OVERVIEW_CLOSE), SETTLED_NOTE, "",
            *_raw_html(OVERVIEW_OPEN), *settled_table, f"| **all** | {_settled_counts(distinct(everything))} |", "",
            *_raw_html(OVERVIEW_CLOSE),
            f"A chapter counts the rows of its own table; **all** counts each claim once ({len(everything)} rows hold"
            f" {len(distinct(everything))} claims: a claim shown in two chapters has a row in each).", "",
        ]
        container = nodes.container(classes=["ptlabs-claims"])
        # Headings only: a paragraph given before them would be placed after the last section.
        nested_parse_with_titles(self.state, StringList(overview + lines), container)
        return container.children


def resolve_sections(app: Sphinx, doctree: nodes.document, fromdocname: str) -> None:
    """Turn each ``claim_section`` into a link to the id of that chapter's ``## N.`` heading.

    Each chapter's doctree is read once per page, not once per link: unpickling a chapter takes about
    60 ms, and the claims page has some 200 links (the site build took 25 to 31 s reading them one by
    one, 10 s now).
    """
    sections: dict[str, list[nodes.section]] = {}
    for ref in list(doctree.findall(claim_section)):
        target, number = ref["docname"], ref["number"]
        if target not in sections:
            sections[target] = [s for s in app.env.get_doctree(target).findall(nodes.section) if s.children]
        section = next((s for s in sections[target] if s[0].astext().startswith(f"{number}. ")), None)
        if section is None or not section["ids"]:
            logger.warning(f"{target} has no section {number} for the claims page to link to", location=ref)
            ref.replace_self(nodes.Text(ref.astext()))
            continue
        uri = app.builder.get_relative_uri(fromdocname, target) + "#" + section["ids"][0]
        ref.replace_self(nodes.reference("", ref.astext(), refuri=uri, internal=True))


def setup(app: Sphinx) -> dict[str, object]:
    app.add_node(claim_section)
    app.add_role("claim-section", ClaimSectionRole())
    app.add_directive("tested-claims", TestedClaims)
    app.connect("doctree-resolved", resolve_sections)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
