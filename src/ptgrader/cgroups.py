"""A control group per kernel (Linux, as root): one memory and process limit for everything it starts.

rlimits are per process: a kernel's address space is limited, but a kernel that forks a hundred
children could still take a hundred times that. A cgroup counts the whole tree. When the grader is
root and the machine's cgroups allow it, every kernel gets one, with ``memory`` (RAM, no swap) and
``pids`` limits, and is moved into it by its keeper before it drops its privileges (so it cannot
leave). Where no cgroup can be made (no root, or a hierarchy that does not allow it), the rlimits
still hold and the grading report says which limits applied.

Where the ``cpu`` controller is there too, each kernel's group also gets the same CPU weight as every
other's (the default one): kernels graded side by side share the cores group by group, not thread by
thread, so a kernel that starts a hundred busy threads gets no more of them than one that starts one.

- cgroup v2 (one hierarchy, the usual one today): the groups live under ``<cgroup2>/ptgrader/``,
  whose ``subtree_control`` enables ``memory`` and ``pids`` (and ``cpu``);
- cgroup v1 (separate ``memory`` and ``pids`` hierarchies, and ``cpu``): under the grader's own group
  in each, so the limits of whatever runs the grader still apply above them.

A group is removed after its kernel died; one left by a killed grader is removed by the next one.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX = "ptgrader-"


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, filesystem type, options) of every cgroup filesystem."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4], tail[0], set(tail[2].split(","))))
    return found


def _own_group(controller: str) -> str:
    """This process's group in the v1 hierarchy of ``controller`` ("" if none)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return ""


@dataclass(frozen=True)
class Hierarchy:
    """Where kernels' groups are made, and the names of the limit files there."""

    version: int
    parents: tuple[str, ...]  # v2: one folder; v1: the memory folder, the pids folder and the cpu one, if any
    cpu: bool = False  # whether the kernels share the cores group by group

    @classmethod
    def find(cls) -> Hierarchy | None:
        """The hierarchy this machine lets root make kernel groups in, or None."""
        if os.geteuid() != 0:
            return None
        mounts = _mounts()
        for point, kind, _ in mounts:
            if kind == "cgroup2":
                try:
                    controllers = set((Path(point) / "cgroup.controllers").read_text().split())
                except OSError:
                    continue
                if {"memory", "pids"} <= controllers:
                    return cls(2, (str(Path(point) / "ptgrader"),), cpu="cpu" in controllers)
        v1 = {}
        for point, kind, options in mounts:
            for controller in ("memory", "pids", "cpu"):
                if kind == "cgroup" and controller in options:
                    v1.setdefault(controller, point + _own_group(controller))
        if {"memory", "pids"} <= set(v1):
            cpu = v1.get("cpu")
            return cls(1, (v1["memory"], v1["pids"], *([cpu] if cpu else [])), cpu=cpu is not None)
        return None

    def prepare(self) -> Hierarchy:
        """Make the hierarchy ready for kernel groups; return it, without the cpu controller where that one
        cannot be used here (memory and pids still are: an OSError about them is raised)."""
        if self.version == 2:
            parent = Path(self.parents[0])
            parent.mkdir(exist_ok=True)
            (parent / "cgroup.subtree_control").write_text("+memory +pids")
        if not self.cpu:
            return self
        try:
            if self.version == 2:
                (Path(self.parents[0]) / "cgroup.subtree_control").write_text("+cpu")
            elif not os.access(self.parents[2], os.W_OK):
                raise PermissionError(self.parents[2])
        except OSError:  # a container's read-only cpu hierarchy, a controller in use elsewhere: equal threads then
            return Hierarchy(self.version, self.parents[:1] if self.version == 2 else self.parents[:2])
        return self

    def make(self, name: str, memory_bytes: int, processes: int) -> list[str]:
        """Create the kernel's group(s) with their limits; return their folders."""
        folders = [str(Path(parent) / name) for parent in self.parents]
        for folder in folders:
            os.mkdir(folder, 0o700)
        if self.version == 2:
            group = Path(folders[0])
            (group / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):  # no swap accounting: nothing to limit
                (group / "memory.swap.max").write_text("0")
            (group / "pids.max").write_text(str(processes))
        else:  # a cpu folder, the third, keeps its default weight: the same as every other kernel's
            memory, pids = (Path(folder) for folder in folders[:2])
            (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):
                (memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            (pids / "pids.max").write_text(str(processes))
        return folders

    def describe(self) -> str:
        return f"cgroup v{self.version}"

    def remove_stale(self) -> None:
        """Remove the empty groups of graders that are gone (named ptgrader-<grader pid>-...)."""
        for parent in self.parents:
            for group in Path(parent).glob(PREFIX + "*") if Path(parent).is_dir() else []:
                try:
                    owner = int(group.name.split("-")[1])
                except (IndexError, ValueError):
                    continue
                if not Path(f"/proc/{owner}").exists():
                    with contextlib.suppress(OSError):
                        group.rmdir()


def join(folders: list[str]) -> None:
    """Move the calling process into the groups (done by the kernel itself, while still privileged)."""
    for folder in folders:
        Path(folder, "cgroup.procs").write_text("0")


def remove(folders: list[str], wait_s: float = 5.0) -> bool:
    """Remove a kernel's groups once its processes are gone; False if one could not be removed."""
    deadline = time.monotonic() + wait_s
    left = list(folders)
    while left:
        for folder in list(left):
            try:
                os.rmdir(folder)
                left.remove(folder)
            except FileNotFoundError:
                left.remove(folder)
            except OSError:
                pass
        if left and time.monotonic() > deadline:
            return False
        if left:
            time.sleep(0.02)
    return True
