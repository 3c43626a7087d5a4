"""`make test-gpu` starts here: where there is no CUDA, stop at once with one line that says why.

Without this, `pytest --nbval-lax` on a CPU machine passes (every GPU experiment is guarded and
prints its CPU fallback), so a GPU check run in the wrong place would look green while testing
nothing.

Run as `python -m tests.require_cuda`: exit 0 when CUDA is available, otherwise exit 1 with the
reason on stderr.
"""

from __future__ import annotations

import sys

import torch


def cuda_problem() -> str | None:
    """The one-line reason `make test-gpu` cannot run here, or None when a CUDA device is usable."""
    if torch.cuda.is_available():
        return None
    built = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    return (
        "make test-gpu: CUDA is not available on this machine "
        f"(torch {torch.__version__}, {built}); "
        "run it on the GPU runner (see README, Continuous integration)"
    )


def main() -> int:
    """Print the reason and return 1 when CUDA is missing; return 0 otherwise."""
    problem = cuda_problem()
    if problem is None:
        return 0
    print(problem, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
