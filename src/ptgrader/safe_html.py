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

import re
from html import escape
from urllib.parse import urlsplit

import bleach
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from pygments.token import STANDARD_TYPES

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
    "img": frozenset({"src", "alt", "title", "width", "height"}),
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
#: Elements that never hold others (no end tag): they open no level.
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                   "wbr"})
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)[^>]*?(/?)>")


def _too_nested(html: str) -> bool:
    """Whether ``html`` opens more than :data:`MAX_TAGS` tags, or nests them deeper than :data:`MAX_DEPTH`.

    The open tags are kept as a parser keeps them: an end tag closes the innermost open tag of its name
    and every tag opened inside it, and an end tag that matches no open tag closes nothing (a browser
    ignores it). Stops at the first level past the limit, so the stack it searches stays short.
    """
    open_tags: list[str] = []
    opened = 0
    for match in _TAG.finditer(html):
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
    return False


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


def markdown_to_safe_html(source: str) -> str:
    """A Markdown cell as HTML that runs nothing: nbconvert's Markdown renderer, then :func:`clean`."""
    return clean(markdown2html_mistune(source))
