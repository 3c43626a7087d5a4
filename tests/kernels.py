"""The CPU kernels the validation runs with: never the ones `make refresh` used.

`make refresh` executes notebooks natively (the machine's best vector ISA, all its threads). The
validation then runs every notebook with *other* kernels: on an AVX-512 machine ATen, MKL and
oneDNN are held to AVX2; on an AVX2 machine ATen falls back to its portable `default` kernels;
and every BLAS and OpenMP pool gets one thread. A committed output that depends on which kernels
summed the floats (the last bits of a loss, a diverging run, a max error of 3e-08 that is 0 elsewhere)
then fails on the author's own machine, before it fails on a contributor's different CPU.

Its timings are short (``SMOKE_TIMING``): their outputs are never compared.

Usage: `python -m tests.kernels` prints the settings as `NAME=value` words for `env`.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

#: One thread everywhere: a reduction split over threads sums in another order.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
#: Held to AVX2: the ISA one step below AVX-512 (and AMX) for ATen, MKL and oneDNN.
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
#: ATen's portable kernels, for a machine whose best is AVX2 (or anything that is not AVX-512).
PORTABLE = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"}
#: ptlabs' timings in a few milliseconds each (ptlabs.timing's smoke mode): the validation ignores every timing
#: output (``nbval-ignore-output``) and checks that the timing cells run; verdicts are measured by `make
#: refresh` and `make check-timings`, on a quiet machine. Their tenths of a second per measurement were a
#: quarter of the chapters' CPU in `make test`.
SMOKE_TIMING = {"PTLABS_TIMING": "smoke"}


def native_capability() -> str:
    """What ATen picks on this machine when nothing forces it (for example ``AVX512`` or ``AVX2``).

    torch is imported here, not with the module, which every pytest loads (tests/colab_plugin.py).
    """
    import torch

    return torch.backends.cpu.get_cpu_capability()


def validation_env(native: str | None = None) -> dict[str, str]:
    """The environment variables that make the validation's kernels differ from the refresh's.

    Inductor's on-disk cache does not key its compiled C++ on ``ATEN_CPU_CAPABILITY``: a kernel the
    refresh compiled for AVX-512 would be reused (or, under ``default``, fail to build), so the
    validation compiles into a cache of its own, one per setting.
    """
    native = native_capability() if native is None else native
    isa = AVX2 if native.upper().startswith("AVX512") else PORTABLE
    cache = Path(tempfile.gettempdir()) / f"torchinductor-validation-{isa['ATEN_CPU_CAPABILITY']}"
    return {**isa, **ONE_THREAD, **SMOKE_TIMING, "TORCHINDUCTOR_CACHE_DIR": str(cache)}


def describe(env: dict[str, str], native: str | None = None) -> str:
    """One line for the test report: what ran natively, and what the validation forced."""
    native = native_capability() if native is None else native
    forced = " ".join(f"{k}={v}" for k, v in env.items())
    return f"native CPU kernels: {native}; the validation runs with {forced}"


if __name__ == "__main__":
    print(" ".join(f"{key}={value}" for key, value in validation_env().items()))
    sys.exit(0)
