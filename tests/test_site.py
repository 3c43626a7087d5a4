"""The website: built from the committed notebooks with warnings as errors, then opened in a real browser.

A module-scoped fixture runs ``jupyter-book build <repo> --path-output <tmp> -W -n --keep-going`` (the
command `make book` runs, with the output in a temporary folder so the repository is not touched), then
serves ``<tmp>/_build/html`` over http on 127.0.0.1 and drives Debian's Chromium headless through
Playwright. Requests that leave 127.0.0.1 are aborted, so the checks do not depend on the network.

The checks: the intro and chapter 01 pages render; every image in their main content loads (chapter 01
has at least one matplotlib figure); an exercise solution opens on click; the Colab launch link of
chapter 01 points at the notebook in the repository named in ``_config.yml``; the intro links every
chapter in the table of contents; no page is wider than a phone's screen. From the built files:
no lab answer is published, exercises are numbered within their chapter, explorers show static
states and no dead widget, chapters cite the articles through the Sources page, the page of tested
claims lists every row of every chapter's claims table with links that land on their sections, and the
coverage map lists every chapter section, claim key and lab part. Each page's first screen is saved
as a screenshot in pytest's temporary folder (``/tmp/pytest-of-$USER/pytest-current/``); the paths are
printed (use ``-s`` to see them). A page is loaded as few times as the checks allow (a chapter costs the
browser about 2 s of CPU a load): the read-only checks share one load, and the PDF edition's printer
serves the laptop-width and phone-width checks (a resize costs a fraction of a load).
"""

from __future__ import annotations

import functools
import html
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlparse

import nbformat
import pytest
import yaml
from playwright.sync_api import Browser, Page, Request, Response, sync_playwright

from tests.bootstrap import book_config
from tests.hygiene import MIN_FIGURE_FONT_PT, read_claims, section_titles  # book/_ext/claims_table.py: what the generated pages read
from tests.manifest import ROOT, load_manifest, toc_files
from tests.pdf_edition import local_only

CONFIG = book_config()
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
BUILD_TIMEOUT_S = 600
PAGE_TIMEOUT_MS = 20_000

INTRO = TOC["root"] + ".html"  # book/intro.html
CHAPTER_01 = "notebooks/01_tensors.html"
PAGES = {"intro": INTRO, "chapter-01": CHAPTER_01}


def _jupyter_book() -> str:
    """The jupyter-book command of the running environment (the .venv that `make test` uses)."""
    beside = Path(sys.executable).parent / "jupyter-book"
    found = str(beside) if beside.exists() else shutil.which("jupyter-book")
    if found is None:
        pytest.fail("jupyter-book is not installed in this environment (pip install -r requirements.txt)")
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the book into a temporary folder; the build must pass with -W -n and print no warning."""
    out = tmp_path_factory.mktemp("site")
    command = [_jupyter_book(), "build", str(ROOT), "--path-output", str(out), "-W", "-n", "--keep-going"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    log = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)  # Sphinx colours its log even in a pipe
    warnings = [line for line in log.splitlines() if "WARNING" in line]
    clean = result.returncode == 0 and not warnings
    assert clean, (
        f"`{' '.join(command)}` exited {result.returncode} with {len(warnings)} warning line(s):\n"
        + "\n".join(warnings[:40])
        + f"\n--- end of the build log ---\n{log[-3000:]}"
    )
    html = out / "_build" / "html"
    assert (html / INTRO).is_file(), f"the build wrote no {INTRO} under {html}"
    return html


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the stdlib's name)
        pass


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    """Serve the built site on 127.0.0.1 (a free port) for the duration of the module."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM} (Debian: apt-get install chromium; `make test` installs it)")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


class Visit:
    """One page opened in a fresh browser context, with the same-origin responses that failed."""

    def __init__(self, browser: Browser, base_url: str, path: str, width: int = 1280) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.outside: list[str] = []  # requests that tried to leave the local site (aborted)
        self.context.route("**/*", functools.partial(local_only, base_url, self.outside))
        self.page: Page = self.context.new_page()
        self.page.set_default_timeout(PAGE_TIMEOUT_MS)
        self.failed: list[str] = []
        self.page.on("response", functools.partial(self._record_response, base_url))
        self.page.on("requestfailed", functools.partial(self._record_failure, base_url))
        self.response = self.page.goto(f"{base_url}/{path}", wait_until="load")

    def _record_response(self, base_url: str, response: Response) -> None:
        url = response.url
        if url.startswith(base_url) and response.status >= 400 and not url.endswith("/favicon.ico"):
            self.failed.append(f"HTTP {response.status} {url}")

    def _record_failure(self, base_url: str, request: Request) -> None:
        if request.url.startswith(base_url):
            self.failed.append(f"{request.failure} {request.url}")

    def screenshot(self, folder: Path, name: str, capsys: pytest.CaptureFixture[str]) -> Path:
        """The first screen, as a reader sees it: a whole chapter (46,000 px tall at 1280 px) cost the
        browser 4.5 s of CPU to paint and encode, for a picture nobody can read."""
        path = folder / f"{name}.png"
        self.page.screenshot(path=str(path))
        with capsys.disabled():
            print(f"\nscreenshot: {path}")
        return path

    def close(self) -> None:
        self.context.close()


Opener = Callable[..., Visit]


