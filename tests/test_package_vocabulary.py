"""The learners' package changes version whenever what notebooks can call in it changes (tests/package_vocabulary.py).

The bootstrap cell upgrades an install older than pyproject.toml's version; these tests make sure that
version is the one that goes with today's vocabulary, and that a change to the vocabulary shows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ptchecks.domain
import ptlabs
from tests import package_vocabulary
from tests.bootstrap import ptlabs_version


def test_the_recorded_version_vouches_for_todays_vocabulary() -> None:
    history = package_vocabulary.recorded()
    found = package_vocabulary.problems(ptlabs_version(), package_vocabulary.fingerprint(), history)
    assert not found, "\n".join(found)
    versions = [entry["version"] for entry in history]
    assert len(versions) == len(set(versions)), f"a version recorded twice: {versions}"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_recorded_versions_only_grow() -> None:
    versions = [entry["version"] for entry in package_vocabulary.recorded()]
    assert versions == sorted(versions, key=_key), f"versions out of order in {package_vocabulary.VERSIONS.name}: {versions}"


def test_a_new_domain_structure_changes_the_vocabulary(monkeypatch: pytest.MonkeyPatch) -> None:
    """What broke an older install: a lab asking a Domain for a structure it did not know ('mixed modes')."""
    before = package_vocabulary.fingerprint()
    monkeypatch.setattr(ptchecks.domain, "FAMILIES", ptchecks.domain.FAMILIES | {"a new structure"})
    after = package_vocabulary.fingerprint()
    assert after != before
    found = package_vocabulary.problems(ptlabs_version(), after, package_vocabulary.recorded())
    assert found and "Bump the version in pyproject.toml" in found[0]


def test_a_new_parameter_changes_the_vocabulary(monkeypatch: pytest.MonkeyPatch) -> None:
    before = package_vocabulary.fingerprint()

    def check_close(actual, expected, *, name, rtol=None, atol=None, new_option=False):  # noqa: ANN001, ANN202
        return None

    monkeypatch.setattr(ptlabs, "check_close", check_close)
    assert package_vocabulary.fingerprint() != before


def test_a_version_cannot_be_recorded_again_with_another_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "versions.json"
    assert "recorded" in package_vocabulary.record("1.0.0", "aaaa", path)
    assert "already recorded" in package_vocabulary.record("1.0.0", "aaaa", path)
    with pytest.raises(SystemExit, match="bump the version"):
        package_vocabulary.record("1.0.0", "bbbb", path)
    package_vocabulary.record("1.1.0", "bbbb", path)
    assert json.loads(path.read_text()) == [{"version": "1.0.0", "vocabulary": "aaaa"},
                                           {"version": "1.1.0", "vocabulary": "bbbb"}]
    assert "not recorded" in package_vocabulary.problems("1.2.0", "bbbb", package_vocabulary.recorded(path))[0]
