"""What notebooks can call in the learners' package (``ptlabs`` and ``ptchecks``), as one fingerprint per version.

Why: a learner who installed ``ptlabs`` once keeps it, and a notebook written later may call what that
install lacks (a new function, a new parameter, a new name in a vocabulary such as ``ptchecks.domain``'s
module structures); it then fails with an error about the package, not about the lesson. The notebooks'
bootstrap cell (tests/bootstrap.py) therefore upgrades an install older than the version in
pyproject.toml, and this module makes sure that version moves whenever that vocabulary does: each
version's fingerprint is recorded in VERSIONS, and a fingerprint may not change under a recorded version.

The vocabulary: every public name of every module of the two packages, with each function's and
method's signature, each class's public methods and fields, and each constant's value. Changing what a
function does without changing how it is called needs no new version.

Usage: ``python -m tests.package_vocabulary --record`` after a change (bump the version in pyproject.toml
first, then `python -m tests.refresh` rewrites every notebook's bootstrap cell).
"""

from __future__ import annotations

import argparse
import enum
import hashlib
import importlib
import inspect
import json
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any

from tests.bootstrap import ptlabs_version
from tests.manifest import ROOT

PACKAGES = ("ptlabs", "ptchecks")
VERSIONS = ROOT / "tests" / "ptlabs-versions.json"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SIMPLE = (str, int, float, bool, type(None))


def _modules(package: str) -> list[Any]:
    root = importlib.import_module(package)
    names = [package] + sorted(info.name for info in pkgutil.walk_packages(root.__path__, f"{package}."))
    return [importlib.import_module(name) for name in names]


def _value(value: Any) -> Any:
    """A constant as JSON: containers item by item (sets sorted), anything else by its type and repr."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, _SIMPLE):
        return value
    if isinstance(value, (list, tuple)):
        return [_value(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_value(item) for item in value), key=repr)
    if isinstance(value, dict):
        return sorted(([_value(key), _value(item)] for key, item in value.items()), key=repr)
    return _ADDRESS.sub("", f"{type(value).__name__}:{value!r}")


def _signature(function: Any) -> str:
    try:
        return _ADDRESS.sub("", str(inspect.signature(function)))
    except (TypeError, ValueError):  # a builtin without a signature
        return "(...)"


def _describe(value: Any) -> Any:
    if inspect.isclass(value):
        members = {name: _signature(member) if callable(member) else _value(member)
                   for name, member in sorted(vars(value).items()) if not name.startswith("_")}
        fields = sorted(getattr(value, "__dataclass_fields__", {}))
        return {"class": _signature(value), "members": members, "fields": fields}
    if callable(value):
        return {"function": _signature(value)}
    return {"constant": _value(value)}


def vocabulary() -> dict[str, dict[str, Any]]:
    """Module -> public name -> what a caller sees of it (names imported from elsewhere are left to their own module)."""
    found: dict[str, dict[str, Any]] = {}
    for package in PACKAGES:
        for module in _modules(package):
            public = getattr(module, "__all__", None) or [name for name in vars(module) if not name.startswith("_")]
            entries = {}
            for name in sorted(public):
                value = getattr(module, name)
                if inspect.ismodule(value):
                    continue
                home = getattr(value, "__module__", module.__name__)
                if (inspect.isclass(value) or inspect.isfunction(value)) and home != module.__name__ and name not in getattr(module, "__all__", ()):
                    continue
                entries[name] = _describe(value)
            found[module.__name__] = entries
    return found


def fingerprint(found: dict[str, dict[str, Any]] | None = None) -> str:
    """A short hash of :func:`vocabulary` (or of ``found``)."""
    text = json.dumps(vocabulary() if found is None else found, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def recorded(path: Path = VERSIONS) -> list[dict[str, str]]:
    """[{"version": ..., "vocabulary": ...}, ...] in the order the versions were recorded."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []


def problems(version: str, current: str, history: list[dict[str, str]]) -> list[str]:
    """Why ``history`` does not vouch for ``current`` under ``version`` (empty when it does)."""
    mine = [entry["vocabulary"] for entry in history if entry["version"] == version]
    if not mine:
        return [f"ptlabs {version} (pyproject.toml) is not recorded in {VERSIONS.name}: "
                "run `python -m tests.package_vocabulary --record`"]
    if mine[-1] != current:
        return [f"what notebooks can call in ptlabs/ptchecks changed, but the version is still {version}: an "
                "older install would lack it. Bump the version in pyproject.toml, run `python -m tests.package_vocabulary "
                "--record`, then `python -m tests.refresh` (the bootstrap cells then upgrade older installs)"]
    return []


def record(version: str, current: str, path: Path = VERSIONS) -> str:
    """Add ``version`` with its fingerprint; refuse a version already recorded with another one."""
    history = recorded(path)
    known = {entry["version"]: entry["vocabulary"] for entry in history}
    if known.get(version) == current:
        return f"ptlabs {version} is already recorded with this vocabulary"
    if version in known:
        raise SystemExit(f"ptlabs {version} is recorded with another vocabulary: bump the version in pyproject.toml first")
    history.append({"version": version, "vocabulary": current})
    path.write_text(json.dumps(history, indent=1) + "\n", encoding="utf-8")
    return f"recorded ptlabs {version}: vocabulary {current}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="record pyproject.toml's version with today's vocabulary")
    args = parser.parse_args(argv)
    version, current = ptlabs_version(), fingerprint()
    if args.record:
        print(record(version, current))
        return 0
    found = problems(version, current, recorded())
    print("\n".join(found) or f"ptlabs {version}: vocabulary {current}, as recorded")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