@pytest.fixture
def visit(browser: Browser, base_url: str) -> Iterator[Opener]:
    """Open pages (paths relative to the site root); their browser contexts close after the test."""
    opened: list[Visit] = []

    def open_page(path: str, width: int = 1280) -> Visit:
        opened.append(Visit(browser, base_url, path, width))
        return opened[-1]

    yield open_page
    for v in opened:
        v.close()


@pytest.fixture(scope="module")
def desktop(browser: Browser, base_url: str) -> Iterator[dict[str, Visit]]:
    """The intro and chapter 01 at 1280 px, opened once for the tests that only read them (each load of a
    chapter costs the browser about 2 s of CPU); the tests that click open pages of their own."""
    opened = {path: Visit(browser, base_url, path) for path in PAGES.values()}
    yield opened
    for v in opened.values():
        v.close()


@pytest.mark.parametrize("name", PAGES)
def test_page_renders(name: str, desktop: dict[str, Visit], shots: Path, capsys: pytest.CaptureFixture[str]) -> None:
    v = desktop[PAGES[name]]
    status = v.response.status if v.response is not None else None
    assert status == 200, f"{PAGES[name]}: HTTP status {status}"
    assert v.page.title().endswith(CONFIG["title"]), f"{PAGES[name]}: unexpected <title> {v.page.title()!r}"
    heading = v.page.locator("article.bd-article h1").first
    heading.wait_for(state="visible")
    text = heading.inner_text().strip().rstrip("#").strip()
    assert text, f"{PAGES[name]}: the main heading is empty"
    if name == "chapter-01":
        assert text.startswith("01"), f"{PAGES[name]}: heading {text!r} is not chapter 01's"
    assert not v.failed, f"{PAGES[name]}: resources that did not load:\n" + "\n".join(v.failed)
    v.screenshot(shots, name, capsys)


@pytest.mark.parametrize("name", PAGES)
def test_images_load(name: str, desktop: dict[str, Visit]) -> None:
    v = desktop[PAGES[name]]
    v.page.wait_for_function(
        "() => Array.from(document.querySelectorAll('article.bd-article img')).every(img => img.complete)"
    )
    images = v.page.eval_on_selector_all(
        "article.bd-article img",
        "imgs => imgs.map(img => ({src: img.getAttribute('src'), width: img.naturalWidth,"
        " figure: img.closest('.cell_output') !== null}))",
    )
    broken = [img["src"] for img in images if img["width"] == 0]
    assert not broken, f"{PAGES[name]}: images that did not load: {broken}"
    if name == "chapter-01":
        figures = [img for img in images if img["figure"] and img["src"].endswith(".png")]
        assert figures, f"{CHAPTER_01}: no figure (a PNG in a cell output, e.g. a matplotlib plot) on the page"


def test_autograd_graphs_are_pictures(site: Path) -> None:
    """Chapter 04's torchviz drawings reach the site as SVG images of real graphs, not as a Digraph repr."""
    page = _chapter_pages(site)[4]
    assert "graphviz.graphs.Digraph" not in page, "a torchviz graph is published as its text repr, not a picture"
    drawn = [
        src for src in re.findall(r'<img[^>]+src="\.\./(_images/[^"]+\.svg)"', page)
        if "AccumulateGrad" in (site / src).read_text(encoding="utf-8")
    ]
    assert len(drawn) >= 2, f"expected the two autograd graphs of chapter 04 as SVG pictures, found {drawn}"


def test_solution_opens_on_click(visit: Opener, shots: Path, capsys: pytest.CaptureFixture[str]) -> None:
    v = visit(CHAPTER_01)
    solution = v.page.locator("div.solution.dropdown").first
    assert solution.count() == 1, f"{CHAPTER_01}: no exercise solution rendered as a dropdown (:class: dropdown)"
    content = solution.locator(":scope > section").first  # sphinx-exercise puts the solution's body in a <section>
    button = solution.locator("button.toggle-button")  # added by sphinx-togglebutton's script
    button.wait_for(state="attached")
    assert content.is_hidden(), "the solution is visible before it was clicked"
    solution.scroll_into_view_if_needed()
    button.click()
    content.wait_for(state="visible")
    assert content.inner_text().strip(), "the opened solution is empty"
    assert "toggle-hidden" not in (solution.get_attribute("class") or "")
    path = shots / "chapter-01-solution.png"
    solution.screenshot(path=str(path))
    with capsys.disabled():
        print(f"\nscreenshot: {path}")


def _expected_colab_url(notebook: str) -> str:
    repository = CONFIG["repository"]
    owner, repo = urlparse(repository["url"]).path.strip("/").removesuffix(".git").split("/")[:2]
    branch = repository.get("branch", "main")
    return f"https://colab.research.google.com/github/{owner}/{repo}/blob/{branch}/{notebook}"


def test_colab_launch_link(visit: Opener) -> None:
    v = visit(CHAPTER_01)
    links = v.page.locator(".dropdown-launch-buttons a[href*='colab.research.google.com']")
    hrefs = links.evaluate_all("links => links.map(a => a.href)")
    expected = _expected_colab_url("notebooks/01_tensors.ipynb")
    assert hrefs == [expected], f"Colab launch link(s) {hrefs}, expected [{expected!r}]"
    # the link lives in the rocket dropdown: it must show up when the reader opens it
    v.page.locator(".dropdown-launch-buttons button.dropdown-toggle").click()
    links.first.wait_for(state="visible")


