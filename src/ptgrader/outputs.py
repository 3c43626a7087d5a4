"""Outputs that cannot act: what a student's code displays is kept as text and pictures only.

A graded notebook and its feedback page show whatever the kernel sent back. An object with a
``_repr_html_`` (or ``display(HTML(...))``, SVG, JavaScript, Markdown with raw HTML, a widget) would
put the student's markup, ``<script>`` included, into the feedback page an instructor or another
student opens. So every rich output keeps only the formats a browser shows without running
anything: plain text (escaped when rendered) and raster images. What was dropped is named in the
plain text. The feedback page also sanitises Markdown cells (``HTMLExporter.sanitize_html`` in
``labs/nbgrader_config.py``).
"""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode

#: MIME types kept in a rich output: text (escaped when shown) and raster images (base64 data).
SAFE_TYPES = ("text/plain", "image/png", "image/jpeg", "image/gif")
_RICH = ("display_data", "execute_result", "update_display_data")


def make_safe(output: NotebookNode) -> list[str]:
    """Drop every active format from one output in place; return the MIME types dropped."""
    if output.get("output_type") not in _RICH:
        return []
    data = output.get("data", {})
    dropped = sorted(key for key in data if key not in SAFE_TYPES)
    if not dropped:
        return []
    kept = {key: value for key, value in data.items() if key in SAFE_TYPES}
    if "text/plain" not in kept:
        kept["text/plain"] = f"[{', '.join(dropped)} output not kept by the grader]"
    output["data"] = kept
    metadata = output.get("metadata", {})
    output["metadata"] = {key: value for key, value in metadata.items() if key in kept}
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
