"""One contract harness for every function-style lab part: what a call must leave as it found it.

A part's numbers can be right while its function breaks a promise the text makes: it changes the
caller's tensor in place, returns the caller's own list, returns a tuple where a list was asked
for, leaves gradients switched off, draws from the global random generator, or keeps state
between calls. Checking each promise by hand in each part left gaps. :func:`call` runs the
student's function three times on the same inputs and sends what it saw as one output, compared
outside the kernel with what the reference solution's run saw on the same inputs: the
reference is the specification, so no part needs to restate its contract in code.

What :func:`call` observes (the keys of the output it sends):

- ``returns``: the exact types of the result, all the way down (a tuple is not a list, an int
  neither a float nor a bool, a tensor's dtype and device type included, and whether it requires
  grad or is an inference tensor, which later code cannot save for backward or change in place);
- ``inputs changed``: which arguments differ after the first call or the second, in values (``nan`` equal to
  ``nan``), version counter, ``requires_grad``, gradient, shape, strides or storage offset; for a
  module, which of its parts: ``parameters``, ``buffers`` (non-persistent ones too), ``training
  flags``, ``hooks`` and plain ``attributes`` (a statistic stored on ``self`` is state kept
  between calls; recorded by value all the way down, on the module, its class and its tensors: :class:`_Recorder`), as ``argument 0 (training flags)``, and the parameters' ``gradients`` apart from their
  values;
  for a list or dict, its items; and, as outputs of their own (``<label>: arguments afterwards``, with one
  tensor of each dtype's values), what each argument it names holds after the last call (:func:`_settled`), so
  that how an argument changed is compared with the reference's too, not only whether;
- ``aliases``: which arguments the result shares memory with, or *is* (a view, even of a storage of no bytes, or
  the caller's own list);
- ``state kept by the function``: whether a later call changed what the function holds (its closure, defaults and
  the globals it names, :class:`_Recorder`), or a first call grew it in any case after the function's first one
  (a memo of results keyed by the inputs);
- ``state grows at each call``: whether it held more after the third call than after the first, in values or in
  characters, bytes and tensor elements (an object that keeps its last result changes what it holds at each call,
  one that keeps every result also grows, in a list or in one tensor it concatenates to);
- ``second call``: whether calling again on the same inputs gives the same result (up to the
  rounding of float sums, which the other thread count may reorder), and not an earlier call's object. The second
  call comes from an unusual caller: grad mode off (unless the part computes gradients),
  deterministic algorithms on (warning only) and another number of threads, so that a function
  which sets a mode back to its *default* instead of to what it found is seen; a third call comes from the usual
  caller again, so that what a function does only for one kind of caller is seen too (every check below covers
  all three calls);
- ``modes changed``: grad and inference mode, autocast state and dtype, the default dtype and device,
  deterministic algorithms and the number of threads, every other process-wide setting torch offers
  (:data:`_QUIET`) and the modes, hooks and stacks a call could leave entered (:func:`_stacks`), compared
  before and after each call;
- ``global RNG drawn``: whether the global generator moved (a part that takes a generator, or
  none at all, must not draw from it); with ``draws_watched=True``, also ``drew from the global generator``:
  whether any random operation drew from it, even where the function put its state back;
- ``after an interrupt`` (with ``interrupt=``): which modes, ``training`` flags, hooks and
  ``requires_grad`` flags stay changed when a module inside the call raises ``KeyboardInterrupt``,
  and then another ``BaseException`` (neither an ``Exception`` nor a ``KeyboardInterrupt``), and
  whether each reached the caller.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import copy
import dis
import functools
import gc
import hashlib
import operator
import os
import struct
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch
from torch.utils._config_module import _UNSET_SENTINEL, ConfigModule
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["call", "type_tree"]

#: The types a result is usually made of, named as a reader knows them; every other type is named with its
#: module (``__main__.Pair``), so that no class can pass for one of these by its name: a class of a
#: submission called ``tuple`` (a subclass, whatever its ``__module__`` says) is not ``tuple``.
_PLAIN_NAMES = {
    kind: kind.__name__
    for kind in (bool, int, float, complex, str, bytes, type(None), list, tuple, dict, set, frozenset,
                 torch.Tensor, torch.nn.Parameter, torch.Size, torch.dtype, torch.device)
}


def type_name(kind: type) -> str:
    """How :func:`type_tree` names a type: ``tuple`` for tuple itself only (see ``_PLAIN_NAMES``)."""
    return _PLAIN_NAMES.get(kind) or f"{kind.__module__}.{kind.__qualname__}"


def type_tree(value: object) -> object:
    """The exact types of ``value``, recursively; a tensor as ``Tensor(dtype, device type)``; a dict's keys in
    their order, which a part's text usually states (:func:`keys_sorted` for one that leaves it free).

    A tensor that requires grad is marked ``requires_grad``, and an inference tensor (made under
    ``torch.inference_mode()``) ``inference``: each has the dtype and values of an ordinary tensor,
    but a caller can tell it apart. A result that should be detached and is not keeps its graph
    alive (and takes part in every later backward); one that should carry a graph and does not
    cuts training off; autograd refuses to save an inference tensor, and it cannot be changed in
    place outside inference mode.
    """
    if isinstance(value, torch.Tensor):
        marks = [mark for mark, present in (("requires_grad", value.requires_grad), ("inference", value.is_inference()))
                 if present]
        described = [str(value.dtype).removeprefix("torch."), value.device.type, *marks]
        return f"{type_name(type(value))}({', '.join(described)})"
    if isinstance(value, (list, tuple)):
        return {type_name(type(value)): [type_tree(item) for item in value]}
    if isinstance(value, dict):
        return {type_name(type(value)): [[repr(key), type_tree(item)] for key, item in value.items()]}
    return type_name(type(value))


def keys_sorted(value: object) -> object:
    """``value`` with every plain dict, list and tuple in it rebuilt, each dict's keys sorted by ``repr``:
    what is sent for a part whose text leaves the order of a dict's keys free. Anything else, a
    subclass included, stays as it is (its exact type is graded: :func:`type_tree`)."""
    if type(value) is dict:
        return dict(sorted(((key, keys_sorted(item)) for key, item in value.items()), key=lambda pair: repr(pair[0])))
    if type(value) in (list, tuple):
        return type(value)(keys_sorted(item) for item in value)
    return value


def _leaves(value: object, path: str) -> Iterator[tuple[str, object]]:
    """Every argument and everything inside it a call could change, with a readable path."""
    yield path, value
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}[{key!r}]")


#: How many values :class:`_Recorder` follows inside one argument's attributes. A value kept deeper or wider
#: than that counts as changed (:class:`_Uncomparable`): state can hide anywhere it is not followed.
_RECORD_LIMIT = 10_000


class _Uncomparable:
    """A record that equals nothing, itself included: what is too large to follow counts as changed."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


class _Recorder:
    """A comparable copy of a value and of everything it holds: the state a call could keep in it.

    Why deep, and why this way: state kept between calls hid one level down (a list in a dict), in a
    helper object's class, in a generator's frame, in an ``lru_cache``, in a module held in a plain list,
    behind a container subclass whose ``items()`` or ``__iter__`` showed nothing (rounds 18 and 19). So
    every value is followed without running any of its own code: containers through their base type's
    C methods (``dict.items(value)``, not ``value.items()``), an object's ``__dict__`` and slots through
    ``object``'s and the slots' descriptors, its class's attributes when the class is the notebook's, a
    function's closure, defaults and the globals its code names, a buffer's bytes, and what any other
    object holds as the garbage collector sees it (``gc.get_referents``: a generator's locals, a cache's
    dict), with a C type's own ``__reduce__`` (an iterator's position, a ``count``'s next value). Tensors are recorded by
    their state, a ``torch.Generator`` by its state; torch's private machinery (compiled code, caches) and
    Python modules by their type alone: their insides are torch's, not the caller's. A record holds no
    ``id()``: an object replaced by an equal one is no change, and an address reused by a new object
    after the old one was freed (which made the reference's run and a student's disagree) decides
    nothing. An object met twice is recorded the second time by where it was first met, so cycles end;
    past :data:`_RECORD_LIMIT` values the record equals nothing (:class:`_Uncomparable`).
    """

    def __init__(self, limit: int = _RECORD_LIMIT, *, gradients: bool = True) -> None:
        self.left = limit
        self.gradients = gradients  # False: a tensor's ``.grad`` is left out (a part that leaves it free)
        self.met: dict[int, int] = {}
        self.kept: list[object] = []  # what was met stays alive, so no id is reused while recording
        self.names: set[str] = set()  # the names the notebook's code met so far reads, writes or spells
        self.modules: list[types.ModuleType] = []  # the modules met, recorded last (:meth:`record`)
        #: the characters, bytes and tensor elements held, and an int's bytes, beside the values followed: a history
        #: kept in one tensor (``torch.cat`` at each call), one string (round 93) or one int (round 94) grows in size,
        #: not in values
        self.elements = 0

    def record(self, value: object) -> object:
        """``value``'s record, then each module met on the way: its attributes the notebook's code names.

        Why modules last, and only by those names: a module holds the whole library, and most of it changes as
        torch works, whoever calls; but a container a function reaches by name through a module is state it
        can keep (round 23: a public dict of ``torch.ao.quantization``). The names are those of every notebook
        function met (attribute names, and strings it spells, as ``getattr`` takes them), all known by the end.
        """
        main = self(value)
        modules = []
        for module in self.modules:  # grows while it is read: a module's module is met here
            fields = _own_dict(module) or {}
            modules.append((module.__name__, [(name, self(fields[name])) for name in sorted(self.names & fields.keys())
                                              if not name.startswith("__") and not isinstance(fields[name],
                                                                                               torch.Generator)]))
        return (main, modules)

    def __call__(self, value: object) -> object:
        self.left -= 1
        if self.left < 0:
            return _Uncomparable()
        kind = type(value)
        if value is None or kind in (bool, int, float, complex, str, bytes):
            self.elements += len(value) if kind in (str, bytes) else value.bit_length() // 8 if kind is int else 0
            return (type_name(kind), value)
        if id(value) in self.met:
            return ("met before", self.met[id(value)])
        self.met[id(value)] = len(self.met)
        self.kept.append(value)
        if isinstance(value, torch.Tensor):
            self.elements += value.numel()
            return _tensor_state(value, self, gradient=self.gradients)
        if isinstance(value, torch.Generator):
            return (type_name(kind), bytes(value.get_state().numpy()) if value.device.type == "cpu" else None)
        if isinstance(value, type):
            return (type_name(kind), value.__qualname__, self._class_fields(value))
        if isinstance(value, types.ModuleType):
            self.modules.append(value)
            return (type_name(kind), value.__name__)
        if _opaque(value):
            return (type_name(kind),)
        return (type_name(kind), self._contents(value), self._fields(value))

    def _contents(self, value: object) -> object:
        """What ``value`` holds as its base type holds it, read without any method of its own class."""
        if isinstance(value, collections.OrderedDict):  # its own order, which move_to_end changes (round 26)
            return [(self(key), self(item)) for key, item in collections.OrderedDict.items(value)]
        if isinstance(value, dict):
            return [(self(key), self(item)) for key, item in dict.items(value)]
        for base, plain in _PLAIN_VALUES:  # an int's or a str's subclass: its value too (round 26: a counter)
            if isinstance(value, base):
                return self(plain(value))  # its __dict__, if any, is among its fields
        if isinstance(value, (set, frozenset)):
            return sorted((self(item) for item in (set.__iter__ if isinstance(value, set) else frozenset.__iter__)(value)),
                          key=repr)
        for base in (list, tuple, collections.deque):
            if isinstance(value, base):
                return [self(item) for item in base.__iter__(value)]
        if isinstance(value, types.FunctionType):
            cells = [self(cell.cell_contents) if _filled(cell) else "empty" for cell in value.__closure__ or ()]
            # torch's own functions (torch.compile's wrapper) name torch's globals: its compile counters and
            # timings, which change as it compiles, whoever calls; what they close over (the function they
            # wrap) is still followed
            torchs = _torchs(value)
            if not value.__code__.co_filename.startswith(_LIBRARY_DIRS):
                facts = _code_facts(value.__code__)
                self.names.update(facts.names)
                imported = [self(sys.modules[name]) for name in facts.imports if name in sys.modules]
            else:
                imported = []
            return [_code_text(value.__code__), self(value.__defaults__), self(value.__kwdefaults__), cells,
                    [] if torchs else [(name, self(value.__globals__[name])) for name in _named_globals(value)],
                    imported]
        try:
            held = memoryview(value).tobytes()  # a bytearray, an array.array, a NumPy array
            self.elements += len(held)
            return held
        except (TypeError, ValueError):
            pass
        own = _own_dict(value)  # recorded by _fields, by name
        return [self(_c_reduce(value)), self(_held_in_cpp(value)), _paused_at(value),
                [self(item) for item in gc.get_referents(value) if item is not own]]

    def _fields(self, value: object) -> object:
        """An object's own attributes (``__dict__``) and slots, by name, and its class's when the class is the
        notebook's (a list in the class body changed through ``self``)."""
        fields = dict(_own_dict(value) or {})
        for klass in type(value).__mro__:
            for slot in _slot_names(klass):
                member = vars(klass).get(slot)
                if slot not in ("__dict__", "__weakref__") and isinstance(member, types.MemberDescriptorType):
                    try:
                        fields[slot] = member.__get__(value, klass)
                    except AttributeError:  # a slot never assigned
                        continue
        own = [(str(name), self(item)) for name, item in sorted(fields.items(), key=lambda pair: str(pair[0]))]
        return own + [(type_name(klass), self._class_fields(klass)) for klass in type(value).__mro__
                      if _notebooks(klass)] + [(name, self(item)) for name, item in _c_fields(value)]

    def _class_fields(self, klass: type) -> object:
        """A notebook class's attributes but its special names (torch's and Python's classes: None)."""
        if not _notebooks(klass):
            return None
        return [(key, self(item)) for key, item in sorted(vars(klass).items())
                if not (key.startswith("__") and key.endswith("__"))]