def test_intro_links_every_chapter(desktop: dict[str, Visit]) -> None:
    chapters = sorted(f for f in toc_files(TOC) if re.fullmatch(r"notebooks/\d\d_\w+", f))
    assert chapters, "_toc.yml lists no chapter notebook"
    v = desktop[INTRO]
    hrefs = v.page.eval_on_selector_all("article.bd-article a[href]", "links => links.map(a => a.href)")
    linked = {urlparse(h).path.removesuffix(".html").lstrip("/") for h in hrefs}
    missing = [c for c in chapters if c not in linked]
    assert not missing, f"book/intro.md does not link these chapters of _toc.yml: {missing}"


def _lines_between(source: str, begin: str, end: str) -> list[str]:
    """The stripped lines of every ``begin`` ... ``end`` region of a cell."""
    lines, inside = [], False
    for line in source.splitlines():
        if line.strip() == begin:
            inside = True
        elif line.strip() == end:
            inside = False
        elif inside:
            lines.append(line.strip())
    return lines


LAB_PART = re.compile(r"^## (Part .*)$", re.MULTILINE)
SECRET_REGIONS = {"solution": ("### BEGIN SOLUTION", "### END SOLUTION"),
                  "hidden test": ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")}


def _secret_lines() -> dict[str, str]:
    """Lines of the labs' solutions and hidden tests that the student versions do not contain.

    Only distinctive lines count (at least 30 characters): short ones like ``return out`` occur
    anywhere. Each maps to where it comes from (lab, part and kind), so a leak says which answer a page
    gives away.
    """
    from tests import lab_tools

    secrets: dict[str, str] = {}
    for lab in lab_tools.lab_names():
        released = "\n".join(
            cell.source for path in lab_tools.release_notebooks(lab) for cell in nbformat.read(path, as_version=4).cells
        )
        for path in lab_tools.source_notebooks(lab):
            part = "before its first part"
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type == "markdown" and (heading := LAB_PART.search(cell.source)):
                    part = heading[1]
                for kind, (begin, end) in SECRET_REGIONS.items():
                    for line in _lines_between(cell.source, begin, end):
                        if len(line) >= 30 and line not in released:
                            secrets[line] = f"{lab}, {part} ({kind})"
    return secrets


LEAK_MARKERS = ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")


def _leaks(site: Path, secrets: dict[str, str]) -> list[str]:
    """Each built file that holds a lab answer, with the lines it holds and where each comes from."""
    leaks = []
    for path in sorted(site.rglob("*")):
        if not path.is_file() or path.suffix not in {".html", ".ipynb", ".js", ".txt", ".json", ".md"}:
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        # Highlighted code is split into <span>s and escaped: compare the text a reader sees.
        text = html.unescape(re.sub(r"<[^>]+>", "", raw))
        # The markers are named on the instructors' page; in a lab's page they would mean a source leaked.
        found = [f"the marker {m!r}" for m in LEAK_MARKERS if m in raw and "labs" in path.parts]
        found += [f"{line!r}, from {where}" for line, where in secrets.items() if line in text or line in raw]
        if found:
            leaks.append(f"{path.relative_to(site)}:\n    " + "\n    ".join(found[:3]))
    return leaks


def test_site_publishes_no_solution_and_no_hidden_test(site: Path) -> None:
    """Every built file (pages, downloadable notebooks, search index) is free of lab answers."""
    secrets = _secret_lines()
    assert secrets, "found no solution or hidden-test lines in the lab sources: the check would prove nothing"
    leaks = _leaks(site, secrets)
    assert not leaks, (
        "the public site gives away lab answers; a chapter must not hold a line of a lab's solution or hidden "
        "test: let the lab part apply the chapter to another problem, or show the chapter's idea with other "
        "code (renaming a variable only hides the repeat from this check):\n  " + "\n  ".join(leaks)
    )


def test_a_leak_names_the_page_the_lab_and_the_part(tmp_path: Path) -> None:
    line = "shapes[name] = tuple(output.shape)  # a lab's answer"
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "08_x.html").write_text(f"<pre><span>{html.escape(line)}</span></pre>", encoding="utf-8")
    (tmp_path / "notebooks" / "09_y.html").write_text("<p>nothing to see</p>", encoding="utf-8")
    leaks = _leaks(tmp_path, {line: "lab02_modules, Part 4 · A feature extractor (solution)"})
    assert leaks == [f"notebooks/08_x.html:\n    {line!r}, from lab02_modules, Part 4 · A feature extractor (solution)"]


def _chapter_paths() -> dict[int, str]:
    """Chapter number -> its page's path in the site, for every chapter notebook in _toc.yml."""
    paths = {int(match[1]): f"{file}.html" for file in toc_files(TOC)
             if (match := re.fullmatch(r"notebooks/(\d\d)_\w+", file))}
    assert paths, "_toc.yml lists no chapter notebook"
    return paths


def _chapter_pages(site: Path) -> dict[int, str]:
    """Chapter number -> the HTML of its page, for every chapter notebook in _toc.yml."""
    return {chapter: (site / path).read_text(encoding="utf-8") for chapter, path in _chapter_paths().items()}


def test_exercises_are_numbered_within_their_chapter(site: Path) -> None:
    """Chapter 02's exercises read "Exercise 2.1", "Exercise 2.2"... (book/_ext/chapter_exercises.py)."""
    for chapter, page in _chapter_pages(site).items():
        numbers = re.findall(r'<span class="caption-number">Exercise ([\d.]+) </span>', page)
        expected = [f"{chapter}.{k}" for k in range(1, len(numbers) + 1)]
        assert numbers == expected, f"chapter {chapter:02d}: exercises numbered {numbers}, expected {expected}"


