"""One engine per gradebook in a grading process: queries compiled once, a gradebook put back read afresh."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nbgrader.api
import pytest
from nbgrader.api import Gradebook

from ptgrader import gradebook_engines


@pytest.fixture(scope="module")
def new_gradebook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty gradebook, made once: nbgrader asks its environment's ``alembic`` for the schema (seconds of CPU)."""
    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
        Gradebook(f"sqlite:///{path}").close()
    return path


@pytest.fixture
def shared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nbgrader.api, "create_engine", nbgrader.api.create_engine)  # undone after the test
    monkeypatch.setattr(gradebook_engines, "_ENGINES", {})
    gradebook_engines.share_gradebook_engines()


def test_every_opening_of_a_gradebook_uses_one_engine_and_its_compiled_queries(
        shared: None, new_gradebook: Path, tmp_path: Path) -> None:
    for name in ("gradebook.db", "other.db"):
        shutil.copy(new_gradebook, tmp_path / name)
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gradebook:
        gradebook.add_student("ada")
        engine = gradebook.engine
        gradebook.find_student("ada")
    compiled = len(engine._compiled_cache)  # type: ignore[attr-defined]  (SQLAlchemy's statement cache)
    assert compiled > 0
    with Gradebook(url) as gradebook:
        assert gradebook.engine is engine
        assert gradebook.find_student("ada").id == "ada"
    assert len(engine._compiled_cache) == compiled  # type: ignore[attr-defined]  (nothing compiled again)
    with Gradebook(f"sqlite:///{tmp_path / 'other.db'}") as other:
        assert other.engine is not engine


def test_a_gradebook_file_put_back_between_openings_is_read_afresh(
        shared: None, new_gradebook: Path, tmp_path: Path) -> None:
    path = tmp_path / "gradebook.db"
    shutil.copy(new_gradebook, path)
    url = f"sqlite:///{path}"
    with Gradebook(url) as gradebook:
        gradebook.add_student("ada")
    shutil.copy(path, tmp_path / "record.db")  # what the course record keeps
    with Gradebook(url) as gradebook:
        gradebook.add_student("grace")
    shutil.copy(tmp_path / "record.db", path)  # and puts back
    with Gradebook(url) as gradebook:
        assert [student.id for student in gradebook.students] == ["ada"]