def _notebooks(klass: type) -> bool:
    """A class defined in the notebook, or anywhere but in a library's files."""
    if not klass.__flags__ & _HEAP_TYPE:
        return False
    functions = [item for item in vars(klass).values() if isinstance(item, types.FunctionType)]
    # a library's class (torch's, Python's) has its code in the library's files, whatever its __module__ says
    return not functions or not all(item.__code__.co_filename.startswith(_LIBRARY_DIRS) for item in functions)


#: ``Py_TPFLAGS_HEAPTYPE``: a class made by a ``class`` statement (or ``type()``), not one written in C.
_HEAP_TYPE = 1 << 9


def _torchs(code_owner: object) -> bool:
    """Whether a class or function is torch's own, by where its code lives (``__module__`` can be rewritten:
    ``functools.wraps`` copies torch's onto a notebook function or class, round 22). A class written in C
    cannot be relabelled; a class written in Python is torch's when every function it defines is."""
    if isinstance(code_owner, types.FunctionType):
        return code_owner.__code__.co_filename.startswith(_TORCH_DIR)
    if isinstance(code_owner, type):
        if not code_owner.__flags__ & _HEAP_TYPE:
            return (getattr(code_owner, "__module__", "") or "").startswith("torch")
        functions = [item for item in vars(code_owner).values() if isinstance(item, types.FunctionType)]
        return (getattr(code_owner, "__module__", "") or "").startswith("torch") and all(map(_torchs, functions))
    return False


#: Where torch's Python code lives, and where every library's does (Python's own, and the installed packages).
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_LIBRARY_DIRS = (os.path.dirname(os.__file__) + os.sep, os.path.dirname(os.path.dirname(torch.__file__)) + os.sep)


def _opaque(value: object) -> bool:
    """Recorded by type alone: code, or an object of torch's compiler machinery (:data:`_MACHINERY`:
    ``torch._dynamo``'s compiled code and caches, ``torch._C``'s handles), whose insides change as torch
    works, whoever calls. torch's other objects (an optimizer, a dataset, a hook's handle, a private helper)
    are recorded by their contents, as any other: state kept in an optimizer's ``state`` dict is state kept
    (round 20). A module is recorded by the attributes the notebook's code names (:meth:`_Recorder.record`)."""
    if isinstance(value, types.CodeType):
        return True
    module = getattr(type(value), "__module__", "") or ""
    return (module.startswith(_MACHINERY) and _torchs(type(value)) and not isinstance(value, torch.nn.Module))


#: torch's compiler machinery: its objects' insides change as it compiles, whoever calls. Any other object of
#: torch's private modules is followed like any object (round 24: a list kept in a ``torch._utils`` object).
_MACHINERY = ("torch._dynamo", "torch._inductor", "torch._functorch", "torch._subclasses", "torch._guards",
              "torch._export", "torch._higher_order_ops", "torch._C")


def _own_dict(value: object) -> dict | None:
    """``value.__dict__`` read through ``object`` (no ``__getattr__`` of the value's class runs), or None."""
    try:
        found = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return None
    return found if isinstance(found, dict) else None


def _named_globals(function: types.FunctionType) -> list[str]:
    """The globals a function's code (nested functions' included) reads or writes.

    Read from the bytecode (``LOAD_GLOBAL``, ``STORE_GLOBAL``): ``co_names`` also holds every attribute name
    (``model.head``), and a notebook global that happens to share one (a test's own ``head``) is not state
    of the function's. A module among them is recorded by the attributes the notebook's code names
    (:meth:`_Recorder.record`).
    """
    found = function.__globals__
    return [name for name in _code_facts(function.__code__).globals if name in found]


class _CodeFacts(NamedTuple):
    """What a code object (and the code nested in it) reaches by name: read once per code (its bytecode cannot
    change), not at every record (reading it was 6% of lab 02's checks)."""

    globals: tuple[str, ...]  # the globals it reads or writes, sorted
    names: frozenset[str]  # every name it reads or writes as an attribute or global, and every name it spells
    imports: tuple[str, ...]  # the modules its ``import`` statements name, and the packages above them


@functools.lru_cache(maxsize=4096)
def _code_facts(code: types.CodeType) -> _CodeFacts:
    instructions = list(dis.get_instructions(code))
    global_names = {op.argval for op in instructions if op.opname in _GLOBAL_OPS}
    imports = {".".join(parts[:depth]) for op in instructions if op.opname == "IMPORT_NAME"
               for parts in [op.argval.split(".")] for depth in range(1, len(parts) + 1)}
    # a string the code spells may be an attribute's name (``getattr(m, "table")``, ``attrgetter("a.b")``)
    spelled = {part for const in code.co_consts if isinstance(const, str) and len(const) < 200
               for part in const.split(".") if part.isidentifier()}
    names = set(code.co_names) | spelled
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            nested = _code_facts(const)
            global_names.update(nested.globals)
            names.update(nested.names)
            imports.update(nested.imports)
    return _CodeFacts(tuple(sorted(global_names)), frozenset(names), tuple(sorted(imports)))


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a cell not yet assigned
        return False
    return True


def _slot_names(klass: type) -> tuple[str, ...]:
    slots = vars(klass).get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


def _code_text(code: types.CodeType) -> tuple[object, ...]:
    """A function's code by what it is (its bytecode and names), never by its address: a record holds no ``id``,
    which an object made after another one was freed may reuse."""
    return (code.co_qualname, code.co_code, code.co_names, code.co_varnames)


#: The instructions that read or write a function's globals.
_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL"})


def _held_in_cpp(value: object) -> object:
    """What C code keeps for the objects a call could keep state in, which neither the garbage collector
    nor ``__reduce__`` shows (round 21): a storage's bytes (as a digest), a future's result once
    it has one, an ``lru_cache``'s statistics. None for anything else."""
    if isinstance(value, (torch.UntypedStorage, torch.TypedStorage)):
        storage = value.untyped_storage() if isinstance(value, torch.TypedStorage) else value
        if storage.device.type == "meta":
            return storage.nbytes()
        # a digest, not a copy: a storage of any size is followed (past a megabyte, its size alone let a counter
        # hide in a large storage's last bytes, round 23), and hashing reads it once
        data = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage).cpu()
        return (storage.nbytes(), hashlib.blake2b(data.numpy().data, digest_size=16).digest())
    if isinstance(value, torch.autograd.graph.Node):
        return dict(value.metadata)  # a graph node held on its own (round 22), not only through a tensor
    if isinstance(value, torch.futures.Future):
        return ("done", value.value()) if value.done() else "pending"
    if isinstance(value, functools._lru_cache_wrapper):
        return tuple(value.cache_info())  # its hit count, a counter in C (round 25)
    return None


#: The built-in types a class can derive from while holding one plain value, with how to read that value through
#: the built-in type's own method (none of the subclass's runs).
_PLAIN_VALUES = ((int, int.__int__), (float, float.__float__), (complex, complex.__complex__), (str, str.__str__),
                 (bytes, bytes.__bytes__))


