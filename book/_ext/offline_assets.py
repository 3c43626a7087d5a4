"""Pages that work offline: MathJax served from the built site, and only on pages with math.

Jupyter Book loads MathJax from a CDN on every page, because myst-nb asks Sphinx to include every
JavaScript asset everywhere (for ipywidgets, which this book does not publish: explorers are shown
as static states). This extension takes MathJax 3 from the `django-static-mathjax` wheel (static
files on PyPI, pinned in requirements.txt), copies the parts a page needs into `_static/mathjax/`,
and puts the per-page asset policy back. Sphinx still counts the math of every page in a toctree as
the math of the page that holds the toctree (the intro holds the book's), so a last step drops the
MathJax scripts from each page that has no math of its own.
"""

from __future__ import annotations

import shutil
from importlib.resources import files
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.domains.math import MathDomain

MATHJAX_DIR = "mathjax"  # under the site's _static/
#: The combined TeX-to-HTML component and what it loads on demand; the speech engine (sre, 4 MB)
#: and the other combined components are left out.
NEEDED = ("tex-chtml.js", "input", "output", "ui", "a11y", "adaptors")


def mathjax_source() -> Path:
    """MathJax's `es5` folder inside the installed django-static-mathjax package."""
    return Path(str(files("mathjax") / "static" / "mathjax" / "es5"))


def use_local_mathjax(app: Sphinx) -> None:
    """Point Sphinx at the local copy and load assets only on the pages that use them."""
    app.registry.html_assets_policy = "per_page"
    app.config.mathjax_path = f"{MATHJAX_DIR}/tex-chtml.js"


def drop_mathjax_without_math(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    """Remove MathJax and its configuration from a page whose own text has no math."""
    domain = app.env.get_domain("math")
    assert isinstance(domain, MathDomain)
    if domain.data["has_equations"].get(pagename) or "script_files" not in context:
        return
    context["script_files"] = [
        script for script in context["script_files"]
        if "mathjax" not in str(script.filename).lower() and "MathJax" not in script.attributes.get("body", "")
    ]


def copy_mathjax(app: Sphinx, exception: Exception | None) -> None:
    """Copy the MathJax files into the built site's `_static/mathjax/`."""
    if exception is not None or app.builder.format != "html":
        return
    source, target = mathjax_source(), Path(app.outdir) / "_static" / MATHJAX_DIR
    for name in NEEDED:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name, dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("builder-inited", use_local_mathjax)
    app.connect("html-page-context", drop_mathjax_without_math, priority=900)  # after sphinx.ext.mathjax (500)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
