"""Keep a submission's code away from the course: a kernel folder of its own, a record, a reaper.

A grading kernel runs as the instructor's user, so the operating system lets it write wherever
the instructor can. Without a container we cannot forbid that, so we make it not pay:

- the kernel starts in a temporary folder outside the course, with a temporary home and IPython
  folder, so that relative paths do not lead to the gradebook and nothing it writes there (an
  IPython startup script, a config file) reaches the next student's kernel;
- :class:`CourseRecord` records the files of the course that grading trusts before the kernel starts, and after it
  stopped puts back whatever changed (the gradebook first of all) and reports it, so the
  submission's grades can be refused;
- :func:`reap` ends every process the kernel left behind, found by a marker in its environment
  and, on Linux, by the child-subreaper flag that makes orphans our children instead of init's,
  before anything is compared or graded (a detached process must not write the gradebook while
  the next student is graded).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

#: What of the course folder the record watches: the folders nbgrader keeps, the gradebook (with any
#: journal SQLite would replay) and nbgrader's configuration files, which a later run would load. Other
#: files in the course root are the instructor's (a log redirected there while grading, grades.csv).
WATCHED_FOLDERS = ("source", "release", "submitted", "autograded", "feedback")
WATCHED_ROOT_FILES = ("gradebook.db*", "nbgrader_config.*")

_PR_SET_CHILD_SUBREAPER = 36


@dataclass
class CourseRecord:
    """Every file under some folders (the course first), as bytes, so that changes can be found and undone."""

    root: Path
    extra_roots: tuple[Path, ...] = ()
    files: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def take(cls, root: Path, *extra_roots: Path) -> CourseRecord:
        record = cls(root, extra_roots)
        record.files = record._read()
        return record

    def _read(self) -> dict[str, bytes]:
        """Paths relative to the course root (absolute for the extra folders) -> contents."""
        files = {
            relative: data
            for relative, data in _read_tree(self.root)
            if relative.split(os.sep)[0] in WATCHED_FOLDERS
            or (os.sep not in relative and any(fnmatch(relative, pattern) for pattern in WATCHED_ROOT_FILES))
        }
        for extra in self.extra_roots:
            files.update({str(extra / relative): data for relative, data in _read_tree(extra) if "__pycache__" not in relative})
        return files

    def changes(self) -> list[str]:
        """Paths created, modified or deleted since the record was taken."""
        now = self._read()
        changed = {path for path in self.files.keys() & now.keys() if self.files[path] != now[path]}
        return sorted(changed | (self.files.keys() ^ now.keys()))

    def restore(self, paths: Iterable[str]) -> None:
        """Put the recorded version of ``paths`` back; remove the ones that did not exist."""
        for relative in paths:
            target = self.root / relative  # an absolute path (an extra folder) stays as it is
            if relative in self.files:
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.is_symlink() or target.is_dir():
                    _remove(target)
                target.write_bytes(self.files[relative])
            elif target.exists() or target.is_symlink():
                _remove(target)


def _read_tree(root: Path) -> Iterable[tuple[str, bytes]]:
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs.sort()
        for name in names:
            path = Path(folder) / name
            relative = str(path.relative_to(root))
            if path.is_symlink():
                yield relative, b"symlink:" + os.readlink(path).encode()
                continue
            try:
                yield relative, path.read_bytes()
            except OSError:  # unreadable (removed while we walk, a socket, ...): still a change to report
                yield relative, b"unreadable"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


@dataclass
class KernelPlace:
    """A private working folder and environment for one grading kernel."""

    folder: Path
    marker: str
    env: dict[str, str]

    @classmethod
    def make(cls, base_env: dict[str, str]) -> KernelPlace:
        folder = Path(tempfile.mkdtemp(prefix="ptlabs-kernel-"))
        marker = uuid.uuid4().hex
        home = folder / "home"
        home.mkdir()
        env = {
            key: value
            for key, value in base_env.items()
            if not key.startswith(("JPY_", "JUPYTERHUB_", "NBGRADER_DB", "PTLABS_GRADER_"))
        }
        env.update(
            HOME=str(home),
            IPYTHONDIR=str(home / ".ipython"),
            MPLCONFIGDIR=str(home / ".matplotlib"),
            PYTHONNOUSERSITE="1",
            PTLABS_GRADING_KERNEL=marker,
            NBGRADER_EXECUTION="autograde",
        )
        env.pop("PYTHONSTARTUP", None)
        return cls(folder / "work", marker, env)

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    @property
    def sockets(self) -> Path:
        """Where the kernel's Unix sockets go (``<sockets>-<n>``): beside its folder, short enough for a socket path."""
        return self.folder.parent / "ipc"

    def remove(self) -> None:
        _remove(self.folder.parent)


def become_subreaper() -> bool:
    """Ask Linux to re-parent orphaned descendants to this process (False where unsupported)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.add(int(entry.name))
    return found


def _has_marker(pid: int, marker: str) -> bool:
    try:
        return f"PTLABS_GRADING_KERNEL={marker}".encode() in (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return False


def kill_until_gone(find: Callable[[], set[int]], settle: Callable[[], None]) -> set[int]:
    """SIGKILL what ``find()`` returns, let ``settle()`` wait for the dead, and repeat until it finds none.

    Repeat, because killing a parent re-parents its children (to us, or to the warm server, as
    subreaper), and they must go too. Returns every pid it killed.
    """
    killed: set[int] = set()
    for _ in range(50):
        victims = find() - {os.getpid()}
        if not victims:
            break
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
        settle()
    return killed


def _wait_for_dead_children() -> None:
    for pid in _children_of(os.getpid()):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def reap(marker: str, children_before: set[int]) -> list[int]:
    """Kill what a kernel left behind; return the pids killed.

    Two ways to find them, because either alone can be escaped: the marker in the environment
    (a process that clears its environment loses it) and new children of this process (orphans
    re-parented to us as subreaper; a process that never orphans itself keeps its marker).
    """
    if not Path("/proc").is_dir():
        return []

    def left_behind() -> set[int]:
        victims = {pid for pid in _children_of(os.getpid()) if pid not in children_before}
        return victims | {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _has_marker(int(p.name), marker)}

    return sorted(kill_until_gone(left_behind, _wait_for_dead_children))


def current_children() -> set[int]:
    """This process's children now (taken before a kernel starts, to tell orphans apart later)."""
    return _children_of(os.getpid()) if Path("/proc").is_dir() else set()
