"""What Colab's preinstalled packages occupy in one interpreter's site-packages: run by that interpreter.

tests/colab_env.py runs this file with ``python -I`` under the Python whose packages the Colab-like venv
links (the running environment's, or Colab's Python in .venv-colab), so the installed metadata and the
environment markers are that interpreter's own, not the caller's. It needs only the standard library and
``packaging``, which Colab preinstalls too.

Usage: ``python -I tests/colab_closure.py NAME...``; prints one JSON object: the Python version, the
site-packages folder, torch's version and folder, and the top-level site-packages entries of NAME... and of
everything they need.
"""

from __future__ import annotations

import json
import platform
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ModuleNotFoundError:
    sys.exit(f"packaging is needed to read the installed metadata but is not installed in {sys.prefix}")


def installed(name: str) -> metadata.Distribution:
    """The installed distribution, or exit with a message that names it and this environment."""
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        sys.exit(f"{name} is needed for the Colab-like environment but is not installed in {sys.prefix}")


def closure(roots: list[str]) -> set[str]:
    """The installed distributions ``roots`` need, recursively: markers evaluated, extras followed.

    Extras matter: PyPI's CUDA build of torch asks for ``cuda-toolkit[cublas,cudart,...]``, and only those
    extras bring in the NVIDIA libraries, which a Colab runtime has preinstalled beside its torch.
    """
    seen: set[tuple[str, str]] = set()
    todo = [(name, "") for name in roots]
    while todo:
        name, extra = todo.pop()
        name = canonicalize_name(name)
        if (name, extra) in seen:
            continue
        requires = installed(name).requires or []
        seen.add((name, extra))
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                todo.append((requirement.name, ""))
                todo += [(requirement.name, wanted) for wanted in requirement.extras]
    return {name for name, _ in seen}


def site_entries(distributions: set[str]) -> set[str]:
    """The top-level names in site-packages that belong to these distributions (packages, modules, dist-info)."""
    entries: set[str] = set()
    for name in distributions:
        for file in metadata.distribution(name).files or []:
            top = file.parts[0]
            if top not in ("..", "__pycache__"):
                entries.add(top)
    return entries


def main(roots: list[str]) -> None:
    torch = installed("torch")
    print(json.dumps({
        "python": platform.python_version(),
        "site": sysconfig.get_paths()["purelib"],
        "torch": torch.version,
        "torch_folder": str(Path(torch.locate_file("torch"))),
        "entries": sorted(site_entries(closure(roots))),
    }))


if __name__ == "__main__":
    main(sys.argv[1:])
