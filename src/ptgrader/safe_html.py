"""Markdown that cannot run: how the feedback page and the formgrader render Markdown cells.

nbgrader's feedback and formgrade templates render every Markdown cell with ``markdown2html`` and
nothing after it (nbconvert's own templates add ``clean_html`` when ``sanitize_html`` is set; nbgrader's
override that block). Markdown passes raw HTML through, so a student's ``<img src=x onerror=...>`` or
``<script>`` ran in the instructor's formgrader and in the feedback page. ``labs/nbgrader_config.py``
replaces the ``markdown2html`` filter of every ``HTMLExporter`` the course's configuration reaches
(``generate_feedback``, the formgrader) with :func:`markdown_to_safe_html`: the same Markdown, then
bleach (nbconvert's own sanitiser) with an allow-list wide enough for what Markdown makes
(headings, tables, lists, code, links, images by a relative path: a remote image would tell its host
who opened the page, and when), and no script, event handler, ``style``,
frame, embedded object or ``javascript:``/``data:`` URL. A tag outside the list is shown as text.
Images pasted into a cell (attachments, ``data:`` URLs) are not shown.

The same :func:`clean` replaces nbconvert's ``clean_html`` filter, which the templates apply to raw cells
(their source, as HTML) and to highlighted code: nbconvert's own allow-list keeps ``class`` and ``id``
on every tag, so a raw cell drew Bootstrap's ``modal-backdrop`` over the feedback page, a styled fake
score and button, and an id the formgrader's script would have taken for a score field.
"""

from __future__ import annotations

import functools
import re
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import bleach
import nbgrader
from mistune import HTMLRenderer
from nbformat.notebooknode import NotebookNode
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbgrader.preprocessors import NbGraderPreprocessor
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import BashLexer, JsonLexer, PythonConsoleLexer, PythonLexer
from pygments.token import STANDARD_TYPES

from .repair import release_cells

#: Templates that come before nbconvert's and nbgrader's: ``base/mathjax.html.j2``, so the pages load no MathJax.
TEMPLATES = Path(__file__).resolve().parent / "templates"
#: nbgrader's own templates of the feedback page and the formgrader (``feedback/``, ``formgrade/``).
NBGRADER_TEMPLATES = Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates"


def template_basedirs() -> list[str]:
    """``HTMLExporter.extra_template_basedirs`` for the course: ours first, then nbgrader's (which
    ``generate_feedback`` and the formgrader set alone when the configuration names none)."""
    return [str(TEMPLATES), str(NBGRADER_TEMPLATES)]

#: What Markdown (and the headings' anchor links, tables and highlighted code of nbconvert) produces.
TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em", "h1", "h2", "h3", "h4",
    "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "sup", "table",
    "tbody", "td", "th", "thead", "tr", "ul",
})
#: Attributes kept besides ``class``: a link's target, an image's source and text. Never an event handler,
#: a style or an ``id``: the pages are Bootstrap pages whose scripts find the score fields by their ids, and
#: a heading's id made from a student's text (``### test_last_valid_token``) took the score field's place.
OTHER_ATTRIBUTES = {
    "a": frozenset({"href", "title"}),
    # no width or height (round 74): a Markdown image shows no file a student sent (the grader keeps only the lab's
    # files beside the pages), so a size could only make a broken image a box of 4096 px, as often as it is repeated
    "img": frozenset({"src", "alt", "title"}),
    "abbr": frozenset({"title"}),
}
#: The only classes kept: those Pygments gives highlighted code, and the few nbconvert's Markdown adds. A
#: student's own class would be one of the page's Bootstrap classes (``modal show in`` drew a fake score
#: over the feedback page).
CLASSES = frozenset(STANDARD_TYPES.values()) - {""} | {"highlight", "anchor-link", "task-list-item",
                                                       "task-list-item-checkbox"}


#: A relative URL a page keeps: plain names (none starting with a dot), each a file or folder below the
#: page's own folder. No ``..``, no leading ``/``, no ``%`` (the formgrader's file handler decodes ``%2F``),
#: no query.
_LOCAL_PATH = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)*")


def _local(value: str) -> bool:
    """Whether a relative URL stays in the page's own folder.

    Why: a link or image the formgrader resolves against its own pages reached, through ``..`` and
    ``%2F``, a file the student handed in under ``submitted/`` (its script ran as the instructor on one
    click) and Jupyter's ``/logout`` (an image logged the instructor out on each view; round 11).
    Below the page's folder are only the lab's notebooks and files (``autograded/``, ``feedback/``).
    """
    return bool(_LOCAL_PATH.fullmatch(value))