#: The modules whose C types :func:`_c_fields` reads: the standard modules a lab's code may import.
_C_FIELD_MODULES = frozenset({"collections", "_collections", "functools", "itertools", "operator"})


def _c_fields(value: object) -> list[tuple[str, object]]:
    """The fields a C type of the modules a lab may import keeps outside ``__dict__`` and ``__reduce__`` (round
    26: a ``defaultdict``'s ``default_factory`` rebound at each call as a counter; a ``deque``'s ``maxlen``, a
    ``partial``'s arguments), read through their descriptors. torch's C types are recorded by what they hold
    (:func:`_held_in_cpp`); Python's own (a generator, a frame) by what the garbage collector sees."""
    found = []
    for klass in type(value).__mro__:
        if klass.__flags__ & _HEAP_TYPE or klass.__module__ not in _C_FIELD_MODULES:
            continue
        for name, member in sorted(vars(klass).items()):
            if name.startswith("__") or not isinstance(member, (types.MemberDescriptorType,
                                                                types.GetSetDescriptorType)):
                continue
            try:
                found.append((name, member.__get__(value, klass)))
            except Exception:  # noqa: BLE001  (a field not set, or one its type refuses to show)
                continue
    return found


#: Python's objects that hold a frame which runs, stops and goes on, and the attribute that holds it.
_PAUSING = ((types.GeneratorType, "gi_frame"), (types.CoroutineType, "cr_frame"), (types.AsyncGeneratorType, "ag_frame"))


def _paused_at(value: object) -> object:
    """Where a generator (a coroutine, an async generator) is paused: its frame's last instruction, or "done"; and
    where a frame is. The garbage collector shows a frame's locals, not its place (round 37: thirty ``yield``
    statements in a row, no local among them, counted the calls of the function that advanced them)."""
    for kind, attribute in _PAUSING:
        if type(value) is kind:
            frame = getattr(value, attribute)
            return "done" if frame is None else frame.f_lasti
    return value.f_lasti if type(value) is types.FrameType else None


def _c_reduce(value: object) -> object:
    """What the first class written in C among the value's classes says it is made of (its own ``__reduce__``:
    a ``range`` iterator's position, a ``count``'s next value, a ``repeat``'s object), never through a
    notebook class's method; None where that class has none of its own, or refuses (a generator)."""
    for klass in type(value).__mro__:
        if not klass.__flags__ & _HEAP_TYPE:
            method = vars(klass).get("__reduce__")
            if method is None or klass is object:
                return None
            try:
                return method(value)
            except Exception:  # noqa: BLE001  (a type that cannot say: its referents still count)
                return None
    return None


def _tensor_state(tensor: torch.Tensor, recorder: _Recorder | None = None, *, gradient: bool = True,
                  hooks: bool = True) -> tuple[object, ...]:
    """What a caller can see of a tensor: its values (none on ``meta``), layout, version and (``gradient``)
    its ``.grad``, and the attributes set on it, by value (an old gradient kept as ``p.saved`` stays in memory),
    but torch's own marks (:data:`TORCH_MARKS`)."""
    recorder = recorder or _Recorder()
    values = None if tensor.is_meta else tensor.detach().clone()
    # a view's storage beyond the view, as a digest: written through .data, which no version counter sees, or
    # through a tensor of its own over the same storage (round 25: a call zeroed the caller's base around the
    # slice it was given, and wrote the slice back)
    beyond = _held_in_cpp(tensor.untyped_storage()) if _covers_less(tensor) else None
    node = _graph(tensor.grad_fn, recorder) if tensor.grad_fn is not None else None
    grad = _gradient_state(tensor) if gradient else None
    attributes = [(name, recorder(value)) for name, value in sorted(vars(tensor).items())
                  if not _torch_mark(name, value)]
    # hooks registered on the tensor itself (what they hold included): they run in every later backward (a
    # module's parameters' hooks are its own part, "hooks")
    held = [recorder(getattr(tensor, name, None)) for name in ("_backward_hooks", "_post_accumulate_grad_hooks")
            ] if hooks else None
    # the storage's size, a meta tensor's too (round 37: a meta tensor's storage grown by a byte at each call,
    # which no version counter sees and no value shows, counted the calls)
    size = tensor.untyped_storage().nbytes()
    return (type(tensor), values, tuple(tensor.shape), tensor.stride(), tensor.storage_offset(), tensor.dtype,
            tensor._version, tensor.requires_grad, grad, attributes, held, beyond, node, size, _StorageOf(tensor))


class _StorageOf:
    """Which memory a tensor's storage is, compared within one call's records: the storage is held, so its address
    is no other storage's while the record lives (round 26: ``a.data = a.data.clone()`` kept the caller's values,
    strides and version, and cut off every view the caller had of ``a``)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.storage = None if tensor.is_meta else tensor.untyped_storage()  # held for the record's life
        self.span = _memory(tensor)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StorageOf) and self.span == other.span

    __hash__ = object.__hash__


#: How many autograd nodes :func:`_graph` follows behind one tensor; a longer history counts as changed.
_GRAPH_LIMIT = 100_000


def _graph(root: torch.autograd.graph.Node, recorder: _Recorder) -> object:
    """A tensor's autograd history: every node behind it, by type, with its metadata and what it saved.

    Why the whole graph: a tensor kept between calls can stay 0, at version 0, while each call adds a node
    to its history that saves a copy of the caller's input (round 25: memory that grows at each call, and a
    counter read back by walking ``next_functions``). Only its first node's metadata was recorded.
    """
    seen = {id(root)}
    pending, nodes = [root], []
    while pending:
        if len(nodes) >= _GRAPH_LIMIT:
            return _Uncomparable()
        node = pending.pop()
        nodes.append((type(node).__name__, recorder(dict(node.metadata)), _saved(node, recorder)))
        for following, _ in node.next_functions:
            if following is not None and id(following) not in seen:
                seen.add(id(following))
                pending.append(following)
    return nodes


def _saved(node: torch.autograd.graph.Node, recorder: _Recorder) -> list[tuple[str, object]]:
    """What an autograd node saved for backward (its ``_saved_*`` attributes), and the leaf an accumulator
    feeds, by identity (its ``.grad`` is the caller's to fill: a backward through an input is no change to it).

    A saved tensor is recorded by its values, not its history: the history is the graph being walked.
    """
    found: list[tuple[str, object]] = []
    for name in dir(node):
        if name == "variable":
            found.append((name, _Identity([node.variable])))
        elif name.startswith("_saved_"):
            try:
                held = getattr(node, name)
            except RuntimeError:  # freed by a backward pass
                found.append((name, "freed"))
                continue
            items = held if isinstance(held, (list, tuple)) else [held]
            found.append((name, [_values(item) if isinstance(item, torch.Tensor) else recorder(item) for item in items]))
    return found


def _values(tensor: torch.Tensor) -> tuple[object, ...]:
    """A tensor's shape, dtype and values (none on ``meta``)."""
    return (tuple(tensor.shape), tensor.dtype, None if tensor.is_meta else tensor.detach().clone())


#: The marks torch itself sets on a tensor it works with, by name and value: ``torch.cond``, run eagerly, marks
#: every parameter of the module it runs so (``torch._dynamo.mark_static_address``). Only these exact marks
#: pass unseen: a name of the same family holding anything else (a tensor kept between calls) is an attribute
#: like any other.
TORCH_MARKS = {"_dynamo_static_input_type": "unguarded"}


def _covers_less(tensor: torch.Tensor) -> bool:
    """A tensor (not on ``meta``) that covers less than its storage: a view, or a slice of a larger block."""
    return not tensor.is_meta and tensor.untyped_storage().nbytes() > tensor.numel() * tensor.element_size()


def _torch_mark(name: str, value: object) -> bool:
    """The exact mark: a ``str`` itself (a subclass of ``str`` equal to it can hold anything in its ``__dict__``)."""
    return name in TORCH_MARKS and type(value) is str and value == TORCH_MARKS[name]


def _gradient_state(tensor: torch.Tensor) -> tuple[object, ...] | None:
    """The state of ``tensor.grad`` (None where there is none)."""
    held = tensor.grad if tensor.is_leaf or tensor.retains_grad else None  # a non-leaf's .grad warns, stays None
    return None if held is None else _tensor_state(held)


def _module_state(module: torch.nn.Module, *, gradients: bool = True) -> dict[str, object]:
    """A module's state, part by part, so that the contract says which part a call changed.

    Why by part: a function may be allowed to change one part (a BatchNorm in training mode updates
    its buffers in any forward pass, a training step the parameters' ``.grad``) and not another (the
    caller's ``training`` flags); one verdict for the whole module would let the second hide behind the
    first. ``gradients=False`` leaves the parameters' ``.grad`` out, for a part whose text leaves free
    what they hold after the call.
    """
    submodules = _submodules(module)  # walked once for every part (the parts were 8 walks of the tree)
    parameters, buffers = _members(module, PARAMETERS, submodules), _members(module, BUFFERS, submodules)
    return {
        "parameters": [(name, _tensor_state(t, gradient=False, hooks=False)) for name, t in parameters],
        **({"gradients": [(name, _gradient_state(t)) for name, t in parameters]} if gradients else {}),
        "buffers": [(name, _tensor_state(t)) for name, t in buffers],
        "training flags": [(name, _flag(sub)) for name, sub in submodules],
        # a child swapped for one of another class with nothing to record (round 25: Tanh for Sigmoid)
        "classes": [(name, type(sub)) for name, sub in submodules],
        "hooks": _hook_count(module, submodules, parameters),
        # a buffer made non-persistent drops out of the caller's checkpoints (round 24)
        "persistent buffers": [(name, sorted(map(str, (_own_dict(sub) or {}).get("_non_persistent_buffers_set", ()))))
                               for name, sub in submodules],
        # the same objects, not equal copies: an optimizer built on the caller's parameters must still reach them
        # (round 24: each parameter replaced by a copy with its version counter matched)
        "parameter and buffer objects": _Identity([t for _, t in parameters + buffers]),
        "attributes": [(name, _plain_attributes(sub)) for name, sub in _submodules(module, remove_duplicate=False)],
    }


#: Where ``nn.Module`` keeps its parameters and its buffers.
PARAMETERS, BUFFERS = "_parameters", "_buffers"


def _internal(module: torch.nn.Module, name: str) -> dict:
    """One of ``nn.Module``'s own dicts (``_modules``, ``_parameters``, a hook dict), read from the instance's
    ``__dict__``: none of the module's methods runs (round 21: a class whose ``named_buffers()`` left a buffer
    out hid the state it kept there)."""
    found = (_own_dict(module) or {}).get(name)
    return found if isinstance(found, dict) else {}


def _flag(module: torch.nn.Module) -> object:
    """The ``training`` flag, read as :func:`_internal` reads."""
    return (_own_dict(module) or {}).get("training")


def _submodules(module: torch.nn.Module, *, remove_duplicate: bool = True) -> list[tuple[str, torch.nn.Module]]:
    """``named_modules()`` as ``nn.Module`` defines it, walked through :func:`_internal`."""
    seen: set[int] = set()
    found: list[tuple[str, torch.nn.Module]] = []
    pending = [("", module)]
    while pending:
        prefix, sub = pending.pop()
        if remove_duplicate and id(sub) in seen:
            continue
        seen.add(id(sub))
        found.append((prefix, sub))
        children = [(f"{prefix}.{name}" if prefix else name, child)
                    for name, child in dict.items(_internal(sub, "_modules")) if isinstance(child, torch.nn.Module)]
        pending.extend(reversed(children))
    return found


def _members(module: torch.nn.Module, kind: str,
             submodules: list[tuple[str, torch.nn.Module]] | None = None) -> list[tuple[str, torch.Tensor]]:
    """``named_parameters()`` (``kind`` :data:`PARAMETERS`) or ``named_buffers()`` (:data:`BUFFERS`) as
    ``nn.Module`` defines them (each tensor once, under its first name), walked through :func:`_internal`
    (or over ``submodules``, the module's :func:`_submodules` already walked)."""
    seen: set[int] = set()
    found = []
    for prefix, sub in submodules if submodules is not None else _submodules(module):
        for name, tensor in dict.items(_internal(sub, kind)):
            if isinstance(tensor, torch.Tensor) and id(tensor) not in seen:
                seen.add(id(tensor))
                found.append((f"{prefix}.{name}" if prefix else name, tensor))
    return found


def _plain_attributes(module: torch.nn.Module) -> list[tuple[str, object]]:
    """The attributes a forward pass could set on ``self`` besides parameters, buffers and children, and on
    its class, by value all the way down (:class:`_Recorder`).

    ``nn.Module`` keeps its own bookkeeping in the names every module has (``_parameters``, the
    hook dictionaries, ``training``: checked part by part above); everything else in
    ``vars(module)`` was put there by the module's code, a leading underscore or not (a student's
    ``self._last`` is state kept between calls as much as ``self.last``). A class attribute changed
    through ``self`` (``self.seen.append(x)`` with ``seen = []`` in the class body) is state too: the
    attributes of the module's own classes (not torch's), but their special names, are recorded as well.
    """
    recorder = _Recorder()
    own = [(key, recorder(value)) for key, value in sorted(vars(module).items()) if key not in _MODULE_BOOKKEEPING]
    classes = [klass for klass in type(module).__mro__ if not klass.__module__.startswith("torch")
               and klass is not object]
    shared = [(f"{klass.__qualname__}.{key}", recorder(value)) for klass in classes
              for key, value in sorted(vars(klass).items()) if not (key.startswith("__") and key.endswith("__"))]
    return own + shared


_MODULE_BOOKKEEPING = frozenset(vars(torch.nn.Module()))


#: Every hook dict ``nn.Module`` keeps (forward, backward, ``state_dict`` and ``load_state_dict`` hooks, with
#: kwargs or always called): round 24 left ``state_dict`` pre-hooks on a caller's model, which were not counted.
_HOOK_DICTS = tuple(sorted(name for name, value in vars(torch.nn.Module()).items()
                           if "hook" in name and isinstance(value, dict)))


class _Identity:
    """Objects compared by identity, in one call's records only (the objects are held, so no id is reused)."""

    def __init__(self, objects: list[object]) -> None:
        self.objects = objects

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _Identity) and len(self.objects) == len(other.objects)
                and all(one is two for one, two in zip(self.objects, other.objects, strict=True)))

    __hash__ = object.__hash__


