"""Outputs that cannot act: what a student's code displays is kept as text and pictures only.

A graded notebook and its feedback page show whatever the kernel sent back. An object with a
``_repr_html_`` (or ``display(HTML(...))``, SVG, JavaScript, Markdown with raw HTML, a widget) would
put the student's markup, ``<script>`` included, into the feedback page an instructor or another
student opens. So every rich output keeps only the formats a browser shows without running
anything: plain text (escaped when rendered) and raster images of a page's size, whose metadata keeps
only a numeric size. What was dropped is named in the plain text. The feedback page and the formgrader also
sanitise Markdown cells (:mod:`ptgrader.html`, set up in ``labs/nbgrader_config.py``).
"""

from __future__ import annotations

import base64
import binascii
import io
import math

from nbformat.notebooknode import NotebookNode

#: MIME types kept in a rich output: text (escaped when shown) and raster images (base64 data).
SAFE_TYPES = ("text/plain", "image/png", "image/jpeg", "image/gif")
IMAGE_TYPES = SAFE_TYPES[1:]
#: The only metadata kept: an image's size. nbconvert writes it unquoted (``width=...``) into the page.
IMAGE_SIZES = ("width", "height")
#: The largest image size kept, in CSS pixels: a plot a page shows. Round 28: a 1x1 PNG said to be 2**31 - 1 px
#: tall made the feedback page as tall as Chromium allows, every part after it past its end.
MAX_IMAGE_SIZE = 4096
#: The most a graded notebook's images may add to the height of its pages, in CSS pixels: five images of the
#: largest size, or about forty ordinary plots. Round 74: a 70-byte PNG shown 4096 px tall, 95 times in one cell
#: (each under every limit on its own), made a part's feedback page 400,000 px tall, its verdict far out of sight.
MAX_IMAGE_HEIGHT = 5 * MAX_IMAGE_SIZE
#: The most decoding a graded notebook's images may ask of the browser that shows its pages, in pixels times passes
#: over them (a JPEG's scans): four images of the largest size read once, or about 200 ordinary plots. Round 84:
#: 70 JPEGs of 9 kB, each said by its header to be 4096 x 4096 px in 300 progressive scans (and shown 1 px wide),
#: cost the reader's browser 4 minutes of CPU to scroll through the feedback page; 330 distinct 1-bit PNGs of
#: 4096 x 4096 px, 33 s. Neither bytes, nor the size shown, nor the height a page gives them bound that.
MAX_IMAGE_DECODING = 4 * MAX_IMAGE_SIZE**2
#: Where a JPEG starts a scan (its "start of scan" marker): entropy-coded data cannot hold these bytes.
JPEG_SCAN = b"\xff\xda"
#: The format Pillow must find in each image type's bytes.
IMAGE_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF"}
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


def image_header(mime: str, data: object) -> tuple[int, int, bool] | str:
    """An image's (width, height, animated) by its own header, or why it is no readable image of its type.

    Pillow reads the header only, and refuses a size that claims billions of pixels.
    """
    from PIL import Image  # imported late: only outputs with an image need it

    try:
        with Image.open(io.BytesIO(_image_bytes(data)), formats=[IMAGE_FORMATS[mime]]) as image:
            # an APNG says its frames in its header; a GIF is read as far as a second frame
            return (*image.size, getattr(image, "is_animated", False))
    except (binascii.Error, ValueError, OSError, Image.DecompressionBombError) as problem:
        return f"{mime} that is no readable {IMAGE_FORMATS[mime]} ({type(problem).__name__})"


def image_decoding(mime: str, data: object) -> int:
    """How much decoding one image asks of a browser: its pixels, by its own header, times its passes over them,
    a JPEG's scans (counted by their markers, so never fewer than it has: a marker's bytes inside a comment count
    too) and one for the other formats; 0 for bytes that are no image of their type (:func:`image_refused`)."""
    header = image_header(mime, data)
    if isinstance(header, str):
        return 0
    width, height, _ = header
    passes = max(1, _image_bytes(data).count(JPEG_SCAN)) if mime == "image/jpeg" else 1
    return width * height * passes


def _image_bytes(data: object) -> bytes:
    """An image output's bytes from its base64 text (a string, or nbformat's list of lines)."""
    text = "".join(data) if isinstance(data, list) else data if isinstance(data, str) else ""
    return base64.b64decode("".join(text.split()), validate=True)  # line breaks are base64's, not data


def image_refused(mime: str, data: object) -> str:
    """Why an image is not kept ("" when it is): its own header gives a width or height over
    :data:`MAX_IMAGE_SIZE`, it is animated (an APNG or a GIF of several frames: the browser redraws it for as long
    as it is in view), or its bytes are no image of its type.

    Why the header: a browser lays an image out at the size its file states when no attribute says
    otherwise. Round 51 showed a 2 kB PNG whose header said 1 x 1,000,000 px, with no metadata for
    :func:`image_sizes` to cap, and every later part of the feedback page lay a million pixels down.
    """
    header = image_header(mime, data)
    if isinstance(header, str):
        return header
    width, height, animated = header
    if max(width, height) > MAX_IMAGE_SIZE:
        return f"{mime} of {width} x {height} px, over {MAX_IMAGE_SIZE}"
    if animated:  # round 60: a 14 kB APNG of 4096 px kept a reader's browser half a core busy while in view
        return f"{mime} that is animated"
    return ""