def _kept(tag: str, name: str, value: str) -> bool:
    """Whether bleach keeps attribute ``name="value"`` on ``tag``."""
    if name == "class":  # highlighted code's "hl-<language>" too: no page's own class starts so
        return all(word in CLASSES or word.startswith("hl-") for word in value.split())
    if (tag, name) == ("img", "src"):  # a remote image tells its host who opened the page, and when
        return _local(value.strip())
    if (tag, name) == ("a", "href"):  # a page of the web, an anchor of this page, or a file beside it
        url = urlsplit(value.strip())
        web = url.scheme in ("http", "https") and bool(url.netloc)  # not javascript://x%0a..., whatever bleach does
        return web or url.scheme == "mailto" or value.startswith("#") or _local(value)
    return name in OTHER_ATTRIBUTES.get(tag, ())
#: URL schemes kept in ``href`` and ``src`` (a bare ``#anchor`` or a relative path is kept too).
PROTOCOLS = frozenset({"http", "https", "mailto"})


#: The deepest nesting of open tags, the most opening tags and the most characters that :func:`clean` gives
#: bleach. Its parser walks the stack of open tags at each new tag: a Markdown cell of 50,000 unclosed
#: ``<div>`` (250 KB) held ``generate_feedback`` for 2 min 13 s, and the formgrader's server as long (round 7);
#: ``<em></a>`` repeated (an end tag that closes nothing) nested as deep while an earlier count, which let
#: every end tag close a level, said 1 (round 10: 4 min 27 s for 20 cells). A cell of real Markdown (a
#: table of 50 rows, a list 20 levels deep) opens a few hundred tags.
MAX_DEPTH = 100
MAX_TAGS = 2_000
MAX_CHARS = 100_000
MAX_STRAY = 100
#: Elements that never hold others (no end tag): they open no level.
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                   "wbr"})
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)[^<>]*?(/?)>")  # no "<" inside: a search stops at the next one


def _too_nested(html: str) -> bool:
    """Whether ``html`` opens more than :data:`MAX_TAGS` tags, nests them deeper than :data:`MAX_DEPTH`, or
    holds more than :data:`MAX_STRAY` ``<`` that begin no tag.

    The open tags are kept as a parser keeps them: an end tag closes the innermost open tag of its name
    and every tag opened inside it, and an end tag that matches no open tag closes nothing (a browser
    ignores it). Stops at the first level past the limit, so the stack it searches stays short. A ``<``
    that begins no tag is what HTML's tokenizer takes longest over (round 24: 98 KB of ``<a`` took the
    sanitiser 445 s); the HTML nbconvert makes escapes such text as ``&lt;``.
    """
    open_tags: list[str] = []
    opened = tags = 0
    for match in _TAG.finditer(html):
        tags += 1
        closing, name, self_closing = match.groups()
        name = name.lower()
        if closing:
            if name in open_tags:
                del open_tags[len(open_tags) - 1 - open_tags[::-1].index(name):]
        elif not self_closing and name not in _VOID:
            open_tags.append(name)
            opened += 1
            if len(open_tags) > MAX_DEPTH or opened > MAX_TAGS:
                return True
    return html.count("<") - tags > MAX_STRAY


@functools.lru_cache(maxsize=512)  # a page's highlighted lab cells come here: the same HTML for every student
def clean(html: str) -> str:
    """``html`` with everything that could run removed, and tags outside :data:`TAGS` escaped.

    HTML nested deeper than :data:`MAX_DEPTH`, with more than :data:`MAX_TAGS` tags or longer than
    :data:`MAX_CHARS` is shown as escaped text instead (cut at that length): no student's text makes the page
    slow to render.
    """
    if len(html) > MAX_CHARS or _too_nested(html):
        shown = escape(html[:MAX_CHARS]) + ("\n[cut by the grader]" if len(html) > MAX_CHARS else "")
        return f"<pre>{shown}</pre>"
    return bleach.clean(html, tags=TAGS, attributes=_kept, protocols=PROTOCOLS, strip_comments=True)


#: The most characters of a Markdown cell rendered as Markdown, and of code highlighted: past them, a cell
#: is shown as escaped text. Rendering costs grow faster than the text in nbconvert's Markdown renderer (a
#: cell of 40,000 characters of ``[a](`` took 1.5 s) and in some of Pygments' lexers, which a code fence or
#: a cell's metadata could name (round 23: 18 KB of fences in the easytrieve language took 4 min 42 s of
#: ``generate_feedback``, 9 MB of ``[a](`` 9 min 14 s). The labs' own cells are a few thousand characters.
MAX_RENDERED_CHARS = 20_000

