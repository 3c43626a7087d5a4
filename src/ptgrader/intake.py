"""The submission folder, checked before nbgrader opens anything in it.

nbgrader reads whatever ``submitted/<student>/<lab>/`` holds: it follows symbolic links, opens FIFOs
and devices, copies every other file into ``autograded/``, and logs each name as it is. So a
submission that is a link to the lab's source notebook was graded as the reference solution (12/12),
one linked to ``/dev/stdin`` (or a FIFO) blocked the whole run on a read that never ends, and a name
holding terminal escape codes cleared the instructor's terminal and printed a fake log line.

:func:`problems` says why a folder cannot be graded: anything but regular files and plain folders,
a name outside :data:`SAFE_NAME`, too many entries or bytes, a ``timestamp.txt`` nbgrader cannot read. It only
looks (``lstat``, never ``open``, except a regular ``timestamp.txt`` of at most a few bytes), and every
name it reports is :func:`escaped`, as is every line nbgrader logs (:class:`EscapingLogFormatter`).
:mod:`ptgrader.failsafe` refuses such a submission before nbgrader sees it: no marks, and a report
that says why.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from pathlib import Path
from typing import Any

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import parse_utc
from tornado.log import LogFormatter

from .jail import escaped

#: Names nbgrader may see: letters, digits, ``.``, ``_`` and ``-`` (no space, no control character).
SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")
#: More entries than this in one submission is not a lab handed in (and would make the walk slow).
MAX_ENTRIES = 1000
#: Folders nested deeper than this are not a lab handed in; a thousand levels would exhaust the recursion
#: of Python 3.11's ``os.walk`` (and of every later tool that walks the folder).
MAX_DEPTH = 8
#: The largest file, and all files together, a submission may hold. nbgrader reads a notebook whole before
#: any step of the grader runs, at about 48 times its size in memory (a red team's 145 MiB notebook took
#: the grader to 7 GiB and 179 s of CPU); a lab notebook with its outputs is well under 2 MiB.
MAX_FILE_BYTES = 10 << 20
MAX_SUBMISSION_BYTES = 20 << 20
#: nbgrader's ``timestamp.txt`` holds one date; a larger file is not one.
MAX_TIMESTAMP_BYTES = 256
TIMESTAMP = "timestamp.txt"

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class EscapingLogFormatter(LogFormatter):
    """nbgrader's log format, with every message and traceback :func:`escaped`.

    nbgrader logs names and messages that come from submissions before any check can run (the folders
    its glob did not match, for one); ``labs/nbgrader_config.py`` makes this the console's formatter
    (``c.Application.logging_config``), so no log line can move the cursor or clear the terminal.
    The colours nbgrader adds itself are left alone.
    """

    def format(self, record: logging.LogRecord) -> str:
        message = escaped(record.getMessage())
        return super().format(logging.makeLogRecord({**record.__dict__, "msg": message, "args": None}))

    def formatException(self, ei: Any) -> str:  # noqa: N802  (logging's name)
        return escaped(super().formatException(ei))


def is_safe_name(name: str) -> bool:
    """Whether nbgrader may see and log ``name`` as it is."""
    return bool(SAFE_NAME.fullmatch(name)) and name not in (".", "..")


def _kind(mode: int) -> str:
    """What a non-regular entry is, in words."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def _entry_problem(path: Path, label: str, *, folder: bool) -> str | None:
    """Why one entry is refused (None when it is a plain folder or regular file, as expected)."""
    if not is_safe_name(path.name):
        return f"{escaped(label)}: a name outside letters, digits and ._- (shown escaped)"
    mode = os.lstat(path).st_mode
    if folder and not stat.S_ISDIR(mode):
        return f"{label}: {_kind(mode) if not stat.S_ISREG(mode) else 'a file'}, not a folder"
    if not folder and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return f"{label}: {_kind(mode)}, not a regular file"
    if stat.S_ISREG(mode) and os.lstat(path).st_nlink > 1:  # another name of a file elsewhere (the lab's source?)
        return f"{label}: a hard link (one of {os.lstat(path).st_nlink} names of the same file)"
    if stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID):  # nbgrader's copy (as root) would keep the bit
        return f"{label}: a file with the set-user-ID or set-group-ID bit"
    if not os.access(path, os.R_OK | (os.X_OK if stat.S_ISDIR(mode) else 0), follow_symlinks=False):
        # nbgrader's copy stops at it half-way, after copying what came before (round 11)
        return f"{label}: {'a folder' if stat.S_ISDIR(mode) else 'a file'} the grader cannot read"
    return None