def height_shown(output: NotebookNode) -> int:
    """How tall a page draws the images of one (already safe) output, in CSS pixels: the tallest of its image
    types, each by its metadata's height, else its header's height scaled to the metadata's width, else its
    header's height (what a browser does with ``<img width=... height=...>``)."""
    data, metadata = output.get("data", {}), output.get("metadata", {})
    tallest = 0
    for mime in IMAGE_TYPES:
        header = image_header(mime, data[mime]) if mime in data else ""
        if isinstance(header, str):
            continue
        width, height, _ = header
        size = metadata.get(mime, {})
        shown = size.get("height") or (height * size["width"] / max(width, 1) if "width" in size else height)
        tallest = max(tallest, math.ceil(shown))
    return tallest


def make_safe(output: NotebookNode) -> list[str]:
    """Drop every active format, every image over :data:`MAX_IMAGE_SIZE` by its own header, and all metadata but
    image sizes from one output in place; return what was dropped.

    The list names the MIME types dropped, and :data:`METADATA` when metadata was.
    """
    if output.get("output_type") not in _RICH:
        return []
    data = output.get("data", {})
    refused = [why for key in data if key in IMAGE_TYPES and (why := image_refused(key, data[key]))]
    dropped = sorted(key for key in data if key not in SAFE_TYPES or any(why.startswith(key) for why in refused))
    if dropped:
        kept = {key: value for key, value in data.items() if key in SAFE_TYPES and key not in dropped}
        if "text/plain" not in kept:
            why = f": {'; '.join(refused)}" if refused else ""
            kept["text/plain"] = f"[{', '.join(dropped)} output not kept by the grader{why}]"
        output["data"] = kept
    metadata = output.get("metadata", {})
    sizes = {mime: size for mime, size in image_sizes(metadata).items() if mime in output.get("data", {})}
    if metadata != sizes:
        dropped.append(METADATA)
    output["metadata"] = sizes
    return dropped


def make_notebook_safe(nb: NotebookNode) -> int:
    """Apply :func:`make_safe` to every output of every cell, then keep images, in the notebook's order, only while
    they add at most :data:`MAX_IMAGE_HEIGHT` to the page and :data:`MAX_IMAGE_DECODING` to a browser's decoding
    (:func:`drop_images_past_the_budgets`); return how many outputs changed."""
    outputs = [output for cell in nb.cells for output in cell.get("outputs", [])]
    changed = {id(output) for output in outputs if make_safe(output)}
    changed |= {id(output) for output in drop_images_past_the_budgets(outputs)}
    return len(changed)


def decoding_asked(output: NotebookNode) -> int:
    """How much decoding the images of one (already safe) output ask of a browser: the most of its image types
    (a page shows one of them), each by :func:`image_decoding`."""
    data = output.get("data", {})
    return max((image_decoding(mime, data[mime]) for mime in IMAGE_TYPES if mime in data), default=0)


def drop_images_past_the_budgets(outputs: list[NotebookNode]) -> list[NotebookNode]:
    """Drop the images of each output that would take the page past :data:`MAX_IMAGE_HEIGHT`, or a browser's
    decoding past :data:`MAX_IMAGE_DECODING`; return those outputs.

    Why budgets for the whole notebook, not limits per image: each image under every limit of its own (4096 px,
    one frame, a few bytes) still adds its height to the page and its pixels to what a browser decodes, and the
    output budgets count bytes, not pixels.
    """
    dropped, height_used, decoding_used = [], 0, 0
    for output in outputs:
        rich = output.get("output_type") in _RICH
        height, decoding = (height_shown(output), decoding_asked(output)) if rich else (0, 0)
        if height_used + height <= MAX_IMAGE_HEIGHT and decoding_used + decoding <= MAX_IMAGE_DECODING:
            height_used += height
            decoding_used += decoding
            continue
        data = output["data"]
        images = sorted(mime for mime in data if mime in IMAGE_TYPES)
        full = (f"already fill {height_used} of the {MAX_IMAGE_HEIGHT} px of page they may take"
                if height_used + height > MAX_IMAGE_HEIGHT else
                f"already ask {decoding_used:,} of the {MAX_IMAGE_DECODING:,} pixels a browser decodes for them"
                " (pixels times a JPEG's scans)")
        note = f"[{', '.join(images)} output not kept by the grader: the notebook's images {full}]"
        output["data"] = {"text/plain": data.get("text/plain") or note}
        output["metadata"] = {}
        dropped.append(output)
    return dropped