def test_explorers_show_static_states_and_no_dead_control(site: Path) -> None:
    """A live widget needs a kernel: the site shows precomputed states (ptlabs.show_states) instead."""
    for chapter, page in _chapter_pages(site).items():
        assert "application/vnd.jupyter.widget-view+json" not in page, (
            f"chapter {chapter:02d} publishes a widget view, a control that does nothing on the website; "
            "tag the widget cell `remove-cell` and show its states with ptlabs.show_states"
        )
        assert "ptlabs-states" in page, f"chapter {chapter:02d} shows no explorer states (ptlabs.show_states)"


def test_chapter_pages_open_with_their_title_and_text(site: Path) -> None:
    """The Colab set-up cell runs in the notebook but is not on the page: the article starts with its title."""
    for chapter, page in _chapter_pages(site).items():
        article = page[page.index('<article class="bd-article"'):]
        first_heading = article.index("<h1")
        assert "cell_input" not in article[:first_heading], f"chapter {chapter:02d} shows a code cell before its title"
        assert "PTLABS_PIP_SOURCE" not in page, f"chapter {chapter:02d} publishes the Colab bootstrap cell"


def test_chapters_cite_the_sources_page(site: Path) -> None:
    """The articles are cited through book/sources.md, which names all three."""
    sources = (site / "book" / "sources.html").read_text(encoding="utf-8")
    for label in ("source-modules", "source-practice", "source-deep-dive"):
        assert f'id="{label}"' in sources, f"the Sources page has no anchor {label!r}"
    for chapter, page in _chapter_pages(site).items():
        if chapter > 0:
            assert "book/sources.html#source-" in page, f"chapter {chapter:02d} cites no article via the Sources page"


PHONE_WIDTH = 390


#: A figure's natural size against its size on screen: (image, pixels drawn, CSS pixels shown).
FIGURE_SIZES = ("[...document.querySelectorAll('article div.cell_output img')]"
                ".filter(i => (i.src.endsWith('.png') || i.src.startsWith('data:image/png')) && i.offsetParent)"
                ".map(i => [i.src.startsWith('data:') ? i.alt : i.src.split('/').pop(), i.naturalWidth,"
                " i.getBoundingClientRect().width])")


def test_no_page_scrolls_sideways_on_a_phone(printed: Printed, shots: Path) -> None:
    """At a phone's width, long code, headings and tables wrap or scroll in place (_static/book.css)."""
    wide = [f"{file}: {width} px" for file, (width, _, _) in printed.phone.items() if width > PHONE_WIDTH]
    assert not wide, (
        f"pages wider than a {PHONE_WIDTH} px phone screen (screenshots in {shots}):\n  " + "\n  ".join(wide)
    )


def test_colab_form_titles_stay_in_the_notebooks_and_off_the_pages(site: Path) -> None:
    """The solutions' ``# @title`` line folds them in Colab; on the site it means nothing (book/_ext/colab_forms.py)."""
    in_notebooks = sum((ROOT / "notebooks" / f"{Path(path).stem}.ipynb").read_text(encoding="utf-8").count("# @title")
                       for path in _chapter_paths().values())
    assert in_notebooks, "no chapter has a Colab form title: is this test still needed?"
    shown = {chapter: page.count("@title") for chapter, page in _chapter_pages(site).items() if "@title" in page}
    assert not shown, f"chapter pages that show Colab's '# @title' line: {shown}"


#: Laptop and desktop widths at which no code cell or output may be cut at its right edge (_static/book.css).
WIDE_SCREENS = (1280, 1440)
#: Code cells and outputs of a chapter page, as the theme and myst-nb render them.
CODE_BLOCKS = "div.cell div.highlight pre, div.cell_output pre, div.output pre"


def _code_blocks(page: Page, chapter: int) -> tuple[int, list[str]]:
    """How many code blocks a chapter page shows, and the longest line of each one cut at its right edge."""
    widest = page.eval_on_selector_all(
        CODE_BLOCKS,
        "blocks => blocks.filter(b => b.scrollWidth > b.clientWidth + 1)"
        ".map(b => b.textContent.split('\\n').reduce((a, l) => l.length > a.length ? l : a, ''))",
    )
    cut = [f"chapter {chapter:02d}: {line.strip()[:70]!r} ({len(line)} columns)" for line in widest]
    return page.locator(CODE_BLOCKS).count(), cut


