"""Outputs that cannot act: what a student's code displays is kept as text and pictures only.

A graded notebook and its feedback page show whatever the kernel sent back. An object with a
``_repr_html_`` (or ``display(HTML(...))``, SVG, JavaScript, Markdown with raw HTML, a widget) would
put the student's markup, ``<script>`` included, into the feedback page an instructor or another
student opens. So every rich output keeps only the formats a browser shows without running
anything: plain text (escaped when rendered) and raster images, whose metadata keeps only a numeric
size. What was dropped is named in the plain text. The feedback page and the formgrader also
sanitise Markdown cells (:mod:`ptgrader.html`, set up in ``labs/nbgrader_config.py``).
"""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode

#: MIME types kept in a rich output: text (escaped when shown) and raster images (base64 data).
SAFE_TYPES = ("text/plain", "image/png", "image/jpeg", "image/gif")
IMAGE_TYPES = SAFE_TYPES[1:]
#: The only metadata kept: an image's size. nbconvert writes it unquoted (``width=...``) into the page.
IMAGE_SIZES = ("width", "height")
#: The largest image size kept, in CSS pixels: a plot a page shows. Round 28: a 1x1 PNG said to be 2**31 - 1 px
#: tall made the feedback page as tall as Chromium allows, every part after it past its end.
MAX_IMAGE_SIZE = 4096
#: What :func:`make_safe` names when it drops metadata.
METADATA = "metadata"
_RICH = ("display_data", "execute_result", "update_display_data")


def image_sizes(metadata: object) -> dict[str, dict[str, int]]:
    """The image sizes in an output's metadata that are whole numbers from 1 to :data:`MAX_IMAGE_SIZE`; everything else
    is left out.

    nbconvert's templates write ``width={{ width }}`` without quotes, so ``"1 onerror=alert(1)"`` would
    become an attribute of the ``<img>`` in the feedback page and the formgrader; and a size of billions of
    pixels pushes the rest of the page out of reach.
    """
    if not isinstance(metadata, dict):
        return {}
    kept = {}
    for mime in IMAGE_TYPES:
        entry = metadata.get(mime)
        if isinstance(entry, dict):
            size = {key: entry[key] for key in IMAGE_SIZES
                    if type(entry.get(key)) is int and 0 < entry[key] <= MAX_IMAGE_SIZE}
            if size:
                kept[mime] = size
    return kept


def make_safe(output: NotebookNode) -> list[str]:
    """Drop every active format and all metadata but image sizes from one output in place; return what was dropped.

    The list names the MIME types dropped, and :data:`METADATA` when metadata was.
    """
    if output.get("output_type") not in _RICH:
        return []
    data = output.get("data", {})
    dropped = sorted(key for key in data if key not in SAFE_TYPES)
    if dropped:
        kept = {key: value for key, value in data.items() if key in SAFE_TYPES}
        if "text/plain" not in kept:
            kept["text/plain"] = f"[{', '.join(dropped)} output not kept by the grader]"
        output["data"] = kept
    metadata = output.get("metadata", {})
    sizes = {mime: size for mime, size in image_sizes(metadata).items() if mime in output.get("data", {})}
    if metadata != sizes:
        dropped.append(METADATA)
    output["metadata"] = sizes
    return dropped


def make_notebook_safe(nb: NotebookNode) -> int:
    """Apply :func:`make_safe` to every output of every cell; return how many outputs changed."""
    changed = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            changed += bool(make_safe(output))
        cell.get("metadata", {}).pop("widgets", None)
    nb.metadata.pop("widgets", None)
    return changed
