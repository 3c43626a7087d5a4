"""Work that torch and onnxscript redo on every call, done once in the warm server instead (or not at all).

Every grading kernel is forked from the warm server (:mod:`ptgrader.warm`), so what the server computes
before its first fork, every kernel has for free. Three costs of the labs' checks are such work, and no
result a notebook computes or prints depends on any:

- **dynamo's guard latency profile**: after each graph ``torch.compile`` makes, dynamo times its guards
  once, for a debug log line and a compile metric, after flushing the CPU's caches: 30 ms of CPU a graph
  on the 2-core machine, 0.6 s of a lab 05 submission's 4.6 s (its checks make about 35 graphs). The
  kernels skip it (``torch._dynamo.guards.profile_guard_manager`` answers 0 µs);
- **the ONNX exporter's list of torchlib functions**: each ``torch.onnx.export`` asks onnxscript for it,
  and onnxscript parses the source of all of its 557 functions again to build it: 0.4 s of CPU an
  export (lab 06 exports once per submission). The server builds it once, and every later call returns
  that list (its items are frozen dataclasses of functions the registry already holds).

- **the call stacks of lazy seeding**: ``torch.manual_seed`` seeds the CUDA, XPU and MTIA generators too,
  and before such a device starts, torch queues each seeding with the formatted call stack
  (``traceback.format_stack()``), for an error message should the device's start fail. A kernel's stack
  is deep (ipykernel, the cell, the checks): 0.37 ms a seed, 22% of lab 02's checks' CPU. No kernel can
  start such a device (the jail's ``/dev`` holds none), so the stack could never be shown: the kernels
  queue the seeding with an empty one (``seed_without_call_stacks``).

All are found by name, as torch 2.13 and onnxscript 0.7 have them; where a name is missing (another
version), that one is left as it is, and grading is only slower.
"""

from __future__ import annotations

import functools
import importlib
import sys
import traceback
import types


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


#: The device modules whose lazy seeding queues a call stack: each formats it with ``traceback.format_stack``.
LAZY_SEEDING = ("torch.cuda", "torch.xpu", "torch.mtia")


def seed_without_call_stacks() -> None:
    """The lazy seeding of the devices a kernel cannot start queues no call stack (of the modules imported)."""
    no_stack = types.SimpleNamespace(format_stack=lambda: [])
    for name in LAZY_SEEDING:
        module = sys.modules.get(name)
        if getattr(module, "traceback", None) is traceback:  # the module's only use of it is the queued stack
            module.traceback = no_stack


def apply() -> None:
    """All three, in the server, after its modules are imported and before it forks a kernel."""
    skip_guard_latency_profile()
    remember_torchlib_ops()
    seed_without_call_stacks()