#: The viewport the PDF edition's printer loads every page in (Playwright's default).
PRINTER_VIEWPORT = {"width": 1280, "height": 720}
PHONE_VIEWPORT = {"width": PHONE_WIDTH, "height": 900}
#: width -> chapter -> (code blocks, the cut ones' longest lines)
CodeBlocksSeen = dict[int, dict[int, tuple[int, list[str]]]]
#: The text of the navigation and the page's contents columns: how many pieces of text they show, and each one
#: whose end lies past its column's right edge (where the theme clips it, or it runs into the margin).
COLUMN_TEXT = """() => {
  const columns = [...document.querySelectorAll('.bd-sidebar-primary, .bd-sidebar-secondary')]
    .filter(column => column.getBoundingClientRect().width > 0);
  let shown = 0;
  const cut = [];
  for (const column of columns) {
    const edge = column.getBoundingClientRect().right;
    const walker = document.createTreeWalker(column, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const range = document.createRange();
      range.selectNodeContents(node);
      const boxes = [...range.getClientRects()].filter(box => box.width > 0);
      if (!node.textContent.trim() || !boxes.length) continue;
      shown += 1;
      const end = Math.max(...boxes.map(box => box.right));
      if (end > edge + 0.5) cut.push(`"${node.textContent.trim().slice(0, 60)}" ends ${Math.ceil(end - edge)} px past`
        + ` the ${column.classList.contains('bd-sidebar-primary') ? 'navigation' : 'contents'}`);
    }
  }
  return [shown, cut];
}"""
#: "page at width px" -> (pieces of text in its side columns, the cut ones)
ColumnsSeen = dict[str, tuple[int, list[str]]]
#: A page at a phone's width: its scroll width, the URLs outside the site it asked for, its figures' sizes.
PhoneView = tuple[int, list[str], list]


class Printed(NamedTuple):
    """What the PDF edition's printer saw: the PDF, and every page read on screen before it was printed."""

    pdf: Path
    code_blocks: CodeBlocksSeen  # the chapters at every laptop width
    columns: ColumnsSeen  # every page at the printer's width, the chapters at every laptop width
    phone: dict[str, PhoneView]  # every page of the table of contents at a phone's width


@pytest.fixture(scope="module")
def printed(site: Path, browser: Browser, shots: Path) -> Printed:
    """The PDF edition, printed once (tests/pdf_edition.py), and every page read on screen in the printer's page
    before it prints it (a resize and relayout cost a fraction of a load): every page's side columns, each
    chapter's code blocks and side columns at every laptop width, then every page at a phone's width once its images for that width have loaded (a page wider than the phone is saved as a screenshot); the printer's viewport is put back before
    printing."""
    from tests.pdf_edition import PAGE_READY, PDF_NAME, build_pdf

    chapters = {path.removesuffix(".html"): number for number, path in _chapter_paths().items()}
    seen: CodeBlocksSeen = {width: {} for width in WIDE_SCREENS}
    phone: dict[str, PhoneView] = {}
    columns: ColumnsSeen = {}

    def read(name: str, page: Page, blocked: list[str]) -> None:
        assert page.viewport_size == PRINTER_VIEWPORT, page.viewport_size
        columns[f"{name} at {PRINTER_VIEWPORT['width']} px"] = tuple(page.evaluate(COLUMN_TEXT))
        if name in chapters:
            for width in WIDE_SCREENS:
                page.set_viewport_size({**PRINTER_VIEWPORT, "width": width})
                seen[width][chapters[name]] = _code_blocks(page, chapters[name])
                columns[f"{name} at {width} px"] = tuple(page.evaluate(COLUMN_TEXT))
        page.set_viewport_size(PHONE_VIEWPORT)
        page.wait_for_function(PAGE_READY)  # again: images the phone's width asks for
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE_WIDTH:
            page.screenshot(path=str(shots / f"phone-{name.replace('/', '-')}.png"), full_page=True)
        phone[name] = (width, sorted(set(blocked)), page.evaluate(FIGURE_SIZES))
        page.set_viewport_size(PRINTER_VIEWPORT)

    return Printed(build_pdf(site, site / PDF_NAME, browser, on_page=read), seen, columns, phone)


@pytest.mark.parametrize("width", WIDE_SCREENS)
def test_no_code_or_output_is_cut_at_laptop_widths(width: int, printed: Printed) -> None:
    """Every line the lint lets through (88 columns) shows whole: a block's content is no wider than the block.
    The chapters are read in the PDF edition's printer (see ``printed``)."""
    found = printed.code_blocks[width]
    assert sorted(found) == sorted(_chapter_paths()), f"chapters read at {width} px: {sorted(found)}"
    blocks = sum(count for count, _ in found.values())
    cut = [line for _, lines in found.values() for line in lines]
    assert blocks > 500, f"only {blocks} code blocks found: has the theme's markup changed?"
    assert not cut, f"{len(cut)} of {blocks} code blocks cut at {width} px:\n  " + "\n  ".join(cut[:10])


def test_no_text_is_cut_at_the_edge_of_the_side_columns(printed: Printed) -> None:
    """At laptop widths the navigation and the page's contents column (12rem from 1200 px, _static/book.css) hold
    all their text: a name in code once widened chapter 06's contents past the column's edge and cut it."""
    empty = sorted(page for page, (shown, _) in printed.columns.items() if not shown)
    assert not empty, f"no text found in the side columns of {empty[:5]}: has the theme's markup changed?"
    assert len(printed.columns) > len(_chapter_paths()) * len(WIDE_SCREENS), sorted(printed.columns)
    cut = [f"{page}: {text}" for page, (_, texts) in sorted(printed.columns.items()) for text in texts]
    assert not cut, f"{len(cut)} pieces of text cut at a side column's edge:\n  " + "\n  ".join(cut[:10])