#: The languages a code fence in Markdown is highlighted in, each with a lexer whose time grows with the text:
#: any other name is shown as plain code.
FENCE_LEXERS: dict[str, type[Lexer]] = {
    "python": PythonLexer, "python3": PythonLexer, "py": PythonLexer, "ipython": PythonLexer,
    "ipython3": PythonLexer, "pycon": PythonConsoleLexer, "bash": BashLexer, "sh": BashLexer,
    "shell": BashLexer, "json": JsonLexer,
}


class _FenceRenderer(IPythonRenderer):
    """nbconvert's Markdown renderer, with code fences highlighted only in :data:`FENCE_LEXERS`' languages, and
    an image pasted into the cell left as its ``attachment:`` link, which :func:`clean` drops (nbconvert's
    renderer, given no attachments, raised ``missing attachment``: an honest student's pasted screenshot
    stopped ``generate_feedback``, round 24)."""

    def _embed_image_or_attachment(self, src: str) -> str:
        return src

    def block_code(self, code: str, info: str | None = None) -> str:
        words = (info or "").split(maxsplit=1)
        lexer = FENCE_LEXERS.get(words[0].lower()) if words else None
        if lexer is None or len(code) > MAX_RENDERED_CHARS:
            return HTMLRenderer.block_code(self, code)  # escaped, as plain code
        return highlight(code, lexer(), HtmlFormatter())


def _as_text(source: str) -> str:
    shown = escape(source[:MAX_RENDERED_CHARS]) + ("\n[cut by the grader]" if len(source) > MAX_RENDERED_CHARS else "")
    return f"<pre>{shown}</pre>"


#: How many cells' renderings each filter remembers: a class's pages show the lab's own cells again and again
#: (the formgrader renders each submission's page anew), and a cell renders the same wherever it is.
REMEMBERED_CELLS = 2048


@functools.lru_cache(maxsize=REMEMBERED_CELLS)
def markdown_to_safe_html(source: str) -> str:
    """A Markdown cell as HTML that runs nothing: nbconvert's Markdown renderer, then :func:`clean`; a cell past
    :data:`MAX_RENDERED_CHARS` as escaped text."""
    if len(source) > MAX_RENDERED_CHARS:
        return _as_text(source)
    return clean(MarkdownWithMath(renderer=_FenceRenderer(escape=False)).render(source))


def highlight_python(source: str, language: str | None = None, metadata: dict | None = None) -> str:
    """A code cell highlighted as Python, whatever the notebook's or the cell's metadata name (nbconvert's own
    ``highlight_code`` takes the lexer from them: a cell's ``magics_language`` picked a lexer that takes minutes,
    round 23); a cell past :data:`MAX_RENDERED_CHARS` as escaped text. ``language`` and ``metadata`` are
    nbconvert's filter arguments, ignored."""
    return _highlighted(source)


@functools.lru_cache(maxsize=REMEMBERED_CELLS)
def _highlighted(source: str) -> str:
    if len(source) > MAX_RENDERED_CHARS:
        return f'<div class="highlight hl-ipython3">{_as_text(source)}</div>'
    return highlight(source or " ", PythonLexer(), HtmlFormatter(cssclass=" highlight hl-ipython3"))


#: Characters a submission's own cells (those not the lab's: Markdown, raw and code) may hold for its pages to
#: render in all; with :data:`MAX_RENDERED_CHARS` a cell, a few seconds of the slowest text to render. A 10 MiB
#: notebook of 20,000-character cells took minutes (round 24: raw cells and code full of ``<``).
RENDERED_BUDGET = 100_000


