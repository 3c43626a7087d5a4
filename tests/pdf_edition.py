"""`make pdf`: the whole book as one PDF, printed from the built website by the Chromium the tests use.

Usage: python -m tests.pdf_edition [--site _build/html] [--out FILE]

Every page of the table of contents, in its order, is printed by headless Chromium (print styles
in _static/book.css hide the navigation; the claims page's chapter tables are unfolded) and the
pages are joined into one file whose outline has one entry per page, under its title. Solutions stay collapsed, as on the site; lab pages are the
student releases, without answers. Nothing is fetched from the network, and no second Sphinx build
is needed: the PDF is printed from the same site the tests check. The file is written beside the
site (``pytorch-core-apis-tested.pdf`` at its root), where the website's introduction links it.
A character of the site that no installed font draws stops it first, named with its page: Chromium
would print an empty box (``FONT_PACKAGES``: the fonts the Makefile installs).
"""

from __future__ import annotations

import argparse
import functools
import html
import http.server
import io
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from playwright.sync_api import Browser, Page, Route, sync_playwright
from pypdf import PdfReader, PdfWriter

from tests.manifest import ROOT, toc_files

PDF_NAME = "pytorch-core-apis-tested.pdf"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
MARGINS = {"top": "14mm", "bottom": "14mm", "left": "12mm", "right": "12mm"}
#: Debian's packages with a font for the characters the site prints beyond Latin text: its ✅ and ❌ (the
#: checks' verdicts), and the Chinese titles of the source articles. The Makefile's ``browser`` target installs them.
FONT_PACKAGES = {"\u2705": "fonts-noto-color-emoji", "\u4e0e": "fonts-wqy-microhei"}
#: A page is ready to read and print once it has loaded, MathJax (on a page with math) has typeset it, and its
#: fonts and images are in. Said exactly rather than waited for as "no request for half a second" (Playwright's
#: networkidle), which cost every page that half second: 8.6 of 17.3 s for the site's 22 pages.
PAGE_READY = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await document.fonts.ready;
  return [...document.images].every(i => i.complete);
}"""
#: Paper has no click: the claims page's folded chapter tables are printed open.
UNFOLD = "document.querySelectorAll('details.ptlabs-claims-table').forEach(d => d.open = true)"


def toc_pages(toc: Path = ROOT / "_toc.yml") -> list[str]:
    """The site's pages in reading order: the root, then every ``file`` of _toc.yml."""
    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    return [data["root"], *toc_files(data.get("parts", []))]


class MissingFonts(RuntimeError):
    """Characters of the site that no font on this machine can draw: Chromium would print empty boxes."""


def covered_code_points() -> set[int]:
    """Every code point some installed font draws, as fontconfig (Chromium's font fallback on Linux) lists them."""
    try:
        listing = subprocess.run(["fc-list", "--format", "%{charset}\n"], capture_output=True, text=True,
                                 check=True).stdout
    except (OSError, subprocess.CalledProcessError) as problem:
        raise MissingFonts(f"fontconfig's fc-list could not list the fonts ({problem}): install fontconfig") from None
    covered: set[int] = set()
    for span in listing.split():
        first, _, last = span.partition("-")
        covered.update(range(int(first, 16), int(last or first, 16) + 1))
    return covered


def page_text(page_html: str) -> str:
    """The text a page shows: its markup, scripts and styles taken out, entities decoded."""
    shown = re.sub(r"<(script|style)\b.*?</\1\s*>", " ", page_html, flags=re.DOTALL | re.IGNORECASE)
    return html.unescape(re.sub(r"<[^>]*>", " ", shown))


def characters_without_a_font(site: Path, covered: set[int] | None = None) -> dict[str, str]:
    """Each character of the printed pages that no installed font draws -> the first page that prints it."""
    covered = covered_code_points() if covered is None else covered
    missing: dict[str, str] = {}
    for name in toc_pages():
        for character in set(page_text((site / f"{name}.html").read_text(encoding="utf-8"))):
            if ord(character) not in covered and not character.isspace() and character not in missing:
                missing[character] = f"{name}.html"
    return missing


def require_fonts(site: Path) -> None:
    """Refuse to print a site with characters this machine has no font for (they would print as empty boxes)."""
    missing = characters_without_a_font(site)
    if missing:
        shown = ", ".join(f"{char!r} U+{ord(char):04X} ({page})" for char, page in sorted(missing.items())[:8])
        raise MissingFonts(
            f"no installed font draws {len(missing)} character(s) the site prints, which would print as empty "
            f"boxes: {shown}. Install fonts that cover them (Debian: {' '.join(sorted(set(FONT_PACKAGES.values())))}; "
            "`make pdf` installs these as root)")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the stdlib's name)
        pass


def local_only(base: str, blocked: list[str], route: Route) -> None:
    """Let a request for the local site through; abort any other and note its URL in ``blocked``."""
    if route.request.url.startswith(base):
        route.continue_()
    else:
        blocked.append(route.request.url)
        route.abort()


@contextmanager
def _served(site: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def build_pdf(site: Path, out: Path, browser: Browser | None = None,
              on_page: Callable[[str, Page, list[str]], None] | None = None) -> Path:
    """Print every page of ``site`` in table-of-contents order into ``out``, one outline entry per page.

    ``browser``: a Chromium already launched (the site tests'); by default one is started here.
    ``on_page``: called with each page's name, the loaded page (1280 px wide, on screen) and the URLs outside
    the site it asked for so far (aborted; the list grows if it asks for more) before the page is printed (one
    that resizes the page puts it back): the site tests read every page there rather than load each one again
    (about a second of CPU a load, 2 s for a chapter).
    """
    missing = [page for page in toc_pages() if not (site / f"{page}.html").exists()]
    if missing:
        raise FileNotFoundError(f"{site} lacks {missing[:3]}: build the website first (make book)")
    require_fonts(site)
    if browser is None:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            try:
                return build_pdf(site, out, launched, on_page)
            finally:
                launched.close()
    writer = PdfWriter()
    with _served(site) as base:
        page = browser.new_page()
        blocked: list[str] = []  # the current page's requests that tried to leave the site
        page.route("**/*", functools.partial(local_only, base, blocked))
        for name in toc_pages():
            blocked.clear()
            page.goto(f"{base}/{name}.html", wait_until="load")
            page.wait_for_function(PAGE_READY)
            if on_page is not None:
                on_page(name, page, blocked)
            page.evaluate(UNFOLD)
            title = page.locator("article h1").first.inner_text().strip().rstrip("#").strip()
            printed = PdfReader(io.BytesIO(page.pdf(format="A4", margin=MARGINS, print_background=True, scale=0.8)))
            first = len(writer.pages)
            for printed_page in printed.pages:
                writer.add_page(printed_page)
            writer.add_outline_item(title=title, page_number=first)
        page.close()
    writer.add_metadata({"/Title": "PyTorch Core APIs, Tested"})
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as file:
        writer.write(file)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html", help="the built website")
    parser.add_argument("--out", type=Path, default=None, help=f"the PDF (default: SITE/{PDF_NAME})")
    args = parser.parse_args(argv)
    try:
        out = build_pdf(args.site, args.out or args.site / PDF_NAME)
    except (FileNotFoundError, MissingFonts) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {out} ({len(PdfReader(out).pages)} pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