def test_figures_are_readable_on_a_phone(printed: Printed) -> None:
    """Every figure's smallest text (10 pt or more, tests/hygiene.py; 100 dpi, ptlabs' style) shows at 9 CSS px or
    more at a phone's width: _static/book.css keeps figures at 480 px there, in a box that scrolls sideways."""
    smallest = MIN_FIGURE_FONT_PT * 100 / 72  # pixels in the PNG
    figures = [(file, *size) for file, (_, _, sizes) in printed.phone.items() for size in sizes]
    assert figures, "no figure found on any page: is the selector still right?"
    small = [f"{file}: {name} drawn {natural} px wide, shown {shown:.0f} px: its {MIN_FIGURE_FONT_PT} pt text is "
             f"{smallest * shown / natural:.1f} px" for file, name, natural, shown in figures
             if smallest * shown / natural < 9]
    assert not small, f"figures unreadable at {PHONE_WIDTH} px:\n  " + "\n  ".join(small)


def test_pages_load_nothing_from_the_network(printed: Printed) -> None:
    """Offline, a page must lose nothing: no CDN script, font or style is requested (_static/mathjax is local)."""
    outside = {file: requests[:3] for file, (_, requests, _) in printed.phone.items() if requests}
    assert not outside, f"pages requested non-local resources: {outside}"


def test_math_renders_offline_and_only_where_there_is_math(desktop: dict[str, Visit]) -> None:
    """Chapter 01 typesets its formula with the site's own MathJax; a page without math loads no MathJax."""
    v = desktop[CHAPTER_01]
    v.page.wait_for_selector("mjx-container", state="attached", timeout=PAGE_TIMEOUT_MS)
    assert v.page.locator("mjx-container").count() >= 1
    assert not v.failed and not v.outside, f"math needed the network: {v.failed + v.outside}"
    intro = desktop[INTRO]
    scripts = intro.page.eval_on_selector_all("script[src]", "s => s.map(e => e.getAttribute('src'))")
    assert not [src for src in scripts if "mathjax" in src.lower()], f"the intro loads MathJax without math: {scripts}"