def _hook_count(module: torch.nn.Module, submodules: list[tuple[str, torch.nn.Module]] | None = None,
                parameters: list[tuple[str, torch.Tensor]] | None = None) -> int:
    """Every hook on the module's tree (``submodules`` and ``parameters``: the tree already walked)."""
    submodules = submodules if submodules is not None else _submodules(module)
    parameters = parameters if parameters is not None else _members(module, PARAMETERS, submodules)
    # A parameter's gradient hooks and post-accumulate hooks, left behind, run in every later backward.
    tensor_hooks = sum(len(getattr(t, name, None) or {}) for _, t in parameters
                       for name in ("_backward_hooks", "_post_accumulate_grad_hooks"))
    return sum(len(_internal(sub, name)) for _, sub in submodules for name in _HOOK_DICTS) + tensor_hooks


def _within_rounding(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Floating-point tensors equal up to their dtype's rounding, ``nan`` equal to ``nan``."""
    if not (a.is_floating_point() or a.is_complex()):
        return False
    try:
        torch.testing.assert_close(a.detach(), b.detach(), equal_nan=True)
    except AssertionError:
        return False
    return True


def _state(value: object, *, gradients: bool = True) -> object:
    """A comparable record of one argument (or item): a tensor's state, a list's or dict's items (each recorded
    on its own), and any other object by value all the way down (:class:`_Recorder`: round 24's step left the
    caller's optimizer with a learning rate of 0 between calls, and an optimizer was not recorded)."""
    if isinstance(value, torch.Tensor):
        return _tensor_state(value)
    if isinstance(value, (list, dict)):
        return (type(value), len(value), _Identity(list(value.values() if isinstance(value, dict) else value)))
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, tuple)):
        return None  # immutable (a tuple's items are recorded on their own)
    return _Recorder(gradients=gradients).record(value)


def _optimizer_state(optimizer: torch.optim.Optimizer, *, gradients: bool = True) -> dict[str, object]:
    """An optimizer's state, part by part (as a module's): a step may change its ``state`` (momentum, the step
    count), never its ``settings`` (each group's learning rate and the other hyperparameters) nor which
    parameters it holds (round 24: a step left every group's ``lr`` at 0 between calls)."""
    fields = _own_dict(optimizer) or {}
    groups = [dict.items(group) for group in fields.get("param_groups", []) if isinstance(group, dict)]
    recorder = _Recorder(gradients=gradients)
    return {
        "settings": [[(key, recorder(item)) for key, item in group if key != "params"] for group in groups],
        "state": recorder(fields.get("state")),
        "parameters": _Identity([item for group in groups for key, items in group if key == "params"
                                 for item in (items if isinstance(items, list) else [items])]),
        "other": recorder({key: item for key, item in fields.items() if key not in ("param_groups", "state")}),
    }


def _same(a: object, b: object, *, rounding: bool = False) -> bool:
    """Equal records: tensors exactly, ``nan`` equal to ``nan``.

    With ``rounding``, floating-point tensors may differ by their dtype's rounding
    (``torch.testing.assert_close``'s defaults): for two results computed with different numbers
    of threads, whose sums may run in another order.
    """
    kind = type(a)
    if kind in _PLAIN:  # most of a record: flags, names, counts (a fast path: this runs 1,000 times a call)
        return type(b) is kind and a == b
    if kind is tuple and type(b) is tuple:
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if not _same(x, y, rounding=rounding):
                return False
        return True
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and a.device == b.device
                and (a.is_meta or _same_bits(a, b) or (rounding and _within_rounding(a, b))))
    if type(a) in (float, complex) and type(b) is type(a):
        return _float_bits(a) == _float_bits(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_same(x, y, rounding=rounding) for x, y in zip(a, b, strict=True)))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[key], b[key], rounding=rounding) for key in a)
    return type(a) is type(b) and a == b


#: The types :func:`_same` compares with ``==`` alone, when both values are of one of them.
_PLAIN = frozenset({bool, int, str, bytes, type(None), torch.dtype})

#: An integer dtype of each floating dtype's size, to compare floating tensors bit by bit.
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal tensors, bit by bit for floating ones: ``nan`` equal to ``nan``, but ``-0.0`` not ``0.0`` and ``inf``
    not the dtype's largest value (round 26: a call turned the caller's infinities into ``finfo.max`` and its
    negative zeros into zeros, through ``.data``, and ``torch.equal`` with ``nan_to_num`` saw neither). A ``nan``
    of another payload counts as changed: an untouched tensor keeps its bits."""
    if not (a.is_floating_point() or a.is_complex()):
        return bool(torch.equal(a, b))
    if a.is_complex():
        a, b = torch.view_as_real(a.resolve_conj()), torch.view_as_real(b.resolve_conj())
    kind = _BITS[a.element_size()]
    return bool(torch.equal(a.contiguous().view(kind), b.contiguous().view(kind)))


def _float_bits(value: float | complex) -> tuple[bytes, ...]:
    """A Python float's (or complex's parts') bits: ``nan`` equal to ``nan``, ``-0.0`` not ``0.0`` (round 26:
    ``torch.nan``, named by an honest answer, was recorded as a module's attribute that changed)."""
    parts = (value.real, value.imag) if isinstance(value, complex) else (value,)
    return tuple(struct.pack("<d", part) for part in parts)


def _records(args: tuple[Any, ...], kwargs: dict[str, Any], *, gradients: bool = True) -> dict[str, object]:
    """Path -> record of every argument and item; a module as one record per part (``argument 0 (hooks)``)."""
    arguments = {f"argument {i}": value for i, value in enumerate(args)} | kwargs
    records: dict[str, object] = {}
    for name, value in arguments.items():
        for path, leaf in _leaves(value, name):
            if isinstance(leaf, (torch.nn.Module, torch.optim.Optimizer)):
                parts = (_module_state if isinstance(leaf, torch.nn.Module) else _optimizer_state)(
                    leaf, gradients=gradients)
                records |= {f"{path} ({part})": state for part, state in parts.items()}
            else:
                records[path] = _state(leaf, gradients=gradients)
    return records


