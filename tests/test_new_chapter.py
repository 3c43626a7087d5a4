"""`python -m tests.new_chapter NN name "Title"` writes a chapter that passes the chapter rules as it is.

The template runs once here (a few seconds: it is tiny), in a temporary folder, as `make refresh` runs a
notebook; the registration is applied to copies of the three files that list chapters.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
import yaml

from tests import hygiene, new_chapter
from tests.bootstrap import bootstrap_source
from tests.manifest import ROOT, load_manifest
from tests.refresh import refresh_notebook
from tests.test_lint import _ruff

NUMBER, NAME, TITLE = "09", "func_demo", "torch.func in practice"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    path = tmp_path_factory.mktemp("chapter") / f"{NUMBER}_{NAME}.ipynb"
    nbformat.write(new_chapter.template(NUMBER, NAME, TITLE), path)
    refresh_notebook(path)
    return nbformat.read(path, as_version=4)


@pytest.mark.parametrize("rule", hygiene.RULES, ids=lambda rule: rule.__name__)
def test_the_template_follows_the_hygiene_rule(rule: hygiene.Rule, written: nbformat.NotebookNode) -> None:
    assert rule(written) == []


def test_the_template_opens_with_its_title_and_the_bootstrap(written: nbformat.NotebookNode) -> None:
    assert written.cells[0].source.startswith(f"# {NUMBER} · {TITLE}\n")
    assert next(c for c in written.cells if c.cell_type == "code").source == bootstrap_source()


def test_the_templates_claim_key_agrees_with_the_book(written: nbformat.NotebookNode) -> None:
    chapters = {path.split("/")[1][:2]: hygiene.read_claims(nbformat.read(ROOT / path, as_version=4))[0]
                for path in load_manifest() if path.startswith("notebooks/")}
    chapters[NUMBER] = hygiene.read_claims(written)[0]
    assert hygiene.inconsistent_keys(chapters) == []


def test_the_templates_code_fits_the_page(tmp_path: Path) -> None:
    path = tmp_path / "template.ipynb"
    nbformat.write(new_chapter.template(NUMBER, NAME, TITLE), path)
    result = _ruff(str(path))
    assert result.returncode == 0, result.stdout


def test_registration_lists_the_chapter_in_toc_manifest_and_intro(tmp_path: Path) -> None:
    for name in ("_toc.yml", "tests/notebooks.toml", "book/intro.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    new_chapter.register(tmp_path, NUMBER, NAME, TITLE)
    stem = f"notebooks/{NUMBER}_{NAME}"
    toc = yaml.safe_load((tmp_path / "_toc.yml").read_text(encoding="utf-8"))
    chapters = next(part for part in toc["parts"] if part["caption"] == "Chapters")["chapters"]
    assert chapters[-1] == {"file": stem}
    assert f"{stem}.ipynb" in load_manifest(tmp_path / "tests" / "notebooks.toml")
    intro = (tmp_path / "book" / "intro.md").read_text(encoding="utf-8")
    assert f"- {{doc}}`{NUMBER} · {TITLE} </{stem}>`" in intro
    assert intro.index(f"</{stem}>") > intro.index("</notebooks/07_troubleshooting>")
