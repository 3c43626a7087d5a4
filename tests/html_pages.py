"""The pages a graded submission is shown in, and what in them could run.

A graded notebook is seen in two pages: the student's feedback page (``nbgrader generate_feedback``)
and the instructor's formgrader view of the submission. Both are HTML that nbgrader's templates make
from the graded notebook, and both must run nothing a submission wrote. These helpers make both
pages as nbgrader does, in a graded course, and list what in a page could run (:func:`active_parts`):
a ``<script>``, an ``<iframe>``/``<object>``/``<embed>``, an ``on*`` attribute, a ``javascript:`` URL, and
what in a rendered Markdown cell (the students' text) steers the page's own scripts and styles: an ``id``
(the formgrader finds each score field by its id) or a ``class`` beyond code highlighting's (Bootstrap's
``modal show in`` draws a box over the whole page). The templates' own ids and classes (a cell's id, an
error output's colours) are theirs.
The templates bring scripts and handlers of their own (the formgrader's code; MathJax no longer: see
:func:`typesetting`), so a page is
judged against the page of an honest submission made the same way: it may hold nothing active the
honest page does not (the formgrader's pages differ only by the submission's id, replaced by a
placeholder).
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Collection
from html.parser import HTMLParser
from pathlib import Path

from ptgrader import safe_html
from tests import lab_tools

#: Elements that run or embed something, whatever their attributes.
ACTIVE_TAGS = frozenset({"script", "iframe", "object", "embed"})
#: A URL that runs script, as a browser reads it (whitespace and control characters ignored, any case).
_JAVASCRIPT_URL = re.compile(r"^\s*j\s*a\s*v\s*a\s*s\s*c\s*r\s*i\s*p\s*t\s*:", re.IGNORECASE)
#: An image a student's Markdown loads from another host: opening the page tells that host who looked, and when.
_REMOTE_URL = re.compile(r"^([a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)


#: The class of the element nbconvert's templates render a Markdown cell into.
MARKDOWN_CELL = "rendered_html"


class _ActiveParts(HTMLParser):
    """Collects every part of a page that could run, each as one line of text."""

    def __init__(self, markdown: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._script: list[str] | None = None
        self._divs = 0  # open <div>s
        self._markdown_at: int | None = 0 if markdown else None  # the <div> depth of the Markdown cell we are in

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        in_markdown = self._markdown_at is not None  # inside a rendered Markdown cell, not the cell's own element
        if tag == "div":
            self._divs += 1
            if not in_markdown and MARKDOWN_CELL in (dict(attrs).get("class") or "").split():
                self._markdown_at = self._divs
        if tag in ACTIVE_TAGS:
            self.found.append(f"<{tag} {sorted(attrs)}>")
            if tag == "script":
                self._script = []
        for name, value in attrs:
            cleaned = re.sub(r"[\x00-\x20]", "", value or "")
            steers = in_markdown and (name == "id" or name == "class" and not set((value or "").split()) <= safe_html.CLASSES)
            remote = in_markdown and tag == "img" and name == "src" and bool(_REMOTE_URL.match(cleaned))
            if name.startswith("on") or _JAVASCRIPT_URL.match(cleaned) or steers or remote:
                self.found.append(f"<{tag} {name}={value!r}>")

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            if self._markdown_at == self._divs:
                self._markdown_at = None
            self._divs -= 1
        if tag == "script" and self._script is not None:
            self.found.append("script text: " + "".join(self._script).strip())
            self._script = None


def active_parts(html: str, *, markdown: bool = False) -> list[str]:
    """What in ``html`` could run or steer the page: active elements (with a script's text), ``on*`` attributes,
    ``javascript:`` URLs, and ids and classes in a rendered Markdown cell (``markdown``: all of ``html`` is one)."""
    parser = _ActiveParts(markdown)
    parser.feed(html)
    parser.close()
    return parser.found


def feedback_pages(course: Path, lab: str, students: str, exclude: Collection[str] = ()) -> dict[str, str]:
    """student -> the page ``nbgrader generate_feedback`` makes, for the students matching the glob ``students``
    but those in ``exclude``."""
    excluded = [f"--CourseDirectory.student_id_exclude={','.join(sorted(exclude))}"] if exclude else []
    lab_tools.run_nbgrader(["generate_feedback", lab, f"--CourseDirectory.student_id={students}", *excluded], course)
    return {
        path.parent.parent.name: path.read_text(encoding="utf-8")
        for path in sorted((course / "feedback").glob(f"{students}/{lab}/*.html"))
    }


def formgrader_pages(course: Path, lab: str, students: str, exclude: Collection[str] = ()) -> dict[str, str]:
    """student -> the formgrader's view of the submission, made as its handler makes it (the students matching
    the glob ``students`` but those in ``exclude``).

    The formgrader renders the graded notebook with an ``HTMLExporter`` configured by the course's
    nbgrader_config.py, its ``formgrade`` template and the submission's gradebook record
    (``nbgrader.server_extensions.formgrader.handlers.SubmissionHandler``); this does the same
    without starting a notebook server.
    """
    from nbconvert import HTMLExporter
    from nbgrader.api import Gradebook
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    # as the formgrader does: its own settings first (FormgradeExtension.build_extra_config), then the course's
    # nbgrader_config.py over them (NbGrader.initialize loads it last)
    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    config.merge(PyFileConfigLoader(lab_tools.CONFIG_NAME, path=str(course)).load_config())
    exporter = HTMLExporter(config=config)
    pages = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for path in sorted((course / "autograded").glob(f"{students}/{lab}/*.ipynb")):
            student = path.parent.parent.name
            if student in exclude:
                continue
            submission = gradebook.find_submission_notebook(path.stem, lab, student)
            resources = {
                "assignment_id": lab, "notebook_id": path.stem, "submission_id": submission.id, "index": 0,
                "total": 1, "base_url": "", "student": student, "last_name": submission.student.last_name,
                "first_name": submission.student.first_name, "notebook_path": str(path.relative_to(course)),
            }
            page, _ = exporter.from_filename(str(path), resources=resources)
            pages[student] = page.replace(submission.id, "<submission id>")  # the same template code on every page
    return pages


def title(html: str) -> str:
    """The page's title, as the browser's tab shows it ("" when it has none)."""
    found = re.search(r"<title>(.*?)</title>", html, re.DOTALL)
    return found.group(1).strip() if found else ""


def typesetting(html: str) -> list[str]:
    """The scripts of a page that typeset TeX (MathJax): a student's TeX would run in the reader's browser."""
    return [part for part in active_parts(html) if "mathjax" in part.lower()]


#: An image embedded in a page (a data URI in an ``<img>``'s ``src``): its MIME type and its base64 text.
_EMBEDDED = re.compile(r"""\bsrc\s*=\s*["']?data:(image/[a-z]+);base64,([A-Za-z0-9+/=\s]+)""", flags=re.IGNORECASE)


