"""A record of the course taken before a kernel runs, compared (and put back) after it stopped.

The jail (:mod:`ptgrader.jail`) keeps the course out of a kernel's sight, so nothing a student's
code does can change it. The record is the check that this holds, and a repair if it ever did not:

- the files grading trusts and can put back are recorded as bytes: the gradebook (with any journal
  SQLite would replay), nbgrader's configuration files and the ``source/`` and ``release/``
  notebooks (the packages kernels import are read-only in the jail, so they need no record);
- the class's own folders (``submitted/``, ``autograded/``, ``feedback/``), which grow with every
  student, are recorded by their status (size, inode, modification and change times), so a record
  costs milliseconds for a class of hundreds: a change there is found and reported, not undone.
  Each student's folder in them is walked for at most :data:`ENTRIES_PER_STUDENT` entries; past
  that it is recorded by its own status alone. A refused submission of 200,000 empty files had
  cost every other student's grading 7 s (3.5 s a record, two records a student); a record of
  that course now takes 10 to 15 ms.

Other files in the course root are the instructor's (a log redirected there, ``grades.csv``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatch
from itertools import islice
from pathlib import Path

RESTORABLE_FOLDERS = ("source", "release")
WATCHED_FOLDERS = ("submitted", "autograded", "feedback")
WATCHED_ROOT_FILES = ("gradebook.db*", "nbgrader_config.*")
#: What graders grading side by side in one course write for their own students (ptgrader.autograde).
SHARED_FOLDERS = ("autograded",)
#: The most entries recorded one by one under a student's folder of a watched folder: twice what one
#: submission may hold (``ptgrader.intake.MAX_ENTRIES``); a class's folders hold a few each.
ENTRIES_PER_STUDENT = 2000


def _status(path: Path) -> bytes:
    """What changes when anything writes a file (ctime cannot be set back by the writer)."""
    info = path.lstat()
    return f"stat:{info.st_size}:{info.st_ino}:{info.st_mode}:{info.st_mtime_ns}:{info.st_ctime_ns}".encode()


def _read(path: Path) -> bytes:
    if path.is_symlink():
        return b"symlink:" + os.readlink(path).encode()
    try:
        return path.read_bytes()
    except OSError:  # unreadable (removed while we walk, a socket, ...): still a change to report
        return b"unreadable"


def _walk(root: Path) -> Iterator[Path]:
    """Every entry below ``root`` that is not a folder (a link to one included), links not followed.

    Without recursion: a submission nested a thousand folders deep exhausted the recursion of Python
    3.11's ``os.walk`` here, before every student's run, and left the whole class unprocessed. Lazy,
    folder by folder, so that a caller who stops early reads no more of a large folder.
    """
    pending = [root]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    if not entry.is_dir(follow_symlinks=False):
                        yield Path(entry.path)
                    elif entry.name != "__pycache__":
                        pending.append(Path(entry.path))
        except OSError:  # removed or unreadable while we walk
            continue


def _watched(folder: Path) -> Iterator[tuple[Path, bytes]]:
    """The status of every entry below a class's folder, each student's folder walked for at most
    :data:`ENTRIES_PER_STUDENT` entries: past that, the student's folder stands for all it holds."""
    try:
        students = [Path(entry.path) for entry in os.scandir(folder)]
    except OSError:  # removed or unreadable
        return
    for student in students:
        if student.is_symlink() or not student.is_dir():
            yield student, _status(student)
            continue
        entries = list(islice(_walk(student), ENTRIES_PER_STUDENT + 1))
        if len(entries) > ENTRIES_PER_STUDENT:
            yield student, _status(student) + b":and more entries than recorded one by one"  # stat: not restorable
            continue
        for path in entries:
            try:
                yield path, _status(path)
            except OSError:  # removed while we walk: absent from the record, as it is from the folder
                continue


@dataclass
class CourseRecord:
    """Files of the course (paths relative to its root) and of extra folders (absolute paths)."""

    root: Path
    extra_roots: tuple[Path, ...] = ()
    files: dict[str, bytes] = field(default_factory=dict)
    shared: bool = False  # other graders write the gradebook and autograded/ meanwhile: leave those out

    @classmethod
    def take(cls, root: Path, *extra_roots: Path, shared: bool = False) -> CourseRecord:
        record = cls(root, extra_roots, shared=shared)
        record.files = record._read()
        return record

    def _read(self) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for entry in sorted(self.root.iterdir()) if self.root.is_dir() else []:
            if self.shared and (entry.name in SHARED_FOLDERS or entry.name.startswith("gradebook.db")):
                continue
            if entry.is_dir() and not entry.is_symlink() and entry.name in RESTORABLE_FOLDERS:
                for path in _walk(entry):
                    files[str(path.relative_to(self.root))] = _read(path)
            elif entry.is_dir() and not entry.is_symlink() and entry.name in WATCHED_FOLDERS:
                for path, status in _watched(entry):
                    files[str(path.relative_to(self.root))] = status
            elif any(fnmatch(entry.name, pattern) for pattern in WATCHED_ROOT_FILES):
                files[entry.name] = _read(entry)
        for extra in self.extra_roots:
            for path in _walk(extra):
                files[str(path)] = _read(path)
        return files

    def changes(self) -> list[str]:
        """Paths created, modified or deleted since the record was taken."""
        now = self._read()
        changed = {path for path in self.files.keys() & now.keys() if self.files[path] != now[path]}
        return sorted(changed | (self.files.keys() ^ now.keys()))

    def restore(self, paths: Iterable[str]) -> list[str]:
        """Put back the recorded bytes of ``paths``; remove the ones that did not exist.

        Returns the paths it could not put back: those recorded by their status only.
        """
        lost = []
        for relative in paths:
            target = self.root / relative  # an absolute path (an extra folder) stays as it is
            recorded = self.files.get(relative)
            if recorded is not None and recorded.startswith(b"stat:"):
                lost.append(relative)
                continue
            if recorded is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.is_symlink() or target.is_dir():
                    _remove(target)
                target.write_bytes(recorded)
            elif target.exists() or target.is_symlink():
                _remove(target)
        return lost


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