def test_phone_menu_and_page_contents_open(visit: Opener, shots: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """At a phone's width the menu opens and a link in it works; the page contents open too (theme pinned)."""
    v = visit(CHAPTER_01, PHONE_WIDTH)
    assert not v.page.is_visible(".bd-sidebar-primary"), "the menu is open before it is asked for"
    v.page.click("button.primary-toggle")
    menu = v.page.locator(".bd-sidebar-primary")
    menu.wait_for(state="visible")
    menu.locator("a", has_text="nn.Module").first.click()
    v.page.wait_for_load_state("load")
    assert v.page.url.endswith("notebooks/02_modules.html"), f"the menu link led to {v.page.url}"
    v.page.click("button.secondary-toggle")
    contents = v.page.locator(".bd-sidebar-secondary")
    contents.wait_for(state="visible")
    assert contents.locator("a").first.is_visible(), "the page contents opened empty"
    v.screenshot(shots, "phone-page-contents", capsys)


def test_desktop_shows_one_search_box(desktop: dict[str, Visit]) -> None:
    v = desktop[CHAPTER_01]
    boxes = v.page.evaluate(
        "Array.from(document.querySelectorAll('form.bd-search, .search-button-field'))"
        ".filter(e => e.offsetParent !== null).length"
    )
    assert boxes == 1, f"{boxes} search boxes visible on the desktop layout"


def test_chapter_pages_say_what_they_were_validated_with(site: Path) -> None:
    """A line under each chapter title, generated from the notebook's metadata (book/_ext/validation.py)."""
    for chapter, page in _chapter_pages(site).items():
        line = re.search(r'<p class="ptlabs-validated">(.*?)</p>', page, re.S)
        assert line, f"chapter {chapter:02d} has no validation line under its title"
        text = html.unescape(re.sub(r"<[^>]+>", "", line[1]))
        assert re.search(r"torch \d+\.\d+\.\d+\S* on \S+, refreshed \d{4}-\d\d-\d\d", text), text
        assert "status.html" in line[1], f"chapter {chapter:02d}: the line does not link the execution status"


def test_execution_status_page_lists_every_notebook(site: Path) -> None:
    page = html.unescape(re.sub(r"<[^>]+>", " ", (site / "book" / "status.html").read_text(encoding="utf-8")))
    if "No test run is recorded" in page:
        return  # a fresh clone: the page says how to get one
    missing = [path for path in load_manifest() if path not in page]
    assert "Last run:" in page and not missing, f"the execution-status page lacks {missing}"


def test_claims_page_lists_every_claim_and_its_links_land_on_their_sections(site: Path) -> None:
    """book/claims.html holds every claims-table row of every chapter; each "§N" link opens section N."""
    page = (site / "book" / "claims.html").read_text(encoding="utf-8")
    expected, keys = 0, set()
    for file in toc_files(TOC):
        if re.fullmatch(r"notebooks/\d\d_\w+", file):
            claims, problems = read_claims(nbformat.read(ROOT / f"{file}.ipynb", as_version=4))
            assert claims and not problems, f"{file}: {problems or 'no claims'}"
            expected += len(claims)
            keys |= {claim.key for claim in claims}
    rows = re.findall(r"<tr[ >].*?</tr>", page, re.S)
    claim_rows = [row for row in rows if re.search(r">§\d+</a>", row)]  # the overview table has no section links
    assert len(claim_rows) == expected, f"the claims page has {len(claim_rows)} claims, the chapters {expected}"
    totals = [row for row in rows if "<strong>all</strong>" in row]
    assert len(totals) == 2 and "How the verdicts are known" in page, "the overview counts verdicts and how they were settled"
    for total in totals:  # each overview table's counts add up to the book's claims, each counted once
        counts = [int(n) for n in re.findall(r"<td><p>(\d+)</p></td>", total)]
        assert sum(counts) in (len(keys), 2 * len(keys)), f"the total row {counts} does not add up to {len(keys)} claims"
    cross = [row for row in claim_rows if "; here:" in row]  # settled in another chapter
    assert cross, "no claim settled in another chapter: is this check still needed?"
    for row in cross:  # the first section link lands in the chapter that settles the claim, not in this one
        chapter = re.search(r"of chapter (\d\d); here:", re.sub(r"<[^>]+>", "", row))[1]
        first = re.search(r'href="([^"]+)">§\d+</a>', row)[1]
        assert f"notebooks/{chapter}_" in first, f"a row settled in chapter {chapter} links {first} first"
    links = re.findall(r'<a class="reference internal" href="([^"]+)">§(\d+)</a>', page)
    assert len(links) >= expected, f"{len(links)} section links for {expected} claims"
    for href, number in set(links):
        target, _, anchor = href.partition("#")
        target_page = (site / "book" / target).resolve().read_text(encoding="utf-8")
        section = re.search(rf'<section id="{re.escape(anchor)}">\s*<h2>(.*?)</h2>', target_page, re.S)
        assert section, f"{href}: no section with that id"
        title = html.unescape(re.sub(r"<[^>]+>", "", section[1])).strip()
        assert title.startswith(f"{number}. "), f"{href} is labelled §{number} but opens {title!r}"


def test_coverage_map_lists_every_section_claim_key_and_lab_part(site: Path) -> None:
    """book/coverage.html (book/_ext/coverage_map.py) shows a contributor what exists, read from the notebooks."""
    page = html.unescape(re.sub(r"<[^>]+>", "", (site / "book" / "coverage.html").read_text(encoding="utf-8")))
    page = page.translate(str.maketrans("“”‘’", "\"\"''"))  # Sphinx's smart quotes
    expected = []
    for file in toc_files(TOC):
        nb = nbformat.read(ROOT / f"{file}.ipynb", as_version=4) if file.startswith(("notebooks/", "labs/")) else None
        if nb is None:
            continue
        markdown = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
        if file.startswith("notebooks/"):
            expected += [f"§{n} {title}" for n, title in section_titles(nb).items()]
            expected += [claim.key for claim in read_claims(nb)[0]]
        else:
            expected += re.findall(r"^## (Part .+?)\s*$", markdown, re.MULTILINE)
    plain = [re.sub(r"[`*]", "", entry) for entry in expected]
    missing = [entry for entry in plain if entry not in page]
    assert expected and not missing, f"the coverage map lacks {len(missing)} entries, e.g. {missing[:5]}"


#: The claims page with every chapter's table folded: an overview a phone can scroll through (about 4,700 px at
#: 390 px, against 63,000 px unfolded).
CLAIMS_FOLDED_HEIGHT = 8000


@pytest.mark.parametrize("width", [PHONE_WIDTH, 1280])
def test_claims_page_fits_a_phone_and_folds_each_chapter(width: int, visit: Opener) -> None:
    """book/_ext/claims.py folds each chapter's table in a <details>; on a phone each row is a card
    (_static/book.css). Every table, folded or open, fits the column without scrolling in place."""
    v = visit("book/claims.html", width)
    chapters = len([f for f in toc_files(TOC) if re.fullmatch(r"notebooks/\d\d_\w+", f)])
    folds = v.page.evaluate("[...document.querySelectorAll('details.ptlabs-claims-table')].map(d => d.open)")
    assert folds == [False] * chapters, f"expected {chapters} folded chapter tables, found {folds}"
    height = v.page.evaluate("document.documentElement.scrollHeight")
    assert width > PHONE_WIDTH or height <= CLAIMS_FOLDED_HEIGHT, f"the folded page is {height} px tall"
    v.page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    wide = v.page.evaluate(
        "[...document.querySelectorAll('article table')].filter(t => t.scrollWidth > t.parentElement.clientWidth"
        " + 1).map(t => t.innerText.slice(0, 60))"
    )
    assert not wide, f"tables wider than the column at {width} px: {wide}"
    assert v.page.evaluate("document.documentElement.scrollWidth") <= width
    if width == PHONE_WIDTH:  # a card labels each cell, since the header row is hidden
        label = v.page.evaluate(
            "getComputedStyle(document.querySelector('.ptlabs-claims-table td:nth-child(4)'), '::before').content"
        )
        assert label == '"shown in"', label


def test_static_explorers_switch_states_without_javascript(browser: Browser, base_url: str) -> None:
    """Each chapter's precomputed explorer states (ptlabs.show_states) show one at a time, and a click on a choice
    shows that state: radio buttons and CSS, so it works with JavaScript off."""
    context = browser.new_context(java_script_enabled=False, viewport={"width": PHONE_WIDTH, "height": 900})
    try:
        page = context.new_page()
        for chapter, path in _chapter_paths().items():
            page.goto(f"{base_url}/{path}")
            view = page.locator("div.ptlabs-states").first
            shown = view.evaluate("v => [...v.querySelectorAll('.ptlabs-state')].map(s => s.offsetParent !== null)")
            assert shown[:1] == [True] and not any(shown[1:]), f"chapter {chapter:02d}: states shown {shown}"
            if len(shown) > 1:
                view.locator("label").nth(1).click()
                shown = view.evaluate("v => [...v.querySelectorAll('.ptlabs-state')].map(s => s.offsetParent !== null)")
                assert shown[:2] == [False, True], f"chapter {chapter:02d}: after choosing the second state, {shown}"
    finally:
        context.close()


def test_the_build_reads_no_virtual_environment_and_every_page_of_the_contents() -> None:
    """`make colab-base` puts a venv in the checkout, whose packages' Markdown broke the warnings-as-errors build
    (174 warnings); any venv, by whatever name, holds a site-packages folder."""
    from sphinx.util.matching import Matcher

    from tests.pdf_edition import toc_pages

    excluded = Matcher(CONFIG["exclude_patterns"])
    venvs = [".venv", ".venv-colab", "py312/lib/python3.12/site-packages", "env/lib64/python3.13/site-packages"]
    assert all(excluded(folder) for folder in venvs), [folder for folder in venvs if not excluded(folder)]
    sources = [next(ROOT.glob(f"{page}.*")).relative_to(ROOT) for page in toc_pages()]
    skipped = [str(source) for source in sources if any(excluded(str(path)) for path in (source, *source.parents[:-1]))]
    assert not skipped, f"pages of the contents the build would not read: {skipped}"


def test_every_character_the_site_prints_has_a_font(site: Path) -> None:
    """Without one, Chromium prints an empty box: the checks' ✅ and the sources' Chinese titles did, in the PDF
    edition and on the screen of a machine with only Debian's default fonts (the Makefile installs them now)."""
    from tests.pdf_edition import characters_without_a_font

    missing = characters_without_a_font(site)
    assert not missing, "no font for: " + ", ".join(f"{c!r} U+{ord(c):04X} ({page})" for c, page in missing.items())


def test_a_character_without_a_font_stops_the_pdf_and_is_named_with_its_page(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """What ``make pdf`` says on a machine that lacks a font (here: one that draws ASCII only); text in scripts
    and styles is not printed, so it does not count."""
    from tests import pdf_edition

    pages = pdf_edition.toc_pages()
    for name in pages:
        (tmp_path / f"{name}.html").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"{name}.html").write_text("<p>plain</p><script>'\u6df1'</script><style>p{}</style>")
    (tmp_path / f"{pages[-1]}.html").write_text("<p>&#x2705; passed &amp; \u6df1</p>", encoding="utf-8")
    ascii_only = set(range(128))
    assert pdf_edition.characters_without_a_font(tmp_path, ascii_only) == {
        "\u2705": f"{pages[-1]}.html", "\u6df1": f"{pages[-1]}.html"}
    monkeypatch.setattr(pdf_edition, "covered_code_points", lambda: ascii_only)
    out = tmp_path / "book.pdf"
    assert pdf_edition.main(["--site", str(tmp_path), "--out", str(out)]) == 1
    error = capsys.readouterr().err
    assert "U+2705" in error and "U+6DF1" in error and f"({pages[-1]}.html)" in error, error
    assert "fonts-noto-color-emoji" in error and not out.exists()


def test_pdf_edition_has_every_page_in_its_outline_and_no_lab_answer(site: Path, printed: Printed) -> None:
    """tests/pdf_edition.py (`make pdf`) prints the site into one PDF beside it, which the introduction links:
    one outline entry per page of the table of contents, under the page's title, and no lab answer on the
    labs' pages. (The other pages are printed from the HTML that test_site_publishes_no_solution_and_no_hidden_test
    reads; reading the whole PDF's text would cost a minute.)"""
    from pypdf import PdfReader

    from tests.pdf_edition import PDF_NAME, toc_pages

    reader = PdfReader(printed.pdf)
    titles = [item.title for item in reader.outline]
    assert len(titles) == len(toc_pages()), f"{len(titles)} outline entries for {len(toc_pages())} pages: {titles}"
    for path in _chapter_paths().values():  # each chapter under its own "NN · Title"
        first_line = nbformat.read(ROOT / path.replace(".html", ".ipynb"), as_version=4).cells[0].source.splitlines()[0]
        assert first_line.removeprefix("# ").replace("`", "") in titles, f"the outline lacks {first_line!r}"
    assert len(reader.pages) > 10 * len(titles), f"{len(reader.pages)} pages: the chapters were not printed whole"
    starts = [reader.get_destination_page_number(item) for item in reader.outline] + [len(reader.pages)]
    lab_pages = [number for title, start, end in zip(titles, starts, starts[1:], strict=False)
                 if title.startswith("Lab ") for number in range(start, end)]
    assert lab_pages, "no lab in the outline"
    squeezed = re.sub(r"\s+", "", "".join(reader.pages[number].extract_text() for number in lab_pages))
    assert "Part1" in squeezed, "the labs' pages hold no lab text"
    leaks = [f"{line!r} ({where})" for line, where in _secret_lines().items() if re.sub(r"\s+", "", line) in squeezed]
    assert not leaks, "the PDF gives away lab answers:\n  " + "\n  ".join(leaks)
    claims_page = titles.index("Claims tested in this book")
    claims_text = "".join(reader.pages[n].extract_text() for n in range(starts[claims_page], starts[claims_page + 1]))
    assert "claim (source)" in claims_text, "the claims page was printed with its chapter tables folded"
    intro = (site / "book" / "intro.html").read_text(encoding="utf-8")
    assert f'href="../{PDF_NAME}"' in intro, "the introduction does not link the PDF"