def oversized_images(html: str, largest: int) -> list[str]:
    """The ``<img>`` tags of a page wider or taller than ``largest`` px, by their attributes or by the image's own
    header (a ``data:`` URL's, read with Pillow): one said to be 2**31 - 1 px tall pushed every part after it past
    the end of the feedback page (round 28), and so did a PNG whose header said 1,000,000 px (round 51)."""
    found = []
    for tag in re.findall(r"<img\b[^>]*>", html, flags=re.IGNORECASE):
        sizes = [int(size) for size in re.findall(r"""\b(?:width|height)\s*=\s*["']?(\d+)""", tag, flags=re.I)]
        embedded = _EMBEDDED.search(tag)
        if embedded:
            sizes += _header_size(embedded.group(2))
        if any(size > largest for size in sizes):
            found.append(tag[:120])
    return found


def images_height(html: str) -> int:
    """How tall a page draws all of its ``<img>`` tags together, in px: each by its height attribute, else its
    header's height scaled to its width attribute, else its header's height (0 for an image that loads nothing
    and says no size). Round 74: 95 images of 1 x 1 px, each said to be 4096 px tall, made a page 400,000 px tall."""
    total = 0
    for tag in re.findall(r"<img\b[^>]*>", html, flags=re.IGNORECASE):
        said = {key.lower(): int(value) for key, value in
                re.findall(r"""\b(width|height)\s*=\s*["']?(\d+)""", tag, flags=re.I)}
        embedded = _EMBEDDED.search(tag)
        header = _header_size(embedded.group(2)) if embedded else []
        if "height" in said:
            total += said["height"]
        elif header:
            total += round(header[1] * said["width"] / max(header[0], 1)) if "width" in said else header[1]
    return total


def images_decoding(html: str) -> int:
    """How much decoding a page's embedded images ask of a browser, in pixels times passes (a JPEG's scans), as the
    grader counts it (:func:`ptgrader.outputs.image_decoding`). Round 84: 70 JPEGs of 9 kB in 300 progressive scans
    each cost a browser 4 minutes of CPU."""
    from ptgrader.outputs import IMAGE_TYPES, image_decoding

    return sum(image_decoding(mime.lower(), encoded) for mime, encoded in _EMBEDDED.findall(html)
               if mime.lower() in IMAGE_TYPES)


def encoded_image(width: int, height: int, kind: str = "PNG", frames: int = 1) -> str:
    """A blank image of that size in ``kind`` (PNG, JPEG, GIF), of ``frames`` frames (animated when more than one:
    APNG or GIF), base64-encoded as a kernel sends it."""
    from PIL import Image

    encoded = io.BytesIO()
    shades = [Image.new("L", (width, height), color=50 * index % 256) for index in range(frames)]
    shades[0].save(encoded, kind, **({"save_all": True, "append_images": shades[1:]} if frames > 1 else {}))
    return base64.b64encode(encoded.getvalue()).decode()


def _header_size(encoded: str) -> list[int]:
    """An embedded image's width and height by its own header ([] when it is no image Pillow reads)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(base64.b64decode("".join(encoded.split())))) as image:
            return list(image.size)
    except (ValueError, OSError, Image.DecompressionBombError):
        return []