def _settled(value: object, *, gradients: bool = True) -> object:
    """What an argument holds after the calls, as values the grader compares with the reference's: for an argument
    that both the reference and the student changed, *how* it changed (round 26: a step whose scaler never grew its
    scale changed the same arguments as the reference's, and kept its marks).

    A tensor as itself; a module as its parameters (and the gradients of those that require one, unless
    ``gradients`` is false: a frozen parameter's ``.grad`` is never stepped with, and a part may leave it kept or
    cleared), buffers and ``training`` flags, each by name in name order (the order of registration is the
    module's code, not its state); an optimizer, a gradient scaler or a generator as torch saves it (their classes'
    own ``state_dict`` or ``get_state``, not a method the call could have replaced on the object); a list, tuple or
    dict item by item; anything else by its type's name.
    """
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, torch.nn.Module):
        submodules = sorted(_submodules(value), key=lambda item: item[0])
        parameters = sorted(_members(value, PARAMETERS, submodules), key=lambda item: item[0])
        trained = [(name, tensor.grad) for name, tensor in parameters if tensor.requires_grad]
        return {
            "parameters": {name: tensor.detach() for name, tensor in parameters},
            **({"gradients": dict(trained)} if gradients else {}),
            "buffers": {name: tensor.detach()
                        for name, tensor in sorted(_members(value, BUFFERS, submodules), key=lambda item: item[0])},
            "training flags": {name: _flag(sub) for name, sub in submodules},
        }
    for kind, save in ((torch.optim.Optimizer, torch.optim.Optimizer.state_dict),
                       (torch.amp.GradScaler, torch.amp.GradScaler.state_dict),
                       (torch.Generator, torch.Generator.get_state)):
        if isinstance(value, kind):
            return _settled(save(value), gradients=gradients)
    if isinstance(value, (list, tuple)):
        return type(value)(_settled(item, gradients=gradients) for item in value)
    if isinstance(value, dict):
        return {str(key): _settled(item, gradients=gradients) for key, item in value.items()}
    if value is None or type(value) in (bool, int, float, str):
        return value
    return type_name(type(value))


def _arguments_after(changed: list[str], args: tuple[Any, ...], kwargs: dict[str, Any], *,
                     gradients: bool) -> dict[str, object]:
    """:func:`_settled` of each argument that ``changed`` (the contract's ``inputs changed``) names, in part."""
    arguments = {f"argument {i}": value for i, value in enumerate(args)} | kwargs
    return {name: _settled(value, gradients=gradients) for name, value in arguments.items()
            if any(path == name or path.startswith((f"{name} ", f"{name}[")) for path in changed)}


def _tensors_apart(value: object, values: dict[torch.dtype, list[torch.Tensor]]) -> object:
    """``value`` with each tensor replaced by its dtype, shape and device type, its values appended, flattened, to
    ``values[dtype]``: a training step's model is one output of each dtype, not one per tensor (1,700 outputs per
    run of lab 02 the other way, each with its own message and comparison)."""
    if isinstance(value, torch.Tensor):
        if not value.is_meta:
            dense = value.to_dense() if value.layout != torch.strided else value
            values.setdefault(value.dtype, []).append(dense.detach().reshape(-1).to("cpu"))
        return {"tensor": [str(value.dtype), list(value.shape), value.device.type]}
    if isinstance(value, (list, tuple)):
        return type(value)(_tensors_apart(item, values) for item in value)
    if isinstance(value, dict):
        return {key: _tensors_apart(item, values) for key, item in value.items()}
    return value


def _prop_flags(module: object) -> tuple[tuple[str, object], ...]:
    """A ``torch.backends`` module's flags (the ``ContextProp`` attributes of its class: cuDNN's ``enabled``,
    ``benchmark``, ``fp32_precision`` ...), by name, so a flag torch adds is in the record too."""
    return tuple((name, getattr(module, name)) for name in _prop_names(type(module)))


@functools.cache
def _prop_names(klass: type) -> tuple[str, ...]:
    return tuple(sorted(name for name, item in vars(klass).items() if isinstance(item, torch.backends.ContextProp)))


def _backend_flags(module: object) -> tuple[Callable[[], object], Callable[[Any], object]]:
    """(read, set back) a ``torch.backends`` module's flags, for :data:`_QUIET`."""
    return (lambda: _prop_flags(module),
            lambda found: _set_attributes(module, tuple(name for name, _ in found), tuple(value for _, value in found)))


def _print_options() -> tuple[object, ...]:
    options = torch._tensor_str.PRINT_OPTS
    return (options.precision, options.threshold, options.edgeitems, options.linewidth, options.sci_mode)


def _set_print_options(found: tuple[object, ...]) -> None:
    precision, threshold, edgeitems, linewidth, sci_mode = found
    torch.set_printoptions(precision=precision, threshold=threshold, edgeitems=edgeitems, linewidth=linewidth,
                           sci_mode=sci_mode)


_CUDA = torch.backends.cuda
#: CUDA matmul's flags. Not its ``fp32_precision``: ``set_float32_matmul_precision("highest")``, the default, turns
#: it from "none" to "ieee", the same arithmetic, and "float32 matmul precision" reads it (a function that set the
#: precision back to what it found would count as changed).
_MATMUL = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction",
           "allow_fp16_accumulation")
_SDP = ("flash", "mem_efficient", "math", "cudnn")


def _set_attributes(owner: object, names: tuple[str, ...], values: tuple[object, ...]) -> None:
    for name, value in zip(names, values, strict=True):
        if getattr(owner, name) != value:
            setattr(owner, name, value)


#: The device types whose autocast state :func:`_modes` does not already compare.
_OTHER_AUTOCAST = ("xpu", "mps", "hpu", "xla", "ipu", "mtia", "maia", "privateuseone")


def _set_other_autocast(found: tuple[tuple[bool, torch.dtype], ...]) -> None:
    for kind, (enabled, dtype) in zip(_OTHER_AUTOCAST, found, strict=True):
        torch.set_autocast_enabled(kind, enabled)
        torch.set_autocast_dtype(kind, dtype)


#: torch.compile's settings before anything imported ``torch._dynamo`` (reading them imports it: seconds).
_COMPILER_DEFAULTS = ("default", False, None, "inductor")


def _compiler_settings() -> tuple[object, ...]:
    """``torch.compiler.set_stance``'s and ``set_default_backend``'s settings, as torch.compile would use them."""
    if "torch._dynamo.eval_frame" not in sys.modules:
        return _COMPILER_DEFAULTS
    stance = sys.modules["torch._dynamo.eval_frame"]._stance
    backend = torch.compiler.get_default_backend()
    return (stance.stance, stance.skip_guard_eval_unsafe, stance.backend, backend)


def _set_compiler_settings(found: tuple[object, ...]) -> None:
    stance, skip_guards, forced, backend = found
    torch.compiler.set_stance(stance, skip_guard_eval_unsafe=skip_guards, force_backend=forced)
    torch.compiler.set_default_backend(backend)


def _fusion_strategy() -> object:
    """TorchScript's fusion strategy: torch reads it only by setting it (the old one is returned), so set back."""
    found = torch._C._jit_set_fusion_strategy([("STATIC", 2), ("DYNAMIC", 10)])  # torch.jit's warns: deprecated
    torch._C._jit_set_fusion_strategy(found)
    return found


#: Each setting of torch's configuration modules imported so far (``torch._dynamo.config``, ``torch._inductor.config``,
#: ``torch.fx.experimental._config`` ...): its ContextVar -> (module, name), and how many modules Python had loaded when
#: this was last made (:func:`_config_settings`).
_CONFIG_SETTINGS: dict[contextvars.ContextVar, tuple[ConfigModule, str]] = {}
_CONFIG_MODULES: list[ConfigModule] = []
_MODULES_LOADED = [0]


def _config_settings() -> dict[contextvars.ContextVar, tuple[ConfigModule, str]]:
    """:data:`_CONFIG_SETTINGS`, made again only when a module was imported since (a new configuration module)."""
    if len(sys.modules) != _MODULES_LOADED[0]:
        _MODULES_LOADED[0] = len(sys.modules)
        _CONFIG_MODULES[:] = [module for module in list(sys.modules.values()) if isinstance(module, ConfigModule)]
        for module in _CONFIG_MODULES:
            for name, entry in module._config.items():
                _CONFIG_SETTINGS[entry.user_override] = (module, name)
    return _CONFIG_SETTINGS


#: What decides a setting's value besides an override: an entry's default, the environment's values, its alias.
_ENTRY_FIELDS = ("default", "env_value_force", "env_value_default", "justknob", "alias", "hide")
_read_entry = operator.attrgetter(*_ENTRY_FIELDS)


class _Table(NamedTuple):
    """A configuration module's table of settings as read once: its ``_config`` dict, the settings' names and entries
    in order, and each entry's :data:`_ENTRY_FIELDS`. Kept as four flat sequences so that comparing one with the
    table now runs in C (about 0.15 ms for all of torch's modules, measured on the 2-core machine; a tuple per
    setting, compared in Python, took about twice that, at every call of the harness)."""

    config: dict
    names: tuple[str, ...]
    entries: tuple[object, ...]
    fields: list[tuple]


#: Each configuration module's table of settings as the baseline found it, by module name; a module imported
#: later, as first seen.
_TABLES: dict[str, _Table] = {}


def _table(module: ConfigModule) -> _Table:
    config = module._config
    return _Table(config, tuple(config), tuple(config.values()), list(map(_read_entry, config.values())))


def _tables_baseline() -> None:
    """Record every configuration module's table of settings as it is now (:data:`_TABLES`), if not yet recorded, and
    the operators registered through ``torch.library`` (:data:`_REGISTERED`), if not yet recorded."""
    if not _REGISTERED:
        _registrations_changed()
    _config_settings()
    for module in _CONFIG_MODULES:
        if module.__name__ not in _TABLES:
            _TABLES[module.__name__] = _table(module)


def _table_changed(module: ConfigModule, was: _Table) -> bool:
    """Whether ``module``'s table differs from ``was``: another dict, a setting added, removed, renamed or replaced
    by another entry, or an entry's field set to another value."""
    config = module._config
    return (config is not was.config or len(config) != len(was.entries) or tuple(config) != was.names
            or not all(map(operator.is_, config.values(), was.entries))
            or list(map(_read_entry, config.values())) != was.fields)


def _tables_changed() -> list[ConfigModule]:
    """The configuration modules whose table of settings changed since :data:`_TABLES` recorded it.

    Round 87: ``_config["capture_scalar_outputs"].default = True`` (or ``.env_value_force``) changes what torch
    reads without setting anything, so no override shows it. Read once per call of the harness, not with the other
    settings eight times.
    """
    _tables_baseline()
    return [module for module in _CONFIG_MODULES if _table_changed(module, _TABLES[module.__name__])]


def _put_back_tables() -> bool:
    """Every configuration module's table of settings as :data:`_TABLES` has it; whether one had changed."""
    changed = _tables_changed()
    for module in changed:
        was = _TABLES[module.__name__]
        object.__setattr__(module, "_config", was.config)
        was.config.clear()
        for name, entry, fields in zip(was.names, was.entries, was.fields, strict=True):
            was.config[name] = entry
            for field, value in zip(_ENTRY_FIELDS, fields, strict=True):
                setattr(entry, field, value)
        module._hash_dirty_var.set(True)  # torch caches the settings' hash and dict: made again from the table
        module._get_dict_cache_var.set(None)
    return bool(changed)


