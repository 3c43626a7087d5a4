"""Work that torch and onnxscript redo on every call, done once in the warm server instead.

Every grading kernel is forked from the warm server (:mod:`ptgrader.warm`), so what the server computes
before its first fork, every kernel has for free. Two costs of the labs' checks are such work, and no
result a notebook computes or prints depends on either:

- **dynamo's guard latency profile**: after each graph ``torch.compile`` makes, dynamo times its guards
  once, for a debug log line and a compile metric, after flushing the CPU's caches: 30 ms of CPU a graph
  on the 2-core machine, 0.6 s of a lab 05 submission's 4.6 s (its checks make about 35 graphs). The
  kernels skip it (``torch._dynamo.guards.profile_guard_manager`` answers 0 µs);
- **the ONNX exporter's list of torchlib functions**: each ``torch.onnx.export`` asks onnxscript for it,
  and onnxscript parses the source of all of its 557 functions again to build it: 0.4 s of CPU an
  export (lab 06 exports once per submission). The server builds it once, and every later call returns
  that list (its items are frozen dataclasses of functions the registry already holds).

Both are found by name, as torch 2.13 and onnxscript 0.7 have them; where a name is missing (another
version), that one is left as it is, and grading is only slower.
"""

from __future__ import annotations

import functools
import importlib
import sys


def skip_guard_latency_profile() -> None:
    """Dynamo's guard latency profile answers 0 without timing anything (when dynamo is imported)."""
    guards = sys.modules.get("torch._dynamo.guards")
    if guards is not None and hasattr(guards, "profile_guard_manager"):
        guards.profile_guard_manager = lambda *args: 0.0


def remember_torchlib_ops() -> None:
    """onnxscript's list of torchlib functions is built now, once, and every later call returns it
    (when the server imported torch's exporter and onnxscript: the labs that export preload both)."""
    lazy = sys.modules.get("torch.onnx._internal._lazy_import")
    name = getattr(getattr(lazy, "onnxscript_apis", None), "_name", None)  # the onnxscript API torch asks
    if "onnxscript" not in sys.modules or not isinstance(name, str):
        return
    apis = importlib.import_module(name)
    if callable(getattr(apis, "get_torchlib_ops", None)):
        remembered = functools.cache(apis.get_torchlib_ops)
        remembered()
        apis.get_torchlib_ops = remembered


def apply() -> None:
    """Both, in the server, after its modules are imported and before it forks a kernel."""
    skip_guard_latency_profile()
    remember_torchlib_ops()
