"""Grade a class on every core: ``python -m ptgrader.autograde LAB [--jobs N] [nbgrader options]``.

``nbgrader autograde LAB`` grades one student after the other, and a lab's cells run mostly on one
core. This runs N ordinary ``nbgrader autograde LAB`` commands side by side in the same course,
each on its share of the students (a JSON list in a file, ``--GuardedExporter.share``: never a
comma-joined option, where a folder named ``x,alice`` once took ``alice`` out of every job), with the
same configuration and the same jail for every kernel. Each job has its own warm server
and kernel uid. The jobs write the same gradebook (SQLite serialises their short writes), so each
one watches only the part of the course no other job writes (``GuardedExecute.watch_graded``
off): the kernels, jailed, can reach none of it anyway.

Run it in the course folder (``labs/``), like nbgrader. It exits with the worst exit status of its
jobs. Every line a job prints is prefixed with its number, its control characters escaped. Each job
runs on its own share of the cores (:func:`core_shares`), and unless ``OMP_NUM_THREADS`` is set, its
kernels use as many torch threads as its share has cores: a kernel inherits the share and cannot take
the other cores back (the system call filter refuses ``sched_setaffinity``), so a submission that
starts a hundred busy threads slows only its own job, not the students graded beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from .intake import escaped


def students(course: Path, lab: str) -> list[str]:
    """The students with a submission of ``lab`` in ``course/submitted``."""
    submitted = course / "submitted"
    return sorted(p.name for p in submitted.iterdir() if (p / lab).is_dir()) if submitted.is_dir() else []


def commands(lab: str, everyone: list[str], jobs: int, extra: list[str], folder: Path) -> list[list[str]]:
    """One ``nbgrader autograde`` command per job, each on its share of ``everyone``, written in ``folder``.

    Every student is in exactly one share, whatever the id holds (a comma, a quote, an escape code:
    the job that has it refuses it with a report, or logs it escaped).
    """
    found = []
    for number, share in enumerate((share for share in (everyone[index::jobs] for index in range(jobs)) if share)):
        listing = folder / f"share-{number + 1}.json"
        listing.write_text(json.dumps(share), encoding="utf-8")
        found.append([sys.executable, "-m", "nbgrader", "autograde", lab, "--GuardedExecute.watch_graded=False",
                      f"--GuardedExporter.share={listing}", *extra])
    return found


def relay(stream: Iterable[str], prefix: str, out: TextIO) -> None:
    """Copy a job's lines to ``out`` with ``prefix``, each :func:`~ptgrader.intake.escaped`.

    nbgrader's own log is escaped already (``labs/nbgrader_config.py``); anything else a job prints
    (a warning, a library's message quoting a submission) must not write to the terminal either.
    """
    for line in stream:
        out.write(prefix + escaped(line.rstrip("\n")) + "\n")
        out.flush()


def core_shares(cores: list[int], jobs: int) -> list[list[int]]:
    """Each job's cores: ``cores`` cut into ``jobs`` shares of (nearly) equal size, or one core each, taken in
    turn, when there are more jobs than cores."""
    if jobs >= len(cores):
        return [[cores[index % len(cores)]] for index in range(jobs)]
    size, extra = divmod(len(cores), jobs)
    starts = [index * size + min(index, extra) for index in range(jobs + 1)]
    return [cores[starts[index]:starts[index + 1]] for index in range(jobs)]


@contextlib.contextmanager
def on_cores(cores: list[int]) -> Iterator[None]:
    """Within the block this thread runs on ``cores``, and so does every process it starts (and all that one
    starts: a job's nbgrader, its warm server and its kernels). Linux keeps the affinity per thread, and a child
    inherits its parent thread's: no code has to run in the child between fork and exec."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def kernel_threads(jobs: int) -> int:
    """Torch's threads for each grading kernel when ``jobs`` graders run side by side: their share of the cores.

    The kernels share the cores, and an OpenMP thread waiting for a core spins on one (measured: lab 06 on
    2 cores, 2 jobs, 3.8 s a submission with one thread each, 4.9 s to 6.0 s with two).
    """
    return max(1, len(os.sched_getaffinity(0)) // max(1, jobs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lab", help="the lab's name, e.g. lab01_tensors")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="graders side by side (default: cores)")
    parser.add_argument("--course", type=Path, default=Path("."), help="the course folder (default: here)")
    args, extra = parser.parse_known_args(argv)
    everyone = students(args.course, args.lab)
    if not everyone:
        print(f"no submissions of {args.lab} in {args.course / 'submitted'}", file=sys.stderr)
        return 2
    # nbgrader runs `alembic` from its own environment: put this interpreter's scripts first on PATH.
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    env.setdefault("OMP_NUM_THREADS", str(kernel_threads(args.jobs)))
    with tempfile.TemporaryDirectory(prefix="ptgrader-shares-") as shares:
        processes, relays = [], []
        jobs = commands(args.lab, everyone, max(1, args.jobs), extra, Path(shares))
        cores = core_shares(sorted(os.sched_getaffinity(0)), len(jobs))
        for number, (command, share) in enumerate(zip(jobs, cores, strict=True), start=1):
            with on_cores(share):
                process = subprocess.Popen(command, cwd=args.course, env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True)
            relaying = threading.Thread(target=relay, args=(process.stdout, f"[{number}] ", sys.stdout), daemon=True)
            relaying.start()
            processes.append(process)
            relays.append(relaying)
        codes = [process.wait() for process in processes]
        for relaying in relays:
            relaying.join()
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