#: The Python kernels of torch's core operators (:data:`_CORE`) registered through ``torch.library`` when the baseline
#: was taken (:func:`_tables_baseline`), as ``namespace/operator/dispatch key``.
_REGISTERED: list[frozenset[str]] = []
#: torch's core operators' namespaces, and the dispatch keys whose kernel decides what such an operator computes.
_CORE = frozenset({"aten", "prims"})
_DECIDING_KEYS = frozenset({"CPU", "CUDA", "MPS", "XPU", "Meta", "CompositeImplicitAutograd",
                            "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional", "Autograd",
                            "AutogradCPU", "AutogradCUDA", "AutogradMPS", "AutogradXPU"})


#: The registry's names when :func:`_core_kernels` last read them, and what it found there.
_LAST_READ: list[frozenset[str]] = [frozenset(), frozenset()]


def _core_kernels() -> frozenset[str]:
    """The Python kernels registered for torch's core operators on a key that decides what they compute.

    Sorted out again only when the registry's names changed (a copy of them takes about 10 microseconds; sorting
    the 2,000 out, 0.6 ms).
    """
    registered = frozenset(torch.library._impls)
    if registered != _LAST_READ[0]:
        core = frozenset(name for name in registered
                         if name.partition("/")[0] in _CORE and name.rpartition("/")[2] in _DECIDING_KEYS)
        _LAST_READ[:] = [registered, core]
    return _LAST_READ[1]


def _registrations_changed() -> bool:
    """Whether a Python kernel of one of torch's core operators was registered through ``torch.library`` since the
    baseline.

    Round 88: ``torch.library.Library("aten", "IMPL").impl("dropout", ...)``, in a solution cell, replaced what
    torch's own dropout and batch norm compute on the CPU for the whole kernel, so a model exported in training mode
    served what it serves in evaluation mode. Only those keys: torch registers others itself as it goes (vmap's
    batching rules of aten operators, new operators of its own libraries), at times that differ between a student's
    run and the reference's. Only the registry's names are read (under a millisecond, once per call).
    """
    registered = _core_kernels()
    if not _REGISTERED:
        _REGISTERED.append(registered)
    return registered != _REGISTERED[0]


def _torch_config() -> tuple[tuple[str, object], ...]:
    """Every setting of torch's configuration modules that code set to something other than its default, by name.

    Why all of them: a setting of ``torch._dynamo.config`` (``capture_scalar_outputs``) made ``.item()`` in a block
    no graph break, so a block that kept two of its three graph breaks showed none (round 86). Each setting lives in
    a ContextVar of the kernel's context, set only once changed (or once read, for a list or a dict: set to a copy of
    its default), so the context's few variables are read, not the thousand settings.
    """
    settings = _config_settings()
    found = []
    for variable, value in contextvars.copy_context().items():
        if variable in settings and value is not _UNSET_SENTINEL:
            module, name = settings[variable]
            if value != module._config[name].default:
                found.append((f"{module.__name__}.{name}", copy.copy(value)))
    return tuple(sorted(found, key=lambda setting: setting[0]))


def _set_torch_config(found: tuple[tuple[str, object], ...]) -> None:
    """Set torch's configuration modules back to ``found`` (:func:`_torch_config`): every other setting to its default."""
    wanted = dict(found)
    for module, name in list(_config_settings().values()):
        label = f"{module.__name__}.{name}"
        value = module._config[name].user_override.get()
        if label in wanted:
            if value is not wanted[label]:
                setattr(module, name, copy.copy(wanted[label]))
        elif value is not _UNSET_SENTINEL and value != module._config[name].default:
            setattr(module, name, _UNSET_SENTINEL)


def _set_sdp(found: tuple[bool, ...]) -> None:
    for kind, enabled in zip(_SDP, found, strict=True):
        getattr(_CUDA, f"enable_{kind}_sdp")(enabled)


#: The process-wide settings that change no number a CPU grader compares, or that only a later part's numbers
#: would show: each as (read it, set it back). No compared output shows them changed, so :func:`call` compares
#: them itself, and :func:`put_back_quiet_settings` sets them back for the next part. Every setter torch offers
#: (``torch.set_*``, ``torch.backends``' flags, ``torch.autograd.set_*``) is here or in :func:`_modes`: a test
#: flips each one and fails on one that neither sees (round 23 found print options, the attention fast path,
#: ``warn_always`` and autograd's multithreading outside both).
_QUIET: dict[str, tuple[Callable[[], object], Callable[[Any], object]]] = {
    "anomaly detection": (lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
                          lambda found: torch.autograd.set_detect_anomaly(found[0], check_nan=found[1])),
    "cuDNN": _backend_flags(torch.backends.cudnn),
    "oneDNN": _backend_flags(torch.backends.mkldnn),
    "MIOpen": _backend_flags(torch.backends.miopen),
    "fp32 precision": _backend_flags(torch.backends),
    "CUDA matmul": (lambda: tuple(getattr(_CUDA.matmul, name) for name in _MATMUL),
                    lambda found: _set_attributes(_CUDA.matmul, _MATMUL, found)),
    # after the fp32_precision flags above: put back in this order, the legacy API is set last, as it was
    "float32 matmul precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    "attention kernels": (lambda: tuple(getattr(_CUDA, f"{kind}_sdp_enabled")() for kind in _SDP), _set_sdp),
    "attention math reduction": (_CUDA.fp16_bf16_reduction_math_sdp_allowed,
                                 _CUDA.allow_fp16_bf16_reduction_math_sdp),
    "linear algebra library": (_CUDA.preferred_linalg_library, _CUDA.preferred_linalg_library),
    "BLAS library": (_CUDA.preferred_blas_library, _CUDA.preferred_blas_library),
    "ROCm attention library": (_CUDA.preferred_rocm_fa_library, _CUDA.preferred_rocm_fa_library),
    "attention fast path": (torch.backends.mha.get_fastpath_enabled, torch.backends.mha.set_fastpath_enabled),
    "einsum path": (lambda: (torch.backends.opt_einsum.enabled, torch.backends.opt_einsum.strategy),
                    lambda found: _set_attributes(torch.backends.opt_einsum, ("enabled", "strategy"), found)),
    "NNPACK": (torch._C._get_nnpack_enabled, torch.backends.nnpack.set_flags),
    "quantized engine": (lambda: torch.backends.quantized.engine,
                         lambda found: setattr(torch.backends.quantized, "engine", found)),
    "print options": (_print_options, _set_print_options),
    "warn always": (torch.is_warn_always_enabled, torch.set_warn_always),
    "autograd multithreading": (torch.autograd.is_multithreading_enabled, torch.autograd.set_multithreading_enabled),
    "autocast cache": (torch.is_autocast_cache_enabled, torch.set_autocast_cache_enabled),
    "autocast (other devices)": (lambda: tuple((torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind))
                                               for kind in _OTHER_AUTOCAST), _set_other_autocast),
    "torch.compile stance and backend": (_compiler_settings, _set_compiler_settings),
    # round 60: torch.compiler.config's dynamic_sources left set made every later compile of an argument named x
    # dynamic; round 86: torch._dynamo.config's capture_scalar_outputs hid a graph break
    "torch's configuration modules": (_torch_config, _set_torch_config),
    "TorchScript fusion": (lambda: (torch.jit.onednn_fusion_enabled(), _fusion_strategy()),
                           lambda found: (torch.jit.enable_onednn_fusion(found[0]),
                                          torch._C._jit_set_fusion_strategy(found[1]))),
    "uninitialized memory filled": (lambda: torch.utils.deterministic.fill_uninitialized_memory,
                                    lambda found: setattr(torch.utils.deterministic, "fill_uninitialized_memory",
                                                          found)),
    # a denormal flushed to zero changes later numbers (round 22)
    "flush denormals": (lambda: float(torch.tensor(1e-40, dtype=torch.float32, device="cpu") * 1.0) == 0.0,
                        torch.set_flush_denormal),
}


def _quiet_settings() -> dict[str, object]:
    """The settings of :data:`_QUIET`, as they are now."""
    return {label: _read(read) for label, (read, _) in _QUIET.items()}


def _read(read: Callable[[], object]) -> object:
    """A setting's value, or why torch refuses to say: ``get_float32_matmul_precision`` raises once the legacy
    and the per-backend APIs were both used, which is a setting changed too."""
    try:
        return read()
    except RuntimeError as error:
        return ("unreadable", str(error)[:80])


#: The quiet settings as the first graded test cell found them (:func:`_quiet_baseline`).
_BASELINE: dict[str, object] = {}


def _quiet_baseline() -> dict[str, object]:
    """The quiet settings as they were when the checks first looked: in a graded run, the grader's hold, right after
    the lab's set-up cell and before any student code (``ptchecks.hold_baseline``); else the first call.

    Not at import: the lab's own cells set some of them (``ptlabs.setup`` sets the print options), and the
    checks are imported before them in a student's run and after them in the reference's (round 23: an
    honest answer lost its part to print options "changed" against the import's). Not at the first test cell's
    start either: a setting changed in a solution cell above it became the baseline, which every later test cell
    went back to (round 86).
    """
    if not _BASELINE:
        _BASELINE.update(_quiet_settings())
    return _BASELINE


def put_back_quiet_settings(found: dict[str, object] | None = None) -> None:
    """The quiet settings as :func:`_quiet_baseline` has them: at the start of each graded test cell
    (``ptchecks.begin``), and before and after each :func:`call`.

    So a setting a part leaves changed costs that part alone: :func:`call` reports one it finds changed
    when it starts (left so by this cell's earlier code: a visible test's unchecked call of the part's
    function, or of what it returned), then starts from the baseline, where it sees the function change
    one again; what the function leaves changed does not reach a later part. ``found``: the settings just
    read (:func:`_quiet_settings`), so they are not read twice.
    """
    baseline = _quiet_baseline()
    found = found if found is not None else _quiet_settings()
    for label, (_, write) in _QUIET.items():
        if not _same(found[label], baseline[label]):
            write(baseline[label])