def _timestamp_problem(path: Path) -> str | None:
    """Why nbgrader could not read the submission's timestamp (None when it can, or there is none)."""
    if not path.is_file() or path.is_symlink():
        return None  # absent, or already refused as an entry
    if path.stat().st_size > MAX_TIMESTAMP_BYTES:
        return f"{TIMESTAMP}: larger than {MAX_TIMESTAMP_BYTES} bytes"
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    try:
        parse_utc(text)
    except (ValueError, OverflowError, TypeError, LookupError):
        return f"{TIMESTAMP}: not a date nbgrader can read ({escaped(text[:40])})"
    return None


def problems(submission: Path) -> list[str]:
    """Why ``submitted/<student>/<lab>`` cannot be graded, each entry named escaped; [] when it can.

    The student's folder and the lab's folder must be plain folders (a link to ``source/<lab>`` would
    hand nbgrader the solution); every entry below must be a regular file or a plain folder with a
    safe name, at most :data:`MAX_DEPTH` levels down.
    """
    found = [
        problem
        for path, label in ((submission.parent, f"the student folder {submission.parent.name}"),
                            (submission, f"the lab folder {submission.name}"))
        if (problem := _entry_problem(path, label, folder=True))
    ]
    if found:
        return found
    count = total = 0
    for directory, folders, files in os.walk(submission):  # os.walk follows no links to folders
        if folders and len(Path(directory).relative_to(submission).parts) >= MAX_DEPTH:
            return [f"folders nested more than {MAX_DEPTH} levels deep"]
        for name in sorted(folders) + sorted(files):
            count += 1
            path = Path(directory) / name
            relative = str(path.relative_to(submission))
            if problem := _entry_problem(path, relative, folder=False):
                found.append(problem)
            elif name in files:
                size = os.lstat(path).st_size
                total += size
                if size > MAX_FILE_BYTES:
                    found.append(f"{relative}: {size:,} bytes, more than the {MAX_FILE_BYTES >> 20} MiB a file may have")
        if total > MAX_SUBMISSION_BYTES:
            return [f"more than {MAX_SUBMISSION_BYTES >> 20} MiB of files"]
        if count > MAX_ENTRIES:
            return [f"more than {MAX_ENTRIES} files and folders"]
        folders[:] = [name for name in folders if is_safe_name(name) and not (Path(directory) / name).is_symlink()]
    if not found and (problem := _timestamp_problem(submission / TIMESTAMP)):
        found.append(problem)
    return found


def drop_files_not_of_the_lab(graded: Path, source: Path, also_kept: tuple[str, ...] = ()) -> list[str]:
    """Remove from ``graded`` (``autograded/<student>/<lab>/``) every file the lab's ``source`` folder does not
    have, and every folder left empty; return their paths, relative and escaped.

    Why: nbgrader copies every file of a submission into ``autograded/``, and from there into the student's
    feedback, and the formgrader serves them from the instructor's own Jupyter server: a ``figure.html``
    handed in beside the notebook, opened from a link in a Markdown cell, ran its script as the instructor
    (round 10); a folder named like the feedback page stopped ``generate_feedback``. What is graded is the
    lab's notebooks, which nbgrader writes later, and the lab's own files, copied over from ``source``;
    nothing else a submission holds is read by anything the grader runs. nbgrader's ``timestamp.txt`` stays
    (:func:`problems` has checked it), and so do the names in ``also_kept`` (the grader's report).
    """
    kept = {path.relative_to(source) for path in source.rglob("*") if path.is_file()}
    kept |= {Path(TIMESTAMP), *map(Path, also_kept)}
    dropped = []
    for path in sorted(graded.rglob("*"), reverse=True):  # what a folder holds before the folder
        relative = path.relative_to(graded)
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()):
                path.rmdir()
        elif relative not in kept:
            path.unlink()
            dropped.append(escaped(str(relative)))
    return sorted(dropped)


#: More cells than this in one notebook is not a lab handed in: a lab has under a hundred, and the grader's and
#: the pages' work per cell (about 5 ms of CPU) is not bounded by the kernel's time limit (round 24: 20,000
#: cells of ``pass`` took 98 s of the grader's CPU and 50 s of ``generate_feedback``).
MAX_CELLS = 1000


class TooManyCells(ValueError):
    """A notebook with more than :data:`MAX_CELLS` cells: the failsafe gives it no marks, and this reason."""


class CellCountCheck(NbGraderPreprocessor):
    """Refuse a notebook of more than :data:`MAX_CELLS` cells before any step reads them one by one."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        if len(nb.cells) > MAX_CELLS:
            raise TooManyCells(f"{len(nb.cells):,} cells, more than the {MAX_CELLS:,} a submission may have")
        return nb, resources