class LimitRenderedCells(NbGraderPreprocessor):
    """The cells a submission added, in the graded notebook that the feedback page and the formgrader render,
    cut to :data:`RENDERED_BUDGET` characters in all: a cell past what is left keeps only a note that says how
    long it was (the submitted notebook keeps it; the run is over, so nothing it computed changes). The lab's
    own cells, and cells with nbgrader metadata (only the lab's keep it: the student's answers), are never cut:
    each is at most :data:`MAX_RENDERED_CHARS` to render."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        lab_text = {cell.source for cell in release_cells(self.config, resources)}
        left, cut = RENDERED_BUDGET, 0
        for cell in nb.cells:
            if cell.source in lab_text or "nbgrader" in cell.get("metadata", {}):
                continue
            if len(cell.source) <= left:
                left -= len(cell.source)
                continue
            note = (f"[cut by the grader: {len(cell.source):,} characters, past the {RENDERED_BUDGET:,} of a "
                    "submission's own cells that its pages show; the submitted notebook keeps them]")
            cell.source = f"# {note}" if cell.cell_type == "code" else f"*{note}*"
            left, cut = 0, cut + 1
        if cut:
            info = resources["nbgrader"]
            self.log.warning("ptgrader: %s/%s: %d cells cut for the pages (past %d characters)",
                             info["student"], info["assignment"], cut, RENDERED_BUDGET)
        return nb, resources


#: Unicode's format characters (category ``Cf``, Unicode 15 as in Python 3.12 and 3.13, which 3.11's Unicode 14
#: lacks 13439 to 1343F of; a test holds the list to the running Python's): invisible, and those that set the
#: direction of text reorder what a browser draws around them. Round 58: ``In \u202eevil\u202c text.`` read as "In live text." in the formgrader, and a comment
#: ``# \u202e tnemmoc`` as "# comment" on the feedback page (the "Trojan Source" trick: code that reads
#: otherwise than it runs).
FORMAT_CHARACTERS = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


#: Control characters (category Cc) a page has no use for: every C0 one but tab, newline and carriage return, DEL,
#: the C1 ones, and in an output an escape that does not start a whole CSI sequence on one line (``\x1b[31m``,
#: which nbconvert turns into colours or drops; round 73: ``\x1b[\n2J`` passed its filter raw). Round 70: an
#: exception message's ``\x1b]0;pwned\x07`` (an OSC sequence, a terminal's window title) reached the feedback page
#: raw: inert in a browser, live in a terminal that prints the file.
CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f]|\x1b(?!\\[[0-?]*[ -/]*[@-~])")
#: In a cell's source every escape is shown: code is highlighted, never read for colours (round 73: a comment's
#: ``\x1b[2J`` reached the page raw).
SOURCE_CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def with_format_characters_shown(text: str, controls: re.Pattern[str] = CONTROL_CHARACTERS) -> str:
    """``text`` with each of :data:`FORMAT_CHARACTERS` and ``controls`` written as its escape (``\\u202e``,
    ``\\x1b``), as the grader's log writes them."""
    shown = FORMAT_CHARACTERS.sub(lambda found: ascii(found.group())[1:-1], text)
    return controls.sub(lambda found: ascii(found.group())[1:-1], shown)


class ShowFormatCharacters(NbGraderPreprocessor):
    """In the graded notebook that the feedback page and the formgrader render, every cell's source and text
    outputs with their invisible format characters shown as escapes (:data:`FORMAT_CHARACTERS`): what a page shows
    is what ran. The run is over, and the submitted notebook keeps them."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        for cell in nb.cells:
            cell.source = with_format_characters_shown(cell.source, SOURCE_CONTROL_CHARACTERS)
            for output in cell.get("outputs", []):
                for key in ("text", "ename", "evalue", "traceback"):
                    if key in output:
                        output[key] = _shown(output[key])
                data = output.get("data", {})
                for mime in data:
                    if mime.startswith("text/"):
                        data[mime] = _shown(data[mime])
        return nb, resources


#: The only metadata a graded notebook keeps: nbgrader's on a cell (grading needs it, and it came back from the
#: gradebook), a kernel's name and language on the notebook.
CELL_METADATA_KEPT = ("nbgrader",)
NOTEBOOK_METADATA_KEPT = ("kernelspec", "language_info")


class KeepGradingMetadata(NbGraderPreprocessor):
    """In the graded notebook that the pages are drawn from, only the metadata grading needs, for every submission
    (graded, withheld or stopped): nbconvert's templates act on the rest.

    A cell's ``tags`` become classes of its block (round 63: ``hidden`` hid a failed part and its verdict,
    ``alert alert-success navbar-fixed-top`` pinned a fake "12 / 12" over the page), ``transient.remove_source``
    leaves its code off the page, ``alt`` and ``raw_mimetype`` reach the markup, the notebook's ``title`` the
    browser's tab, ``widgets`` a script's state. No key a student wrote is one the pages need; the submitted
    notebook keeps them all."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        keep_grading_metadata(nb)
        return nb, resources


def keep_grading_metadata(nb: NotebookNode) -> None:
    """Drop, in place, every metadata key but :data:`CELL_METADATA_KEPT` and :data:`NOTEBOOK_METADATA_KEPT`."""
    for cell in nb.cells:
        held = cell.get("metadata", {})
        cell.metadata = NotebookNode({key: held[key] for key in CELL_METADATA_KEPT if key in held})
    held = nb.get("metadata", {})
    nb.metadata = NotebookNode({key: held[key] for key in NOTEBOOK_METADATA_KEPT if key in held})


def _shown(value: object) -> object:
    """A text field of an output (a string, or a list of them) with its format characters shown."""
    if isinstance(value, str):
        return with_format_characters_shown(value)
    if isinstance(value, list):
        return [with_format_characters_shown(item) if isinstance(item, str) else item for item in value]
    return value