def _modes(quiet: dict[str, object] | None = None) -> dict[str, object]:
    """The process-wide settings a function must leave as it found them. ``quiet``: the quiet settings as just read
    (:func:`_quiet_settings`), where only the harness's own code ran since, which changes none of them: they are not
    read again (most of a read's cost, which :func:`call` paid eight times per call; reads still bracket every call
    of the function, so any change it or its finalizers make is seen by the next one)."""
    return {
        "grad mode": torch.is_grad_enabled(),
        "inference mode": torch.is_inference_mode_enabled(),
        "autocast (cpu)": (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")),
        "autocast (cuda)": (torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")),
        "default dtype": torch.get_default_dtype(),
        "default device": str(torch.get_default_device()),
        "deterministic algorithms": (torch.are_deterministic_algorithms_enabled(),
                                     torch.is_deterministic_algorithms_warn_only_enabled()),
        "threads": torch.get_num_threads(),
        **_stacks(),
        **(_quiet_settings() if quiet is None else quiet),
    }


#: The quiet settings that :func:`_unusual_caller` itself changes, and puts back: ``use_deterministic_algorithms`` sets
#: ``torch._inductor.config.deterministic``. :func:`_quiet_part` reads them again (a test holds this list complete).
_SET_BY_THE_UNUSUAL_CALLER = ("torch's configuration modules",)


def _quiet_part(modes: dict[str, object]) -> dict[str, object]:
    """The quiet settings (:data:`_QUIET`) of a record of :func:`_modes`, those the unusual caller sets read again."""
    quiet = {label: modes[label] for label in _QUIET}
    for label in _SET_BY_THE_UNUSUAL_CALLER:
        quiet[label] = _read(_QUIET[label][0])
    return quiet


def _stacks() -> dict[str, object]:
    """Process-wide stacks a call could leave one entry longer: a saved-tensors hook entered and never left, a
    forward-mode level left open (round 22). A test's own probe enters them around a call, so they are
    compared with the test cell's start (:func:`mark_cell_start`), not put back."""
    return {"saved tensors hooks": torch._C._autograd._top_saved_tensors_default_hooks(False) is not None,
            "saved tensors hooks disabled": not torch._C._autograd._saved_tensors_hooks_is_enabled(),
            "forward AD level": torch.autograd.forward_ad._current_level,
            # a mode entered and never left runs inside every later torch call (round 23)
            "torch function modes": torch._C._len_torch_function_stack(),
            "dispatch modes": torch._C._len_torch_dispatch_stack(),
            "profiler": torch._C._autograd._profiler_enabled(),
            "sparse invariants checked": torch.sparse.check_sparse_tensor_invariants.is_enabled(),
            "native DSL kernels disabled": tuple(map(_NATIVE.is_dsl_disabled, _NATIVE.all_dsls)),
            "global module hooks": tuple(len(hooks) for hooks in _GLOBAL_MODULE_HOOKS),
            "global optimizer hooks": tuple(len(hooks) for hooks in _GLOBAL_OPTIMIZER_HOOKS)}


_NATIVE = torch.backends.python_native
#: torch's registries of hooks on every module and every optimizer (``register_module_forward_hook``,
#: ``register_optimizer_step_pre_hook``, ...): one left registered runs at every later call.
_GLOBAL_MODULE_HOOKS = tuple(hooks for name, hooks in sorted(vars(sys.modules["torch.nn.modules.module"]).items())
                             if name.startswith("_global_") and isinstance(hooks, dict))
_GLOBAL_OPTIMIZER_HOOKS = tuple(hooks for name, hooks in sorted(vars(sys.modules["torch.optim.optimizer"]).items())
                                if name.startswith("_global_") and isinstance(hooks, dict))


#: :func:`_stacks` as the current graded test cell started (``ptchecks.begin``).
_CELL_START: dict[str, object] = {}


def mark_cell_start() -> None:
    """Remember :func:`_stacks` at the start of a graded test cell: one an earlier, unchecked call of this cell
    left longer is reported by the next :func:`call` (it finds them changed before it calls)."""
    _CELL_START.clear()
    _CELL_START.update(_stacks())


#: The entries of :func:`_stacks` that code enters and leaves (a ``with`` block, a mode, a profiler), as the grader's
#: hold found them, before any student code (:func:`stacks_baseline`).
_OPEN_STACKS = ("saved tensors hooks", "saved tensors hooks disabled", "forward AD level", "torch function modes",
                "dispatch modes", "profiler")
_STACKS_BASELINE: dict[str, object] = {}


def stacks_baseline() -> dict[str, object]:
    """:data:`_OPEN_STACKS` as first read: at the grader's hold (``ptchecks.hold_baseline``), else at the first graded
    test cell."""
    if not _STACKS_BASELINE:
        now = _stacks()
        _STACKS_BASELINE.update({label: now[label] for label in _OPEN_STACKS})
    return _STACKS_BASELINE


def stacks_left_open() -> list[str]:
    """What a student's code entered and left open since the baseline, and so runs inside every later call: round
    108 left ``saved_tensors_hooks`` entered (a generator stopped inside its ``with``), whose pack hook called
    ``backward`` inside an answer that never names it; the cell started with the hook on, so comparing with the
    cell's start (:func:`mark_cell_start`) saw nothing."""
    now = _stacks()
    return [label for label, value in stacks_baseline().items() if now[label] != value]


@contextlib.contextmanager
def _unusual_caller(grad_needed: bool) -> Iterator[None]:
    """Run the body as a caller whose modes are not the defaults, then put back what was found.

    A function that ends with ``torch.set_grad_enabled(True)`` or
    ``torch.use_deterministic_algorithms(False)`` leaves a default caller as it found it, and every
    other caller changed: only a call from a caller with other settings tells the two apart. Grad
    mode stays as the caller had it when the part computes gradients (its text says it is called
    with gradients enabled).
    """
    grad, threads = torch.is_grad_enabled(), torch.get_num_threads()
    deterministic = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    torch.set_grad_enabled(grad_needed and grad)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_num_threads(2 if threads == 1 else 1)
    try:
        yield
    finally:
        torch.set_grad_enabled(grad)
        torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        torch.set_num_threads(threads)


def _changed(before: dict[str, object], after: dict[str, object]) -> list[str]:
    return [key for key in before if not _same(before[key], after.get(key))]


def _aliases(result: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """The arguments (or their items) that the result is, or shares a storage with."""
    arguments = {f"argument {i}": value for i, value in enumerate(args)} | kwargs
    inputs = [(path, leaf) for name, value in arguments.items() for path, leaf in _leaves(value, name)]
    found = []
    for _, out in _leaves(result, "result"):
        for path, leaf in inputs:
            if out is leaf and isinstance(leaf, (list, dict, torch.Tensor, torch.nn.Module)):
                found.append(f"is {path}")
            elif _shares_memory(out, leaf):
                found.append(f"shares memory with {path}")
    return sorted(set(found))


def _handed_back(first: object, second: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether the second call's result is, or shares memory with, the first's (not through an input): a
    cached result, which a caller who changes the first in place changes in the second too."""
    arguments = {f"argument {i}": value for i, value in enumerate(args)} | kwargs
    inputs = [leaf for name, value in arguments.items() for _, leaf in _leaves(value, name)]
    earlier = {id(leaf) for _, leaf in _leaves(first, "result") if isinstance(leaf, (list, dict, torch.Tensor))}
    kept = [leaf for _, leaf in _leaves(first, "result") if isinstance(leaf, torch.Tensor)
            and not any(_shares_memory(leaf, held) for held in inputs)]
    return any(id(leaf) in earlier or any(_shares_memory(leaf, held) for held in kept)
               for _, leaf in _leaves(second, "result") if isinstance(leaf, (list, dict, torch.Tensor)))


def _memory(value: object) -> tuple[int, int] | None:
    """The bytes a tensor's storage covers, as [start, end) (None for anything else, a meta tensor or an empty
    storage): two storages can cover the same bytes from different starts (``torch.from_numpy(t.numpy()[1:])``)."""
    if not isinstance(value, torch.Tensor) or value.is_meta or not value.untyped_storage().nbytes():
        return None
    storage = value.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _shares_memory(one: object, other: object) -> bool:
    """Whether two tensors' storages cover some of the same bytes, or are one storage. Not whether their storages
    start at the same address: a storage made from a slice of another (``row.untyped_storage()[8:]``) starts
    elsewhere and is the same memory (round 25). One storage even of no bytes: a view of an empty or a meta
    tensor covers no bytes at all (round 62 returned ``hidden[:, 0]`` for an empty ``hidden``)."""
    return _overlap(_memory(one), _memory(other)) or _storage(one) is not None and _storage(one) == _storage(other)


def _storage(value: object) -> int | None:
    """Which storage a tensor's is (its implementation's address, held while the tensor lives), None for
    anything else."""
    return value.untyped_storage()._cdata if isinstance(value, torch.Tensor) else None


def _overlap(one: tuple[int, int] | None, other: tuple[int, int] | None) -> bool:
    return one is not None and other is not None and one[0] < other[1] and other[0] < one[1]


def _is_global(generator: torch.Generator) -> bool:
    """Whether ``generator`` is the global generator of its device (the CPU's, or a CUDA device's).

    A generator reaches a dispatch mode as a new Python object, so identity cannot tell: the global
    one is reseeded for a moment and ``generator`` is asked whether its seed moved with it."""
    if generator.device.type == "cpu":
        default = torch.default_generator
    elif generator.device.type == "cuda":
        default = torch.cuda.default_generators[generator.device.index or 0]
    else:
        return False
    state, seed = default.get_state(), generator.initial_seed()
    try:
        default.manual_seed(seed ^ 1)
        return generator.initial_seed() == seed ^ 1
    finally:
        default.set_state(state)


class _GlobalDraws(TorchDispatchMode):
    """Sees every random operation that draws from a global generator: one given no generator, or
    a global one by name (``torch.default_generator``).

    Why: a function can save the global state, seed it, draw and put the state back (round 39);
    the state compared before and after never shows it, though the draw changes what any other
    thread draws meanwhile and the text says the generator is not drawn from."""

    def __init__(self) -> None:
        super().__init__()
        self.drawn = False

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if torch.Tag.nondeterministic_seeded in func.tags and not _without_values(result):
            own = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Generator)]
            self.drawn = self.drawn or not own or any(_is_global(generator) for generator in own)
        return result


def _without_values(result: object) -> bool:
    """Whether an operation's results hold no values, so that nothing was drawn for them: fake tensors (a trace,
    such as ``torch.export``'s under ``torch.inference_mode()``, round 65) or meta ones."""
    from torch._subclasses.fake_tensor import is_fake
    from torch.utils._pytree import tree_leaves

    tensors = [leaf for leaf in tree_leaves(result) if isinstance(leaf, torch.Tensor)]
    return bool(tensors) and all(tensor.is_meta or is_fake(tensor) for tensor in tensors)


@contextlib.contextmanager
def answer_running(watcher: _GlobalDraws | None = None) -> Iterator[None]:
    """Around each call of the student's function: no garbage collection, and the global generator's watcher
    (``draws_watched``) if there is one.

    Round 109: a generator left in a reference cycle at the top of a cell ran its ``finally`` at each collection,
    so student code the answer never names ran inside its call (a hook on every module, registered and removed
    there, did the answer's work). With the collector off no code but the answer's, and what it calls, runs
    inside the call; what a collection runs between the calls is seen by the comparisons before and after them.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        with watcher if watcher is not None else contextlib.nullcontext():
            yield
    finally:
        if enabled:
            gc.enable()


def _rng_state() -> list[torch.Tensor]:
    states = [torch.get_rng_state()]
    if torch.cuda.is_available():
        states += torch.cuda.get_rng_state_all()
    return states


class _Interrupt(KeyboardInterrupt):
    """Raised inside the call by :func:`call`'s ``interrupt=`` module."""


class _Exit(BaseException):
    """Raised inside the call too, after :class:`_Interrupt`: neither an ``Exception`` nor a ``KeyboardInterrupt``
    (round 60: modes restored in ``except (Exception, KeyboardInterrupt)`` stayed changed after any other
    ``BaseException``, such as ``SystemExit``; the texts promise them restored whatever the call raises)."""


def _interrupted(module: torch.nn.Module, function: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any], root: torch.nn.Module | None) -> dict[str, object]:
    """Call ``function`` with ``module``'s forward raising KeyboardInterrupt, then another BaseException: what
    stays changed after each."""
    found = _interrupted_by(_Interrupt, module, function, args, kwargs, root)
    other = _interrupted_by(_Exit, module, function, args, kwargs, root)
    return {**found, **{f"{key} (another BaseException)": value for key, value in other.items()}}


def _interrupted_by(kind: type[BaseException], module: torch.nn.Module, function: Callable[..., Any],
                    args: tuple[Any, ...], kwargs: dict[str, Any], root: torch.nn.Module | None) -> dict[str, object]:
    def stop(*_: object) -> None:
        raise kind

    watched = root if root is not None else module
    before = (_modes(), [(n, _flag(m)) for n, m in _submodules(watched)],
              [p.requires_grad for _, p in _members(watched, PARAMETERS)])
    handle = module.register_forward_pre_hook(stop)
    hooks_before = _hook_count(watched)
    reached = False
    try:
        with answer_running():
            function(*args, **kwargs)
    except kind:
        reached = True
    finally:
        hooks_after = _hook_count(watched)
        handle.remove()
    after = (_modes(), [(n, _flag(m)) for n, m in _submodules(watched)],
             [p.requires_grad for _, p in _members(watched, PARAMETERS)])
    return {
        "interrupt reached the caller": reached,
        "modes changed": _changed(before[0], after[0]),
        "training flags changed": before[1] != after[1],
        "requires_grad changed": before[2] != after[2],
        "hooks left behind": hooks_after - hooks_before,
    }


#: The functions :func:`call` met in this kernel, by their labels' first part (before the first ":"): from a
#: function's second case on, its first call must not grow its state either.
_CALLED: set[str] = set()


def _kept_state(function: Callable[..., Any]) -> tuple[object, int, int]:
    """The record of what ``function`` holds (:class:`_Recorder`), how many values it followed, and how many
    characters, bytes and tensor elements they hold. A memo that gained an entry holds more values, a history kept in
    one growing tensor or string more elements; a generator seeded again holds no more of either."""
    recorder = _Recorder()
    return recorder.record(function), _RECORD_LIMIT - recorder.left, recorder.elements


def call(label: str, function: Callable[..., Any], *args: Any, view_allowed: bool = False,
         interrupt: torch.nn.Module | None = None, interrupt_root: torch.nn.Module | None = None,
         rtol: float | None = None, atol: float | None = None, grad_needed: bool = False, key_order: bool = True,
         grads_free: bool = False, draws_watched: bool = False, **kwargs: Any) -> Any:
    """Call ``function(*args, **kwargs)`` three times; send the first result and the contract; return the first.

    The result goes out under ``label`` (a tensor, or a list, tuple or dict holding tensors, item
    by item; anything else as JSON), and what the call did under ``"<label>: contract"`` (the
    module docstring lists it). With ``interrupt``, a fourth call runs with that module raising
    ``KeyboardInterrupt`` from inside, and what it left behind on ``interrupt_root`` (or on the
    module) is sent too. An exception from the first call propagates: the test cell stops there.
    ``view_allowed`` is for a part whose text lets the result be a view of an input or a new
    tensor: then ``aliases`` is not sent. ``rtol`` and ``atol`` (both or neither) widen the
    comparison of the result's tensors, for an operation whose rounding depends on the order of a
    sum (the text states them). ``grad_needed`` is for a part that computes gradients: its second
    call keeps grad mode on. ``key_order=False`` is for a part whose text leaves the order of a returned
    dict's keys free: the result and its type go out with each dict's keys sorted. ``grads_free=True`` is
    for a training step whose text leaves free what a module's parameters hold in ``.grad`` afterwards
    (this batch's gradients, or ``None`` after a last ``zero_grad()``): their ``gradients`` are not recorded.
    ``draws_watched=True`` is for a part whose text says the global generator is not drawn from: every call runs
    under :class:`_GlobalDraws`, and ``drew from the global generator`` says whether any random operation did,
    even one whose state the function put back.
    """
    from ptchecks import emit_tree, _stop_point  # the package's own, recorded in its tamper record

    _stop_point()  # before the function runs three times: the grader may have stopped the cell already
    found = _quiet_settings()
    left = _changed(_quiet_baseline(), found)
    left_changed = left + (_changed(_CELL_START, _stacks()) if _CELL_START else [])
    if left:
        put_back_quiet_settings(found)
        found = _quiet_settings()
    records, modes, rng = _records(args, kwargs, gradients=not grads_free), _modes(found), _rng_state()
    named = label.split(":")[0]
    kept_before = _kept_state(function) if named in _CALLED else None
    _CALLED.add(named)
    watcher = _GlobalDraws() if draws_watched else None
    with answer_running(watcher):
        first = function(*args, **kwargs)
    shown = first if key_order else keys_sorted(first)
    after_first, modes_first = _records(args, kwargs, gradients=not grads_free), _modes()
    kept_after, kept_size, kept_elements = _kept_state(function)
    with _unusual_caller(grad_needed):  # which sets the grad mode, deterministic algorithms and threads only
        unusual = _modes(_quiet_part(modes_first))
        with answer_running(watcher):
            second = function(*args, **kwargs)
        after_unusual = _modes()
    kept_after_second, _, _ = _kept_state(function)
    # the inputs as the second call left them too: a function may change them only when called again (round 23)
    after_second = _records(args, kwargs, gradients=not grads_free)
    # A third call, from the usual caller again: a function that tells the unusual caller apart (its thread count,
    # deterministic algorithms) could keep state, draw, or hand back a cached result on every usual call only,
    # which the second call alone never sees (round 27).
    before_third = _modes(_quiet_part(after_unusual))
    with answer_running(watcher):
        third = function(*args, **kwargs)
    modes_third = _modes()
    kept_after_third, kept_size_third, kept_elements_third = _kept_state(function)
    after_third = _records(args, kwargs, gradients=not grads_free)
    tables_put_back = _put_back_tables()
    results = (first, second, third)
    again = any(_handed_back(earlier, later, args, kwargs)
                for index, earlier in enumerate(results) for later in results[index + 1:])
    same = (_same(first, second, rounding=True) and _same(first, third, rounding=True)
            and type_tree(third if key_order else keys_sorted(third)) == type_tree(shown))
    contract: dict[str, object] = {
        "returns": type_tree(shown),
        "inputs changed": list(dict.fromkeys(_changed(records, after_first) + _changed(records, after_second)
                                             + _changed(records, after_third))),
        # What the later calls changed in the function's own state (its closure, defaults, the globals it names):
        # state that grows or moves at each call. What the first call alone sets (a constant built once, a
        # generator seeded again at each call) is left free, unless it grows the state in a later case: a memo
        # of results, keyed by inputs each case meets first (round 62), is state kept.
        "state kept by the function": not (_same(kept_after, kept_after_second)
                                           and _same(kept_after_second, kept_after_third))
                                      or kept_before is not None and kept_size > kept_before[1],
        # ...and apart from it, whether it held more after the third call than after the first, in values or in
        # elements: an object that keeps its last result changes what it holds at each call (a new tensor each
        # time), and so does one that keeps every result (round 92: a FeatureExtractor's list of every call's
        # features; round 93: one tensor concatenated to), which only this tells apart. The three calls share their
        # inputs, so a last result kept from a later case's larger inputs is no growth.
        "state grows at each call": kept_size_third > kept_size or kept_elements_third > kept_elements,
        "second call": ("the first call's result again" if again else "same result" if same else "a different result"),
        "modes changed": sorted(set(_changed(modes, modes_first) + _changed(unusual, after_unusual)
                                    + _changed(before_third, modes_third) + left_changed
                                    + (["torch's configuration modules"] if tables_put_back else [])
                                    + (["torch's operator registrations"] if _registrations_changed() else []))),
        "global RNG drawn": not _same(rng, _rng_state()),
    }
    if watcher is not None:
        contract["drew from the global generator"] = watcher.drawn
    # the settings as the third call left them, unless a table of torch's configuration was put back since
    put_back_quiet_settings(None if tables_put_back else _quiet_part(modes_third))
    if not view_allowed:
        contract["aliases"] = list(dict.fromkeys(path for result in results for path in _aliases(result, args, kwargs)))
    if interrupt is not None:
        contract["after an interrupt"] = _interrupted(interrupt, function, args, kwargs, interrupt_root)
    emit_tree(label, shown, rtol=rtol, atol=atol)
    emit_tree(f"{label}: contract", contract)
    settled = _arguments_after(contract["inputs changed"], args, kwargs,  # type: ignore[arg-type]
                               gradients=not grads_free)
    if settled:
        values: dict[torch.dtype, list[torch.Tensor]] = {}
        emit_tree(f"{label}: arguments afterwards", _tensors_apart(settled, values), rtol=rtol, atol=atol)
        for dtype, parts in values.items():
            emit_tree(f"{label}: arguments afterwards ({dtype})", torch.cat(parts), rtol=rtol, atol=atol)
    return first
