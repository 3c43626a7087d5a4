"""The code policy of a graded submission, checked by reading the code before any of it runs.

The hidden tests run in the same kernel as the student's code, so a solution cell could rewrite
the checks, the IPython shell or the names the tests read. None of that is needed to solve a lab:
the labs ask for tensor code. So the grader reads every cell a student could have written and
withholds the grade of a submission that reaches for a tool of tampering: an import beyond the
allowed list (or a module beyond it reached as an attribute of an allowed one), the IPython shell, files, dynamic code, attribute names spelled in strings, dunder
attributes, private parts of modules, a change to a module or a class of one (under its own name
or an alias), or a rebinding of a name the set-up or the test cells use.

Dynamic code is refused as a class, not by its spellings: whatever turns a string (or an object's
``repr``) into code is named in :data:`EVALUATES_CODE`, refused under any name or path (an
attribute, an import, a string given to ``getattr``), and the strings such code would read are
refused where they hide (an annotation, a type's subscript). The few callables whose arguments the
policy checks at the call (``getattr``, ``Timer``'s code strings, ``display``) may appear only as
the function of a call, with every argument in sight: never as a value to alias, pass or subclass,
never with ``*``/``**`` unpacking, and an object's class (``type(x)``) only to compare or print.
No object may choose its own display type (``_repr_mimebundle_``, ``display(..., raw=True)``), so
no cell can send an output of the grader's own type. The labs' intro states
the rule in words; ``ALLOWED_IMPORTS`` is its list of modules.

Values the policy cannot follow are refused as a class too, not by their spellings. A module may be used
only by its attributes, aliased by a name, compared or printed: never held as a value (returned, put in a
container or a class, given to a function, a lambda's result), so no module reaches a function's parameter,
whose attributes are the function's own to read and change. A value computed where the policy cannot see
what it is (a function's result, a subscript, a container, a lambda, a conditional or ``:=``, ``getattr``'s
result, or a name bound to one of these) may be a module for all it shows: none of its private attributes
may be read and none of its attributes written (``box()._sys``, ``[torch][0]._C``, ``d["t"].add = f``).
What a function's own arguments give (``self.model.get_submodule(name)``), a class of the cell's own, a
builtin and a module's functions (``torch.ones(2)``) are followed. The names refused by name are refused as
attributes too (``mods["built" + "ins"].exec``), so a name built from pieces of strings reaches nothing.

This is defence in depth, not the wall: the kernel is jailed (:mod:`ptgrader.jail`), so code that
gets past the policy can reach only its own submission's score.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib.util
import re
import string
import symtable
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from IPython.core import magic_arguments
from IPython.core.magic import Magics
from IPython.core.magics.execution import ExecutionMagics

from .ipython_code import as_python, parse
from .reading_budget import to_the_end

#: Top-level modules a solution may import (the labs' intro lists the same ones).
ALLOWED_IMPORTS = frozenset({"torch", "math", "itertools", "functools", "collections", "typing", "dataclasses", "operator"})

#: torch sub-packages that load code or files (or unpickle what they are given), start processes, or replace
#: torch's own behaviour, and the public torch modules and functions that run a shell or another program, or
#: write files where the caller says (found by reading torch 2.13: ``test_policy_names_every_torch_module_that_starts_programs_or_writes``
#: reads the installed torch again and names any new one). DataLoader's worker processes stay: forks of the
#: jailed kernel, within its process limit.
FORBIDDEN_TORCH_PARTS = frozenset(
    {"hub", "cpp_extension", "load_library", "package", "multiprocessing", "distributed", "overrides", "library", "ops",
     "collect_env", "xeon", "run_cpu", "tunable", "file_baton", "hipify", "tensorboard", "bottleneck", "model_zoo",
     "export_chrome_trace", "export_stacks", "export_memory_timeline", "tensorboard_trace_handler",
     "ExecutionTraceObserver",
     # torch.compiler's artifact loaders unpickle the bytes they are given, write files where a key says,
     # and its config steers the caches that torch.compile reads back (a pickle of the cell's own)
     "load_compiled_function", "load_cache_artifacts", "save_cache_artifacts", "config",
     # public modules that unpickle what they read (test_policy_names_every_torch_function_that_unpickles)
     "model_dump", "show_pickle", "valgrind_wrapper",
     # process-wide registries that keep a caller's function and call it later from torch's own code, wherever
     # torch looks a type up (round 106: biject_to.register ran a loop inside an answer that named only torch;
     # test_policy_names_every_torch_registry_of_functions). Hooks on every module or optimizer are counted in
     # every graded test cell instead (ptchecks.left_hooks).
     "constraint_registry", "biject_to", "transform_to", "register_kl", "register_package", "register_flop_formula",
     # round 110: pytree's registry (re-exported by torch.return_types), whose flatten functions torch.vmap, export
     # and compile call on their arguments, and the other registries a test of the public names finds
     "register_pytree_node", "pytree_register_structseq", "register_dataclass", "register_op_impl",
     "register_event_handler", "register_flash_attention_impl", "register_after_fork"}
)

#: Names that evaluate code, reach the shell, touch files or processes, or rewrite attributes.
FORBIDDEN_NAMES = frozenset(
    {
        "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "open", "breakpoint",
        "exit", "quit", "setattr", "delattr", "get_ipython", "__builtins__", "memoryview",
        "help",  # pydoc imports any module named in a string
        # IPython's input and output history: it holds the source of the cell being graded.
        "In", "Out", "_ih", "_oh", "_i", "_ii", "_iii", "_dh", "_exit_code",
    }
)
#: IPython's numbered history (``_3``, the result of the cell run third; ``_i3``, its source): round 99 handed a
#: function to an answer through ``_0``, bound by a bare expression at the end of a cell.
OUTPUT_HISTORY = re.compile(r"^_i?\d+$")

#: What evaluates a string, or an object's ``repr``, as Python code, beyond eval/exec/compile, in the
#: modules a solution may use (found by reading them, torch 2.13, for eval, exec and get_type_hints):
#: typing's annotation resolvers (a string annotation, or a string in a type such as ``List["..."]``, is
#: code to them) and the APIs that resolve a function's annotations (functools' dispatch, torch's data
#: pipes and ONNX translation tables), TorchScript (it also evaluates ``# type:`` comments, which no syntax
#: tree shows), torch.fx (a graph becomes code, its constants written by their repr; ``ep.graph``, a
#: compile backend's ``gm``), dataclasses' class factory (class attributes given as strings) and the
#: benchmark's valgrind runner (a process of its own).
EVALUATES_CODE = frozenset(
    {
        "get_type_hints", "ForwardRef", "_evaluate", "_eval_type", "singledispatch", "singledispatchmethod",
        "datapipes", "IterDataPipe", "MapDataPipe", "argument_validation", "runtime_validation", "onnx",
        "jit", "fx", "GraphModule", "graph_module", "recompile", "python_code", "nodes", "placeholder",
        "create_node", "call_function", "call_method", "call_module", "node_copy", "graph_copy",
        "make_dataclass", "collect_callgrind",
        "cpp_jit", "jiterator",  # C++ and CUDA code given as strings, compiled and loaded
        # sympy, whose expressions (a traced shape's, an exported program's ranges) parse strings with eval
        "sympy", "sympify", "parse_expr", "range_constraints", "node", "expr", "shape_env",
    }
)

#: What publishes a display message of a type the cell chooses (the grader's included): IPython's hooks with
#: which an object picks its own types, and IPython's and the kernel's publishing paths, if reached at all.
CHOOSES_MIME = frozenset(
    {
        "_repr_mimebundle_", "_ipython_display_", "publish_display_data", "update_display", "DisplayHandle",
        "IPython", "ipykernel", "Comm", "iopub_socket",
    }
)

#: What takes objects back out of state a library keeps for the whole process, and what puts them there. typing
#: caches its aliases by value: ``Annotated[int, Half(0.5)]``, made at the top of a cell with an object of the
#: student's float subclass, is what ``Annotated[int, 0.5]`` gives any later code, so ``get_args`` handed that object
#: to an answer that never named it (round 113). Registries behind public getters: ``@typing.overload`` keeps a
#: helper under the module and name it says it has, and ``typing.get_overloads(math.floor)[-1]`` hands it to an answer
#: that names only typing and math; ``torch.serialization.add_safe_globals`` and ``get_safe_globals`` did the same
#: (round 128); ``get_default_custom_config_dict`` hands out quantization's own dict. Found by reading the modules a
#: solution may import for public functions that return what a module keeps in a private global
#: (``test_policy_names_every_getter_of_kept_state``).
HANDS_BACK_STORED = frozenset({"get_args", "get_origin", "overload", "get_overloads", "clear_overloads",
                               "add_safe_globals", "get_safe_globals", "safe_globals", "clear_safe_globals",
                               "get_default_custom_config_dict"})

#: Public functions of torch that hand out a module: through one, a chain of attributes starts at a call, past the
#: imports the policy reads (round 130: ``torch.get_device_module("cpu").torch.serialization.tarfile.bltn_open`` is
#: Python's ``open``, and ``...torch.nn.functional.tf32_notes`` a dict any cell may fill).
#: ``test_policy_names_every_torch_function_that_hands_out_a_module`` reads torch for more.
HANDS_OUT_MODULES = frozenset({"get_device_module", "normalize_storage_type"})

#: Why each name of the lists above is refused, wherever it appears.
_REFUSED_BECAUSE = {
    **{name: "it evaluates strings or reprs as code" for name in EVALUATES_CODE},
    **{name: "it publishes outputs of a type the cell chooses, the grader's included" for name in CHOOSES_MIME},
    **{name: "it keeps objects for the whole process, or hands back what other code kept there"
       for name in HANDS_BACK_STORED},
    **{name: "it hands out a module, past the imports the policy reads" for name in HANDS_OUT_MODULES},
}

#: Parts of a module path that no import may name.
_FORBIDDEN_PARTS = FORBIDDEN_TORCH_PARTS | EVALUATES_CODE | HANDS_BACK_STORED | HANDS_OUT_MODULES

#: Attributes that walk from an object to interpreter internals (frames, code, modules of the runtime), and
#: the forbidden parts of torch however they are reached (``[torch][0].ops`` is torch.ops too).
FORBIDDEN_ATTRIBUTES = (FORBIDDEN_TORCH_PARTS | EVALUATES_CODE | CHOOSES_MIME | HANDS_BACK_STORED | HANDS_OUT_MODULES
                        | frozenset(
    {
        "gi_frame", "gi_code", "cr_frame", "ag_frame", "f_globals", "f_locals", "f_back", "f_builtins", "f_code",
        "tb_frame", "tb_next", "co_code", "os", "sys", "subprocess", "builtins", "importlib", "ctypes", "signal",
        "shutil", "socket", "threading", "inspect", "gc", "pickle", "marshal", "types", "io", "tempfile",
        "sqlite3", "atexit", "resource", "save", "load", "tofile", "fromfile", "from_file", "dump", "savefig", "checks", "LEDGER", "mmap", "pathlib", "glob", "sysconfig", "site", "weakref", "warnings",
        "logging", "traceback", "runpy", "pkgutil", "codeop", "linecache",
    }
))

#: Dunder attributes and method names an honest solution uses (a class's constructor, a context manager).
#: Not ``__contains__``: ``type(x) in box`` would hand the class of any object to the student's method.
ALLOWED_DUNDERS = frozenset(
    {"__init__", "__call__", "__enter__", "__exit__", "__repr__", "__str__", "__len__", "__iter__", "__next__",
     "__getitem__", "__name__", "__post_init__"}
)

#: Names bound by the locked setup cells and Python itself: rebinding one changes what the tests run.
PROTECTED_NAMES = frozenset(dir(builtins)) | {"torch", "nn", "F", "math", "ptlabs", "ptchecks"}

#: The modules those names stand for: a student may import them under these names themselves.
CONVENTIONAL_NAMES = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional", "math": "math"}

#: Dunder names a string may spell (``getattr(x, "__len__")``): the allowed ones but ``__init__``, which would
#: run a constructor again on an existing object, and the name of a script run as a program.
_DUNDER_STRINGS = ALLOWED_DUNDERS - {"__init__"} | {"__main__"}

#: IPython magics a student may use: they time code and run nothing else. Their option letters
#: (IPython's own, IPython/core/magics/execution.py) are read off before the code is read.
ALLOWED_MAGICS = frozenset({"time", "timeit"})
_TIMEIT_OPTIONS = "n:r:tcp:qov:"

#: torch's tensor types: a subclass of any of them can override how it compares.
_TENSOR_TYPES = frozenset({"Tensor", "Parameter", "Buffer", "TensorBase"})
#: Callables that reach an attribute by a name given as a string.
_BY_NAME = frozenset({"getattr", "hasattr", "attrgetter", "methodcaller"})
#: Names that may appear only as the function of a call (what each does is checked at the call, so the
#: same object reached as a value, through an alias, an argument or a base class, would escape the check).
_CALL_ONLY = {
    **{name: "it reaches attributes by computed names" for name in _BY_NAME},
    "Timer": "it runs strings as code",
    "timeit": "it runs strings as code",  # `t.timeit(100)`, never the timeit module itself
    "display": "its options publish any display type",
    **{name: "its assigned= and updated= set attributes by name" for name in ("update_wrapper", "wraps")},
    **{name: "its template's fields read attributes and items by name" for name in ("format", "format_map")},
}
#: functools' wrappers and how many of their arguments come before ``assigned`` and ``updated``: with names of the
#: cell's there, they set any attribute of the wrapper (round 102: ``__code__``, built as ``"_" * 2 + "code"...``,
#: swapped a helper's body for a loop's). Only constant tuples of functools' own names may be given.
_WRAPPERS = {"update_wrapper": 2, "wraps": 1}
_WRAPPER_NAMES = frozenset(functools.WRAPPER_ASSIGNMENTS) | frozenset(functools.WRAPPER_UPDATES)
#: The same for bare names only (``x.device.type`` is a tensor's own attribute).
_CALL_ONLY_NAMES = {"type": "it gives the class of any object"}
#: What ``display`` may take besides the objects, each shown through its own ``_repr_*_`` methods (one fixed
#: type each). Not ``raw``: a dict of any types; not ``display_id``/``update``: outputs rewritten later.
_DISPLAY_OPTIONS = frozenset({"include", "exclude", "clear"})
#: ``torch.utils.benchmark.Timer``'s code strings, in their positional order, and the options it may take
#: (not ``language``: C++ code; not ``global_setup``: C++ only; not ``timer``).
_TIMER_CODE = ("stmt", "setup")
_TIMER_OPTIONS = frozenset({"globals", "label", "sub_label", "description", "num_threads", "env"})
#: Calls that only look at a class: ``type(x)`` given to them yields nothing to call or change.
_LOOKS_AT = frozenset({"print", "str", "repr", "isinstance", "issubclass", "id", "hash"})
#: Builtin classes that a class pattern matches by position against the subject itself (``case int(n)``), reading
#: no attribute.
_SELF_MATCHING = frozenset({"bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list", "set", "str",
                            "tuple"})
#: Builtin classes whose subscript is a type (``list["..."]``: a string in it is code to typing).
_GENERICS = frozenset({"list", "dict", "tuple", "set", "frozenset", "type"})

_magics = Magics.__new__(Magics)
_magics.options_table = {}


@dataclass(frozen=True)
class Finding:
    """One place where a cell breaks the policy."""

    cell: int  # index of the cell in the notebook (0-based)
    line: int  # line in the cell (after IPython's magics were turned into Python)
    what: str

    def __str__(self) -> str:
        return f"cell {self.cell + 1}, line {self.line}: {self.what}"  # counted from 1, as a reader counts


@dataclass(frozen=True)
class LabNames:
    """What a lab's locked cells bind and read: the names a student's cell must leave alone.

    ``setup``: names the locked cells that are not test cells (set-up, bootstrap, given code)
    bind. ``tests_read``: names the test cells read without binding them (``device``, a given
    helper). ``locked``: every name any locked cell binds, test cells' ``expected`` and
    ``reference_*`` included.
    """

    setup: frozenset[str] = frozenset()
    tests_read: frozenset[str] = frozenset()
    locked: frozenset[str] = frozenset()

    @classmethod
    def of(cls, locked_sources: dict[str, str], test_ids: set[str]) -> LabNames:
        setup: set[str] = set()
        read: set[str] = set()
        bound_in_tests: set[str] = set()
        for grade_id, source in locked_sources.items():
            scopes = _global_names(source)
            if scopes is None:
                continue
            bound, loaded = scopes
            if grade_id in test_ids:
                bound_in_tests |= bound
                read |= loaded
            else:
                setup |= bound
        tests_read = read - bound_in_tests - set(dir(builtins))
        return cls(frozenset(setup), frozenset(tests_read), frozenset(setup | bound_in_tests))

    @property
    def guarded(self) -> frozenset[str]:
        """Names a student cell may not bind at its top level: set-up names that the tests read."""
        return self.setup & (self.tests_read | PROTECTED_NAMES)


def _parse(source: str) -> ast.Module | None:
    try:
        return parse(as_python(source))
    except SyntaxError:
        return None


_OWN_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.GeneratorExp)


def _inlined_comprehension_targets(code: str) -> set[str]:
    """Names that a list, set or dict comprehension binds as its loop targets, and nothing else in the cell's
    own scope binds.

    Why: from Python 3.12 on, symtable lists those targets in the enclosing scope (PEP 709 inlines the
    comprehensions), though at run time they stay the comprehension's own and never become notebook globals.
    Empty before 3.12, where each comprehension has a scope of its own.
    """
    if sys.version_info < (3, 12):
        return set()
    targets: set[str] = set()
    elsewhere: set[str] = set()

    def visit(node: ast.AST, in_target: bool) -> None:
        if isinstance(node, _OWN_SCOPES):
            return  # their names are their own (a default or a decorator binds nothing either)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            (targets if in_target else elsewhere).add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child, in_target or (isinstance(node, ast.comprehension) and child is node.target))

    try:
        tree = parse(code)
    except SyntaxError:
        return set()
    visit(tree, False)
    return targets - elsewhere


def _global_names(source: str) -> tuple[set[str], set[str]] | None:
    """(notebook globals a cell binds, notebook globals it reads), by Python's own scope rules (symtable)."""
    try:
        code = as_python(source)
        table = symtable.symtable(code, "<cell>", "exec")
    except SyntaxError:
        return None
    bound = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_assigned() or symbol.is_imported()}
    inlined = _inlined_comprehension_targets(code)
    bound -= inlined
    read = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_referenced()} - inlined
    pending = list(table.get_children())
    while pending:  # functions, classes and comprehensions: the names they take from the notebook
        scope = pending.pop()
        pending += scope.get_children()
        for symbol in scope.get_symbols():
            if symbol.is_global():
                if symbol.is_referenced():
                    read.add(symbol.get_name())
                if symbol.is_declared_global() and symbol.is_assigned():
                    bound.add(symbol.get_name())
    return bound, read


def _last_name(node: ast.AST) -> str:
    """``Tensor`` for ``torch.Tensor`` or ``Tensor``."""
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def root_name(node: ast.AST) -> str | None:
    """The name at the start of an attribute chain (``torch`` for ``torch.nn.functional.relu``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _chain_base(node: ast.AST) -> ast.AST:
    """What an attribute chain starts from: ``model`` for ``model.fc.weight``, the call for ``box()._sys``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


#: Top-level modules a chain's last part may name (``F.torch``, ``typing.collections``: a module's own import), but
#: for the functions of torch that share a name with one (``torch.select``, ``torch.trace``, ``torch.chunk``).
_MODULE_NAMES = (frozenset(sys.stdlib_module_names) - {"select", "trace", "chunk"}) | ALLOWED_IMPORTS | {
    "ptlabs", "ptchecks", "IPython", "ipykernel"}


@functools.lru_cache(maxsize=4096)  # bounded: a cell of 20,000 distinct chains must not stay in the grader's memory
def _is_module_path(dotted: str) -> bool:
    """Whether ``torch.testing._comparison`` names a module, read off the installed files (nothing is imported)."""
    top, *parts = dotted.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if not parts:
        return True
    for location in spec.submodule_search_locations or ():
        folder = Path(location).joinpath(*parts[:-1])
        name = parts[-1]
        if (folder / name / "__init__.py").is_file() or (folder / f"{name}.py").is_file():
            return True
        if any(found.suffix in (".so", ".pyd") for found in folder.glob(f"{name}.*")):
            return True
    return False


#: Top-level packages whose modules a chain of attributes may reach: what a student may import, and the book's own.
_REACHABLE_PACKAGES = ALLOWED_IMPORTS | {"ptlabs", "ptchecks"}


@functools.lru_cache(maxsize=4096)
def _foreign_module_on(dotted: str) -> str:
    """The first module outside :data:`_REACHABLE_PACKAGES` (or with a forbidden part) that the attribute chain
    ``dotted`` reaches from an allowed module, read off the real objects ("" when none).

    Why: a module holds every module it imported as an attribute, so ``ptlabs.data.np`` is numpy and
    ``torch.serialization.zipfile`` is zipfile, whatever the import list says. An outside round reached
    numpy's Fortran reader, which ``eval``s what it reads, as ``ptlabs.data.np.f2py``. Only modules are
    walked (an attribute of a module runs no student code); the walk stops at the first object that is
    not a module. A submodule the grader has not loaded is loaded as the kernel may have (round 57: the warm
    kernels preload more of torch than the grader, which attaches ``torch.utils.benchmark.utils.common`` and its
    ``time`` to their parents), so the answer depends on the installed packages only, never on what this process
    or an earlier student happened to import (:func:`_loaded_attribute`).
    """
    top, *parts = dotted.split(".")
    if top not in _REACHABLE_PACKAGES or not parts:
        return ""
    # imported on its own thread even when sys.modules holds it: a reading the budget stopped may have left its
    # import running there, and only the import system waits for it to end
    current = to_the_end(functools.partial(_imported, top))
    for part in parts:
        if not isinstance(current, type(sys)):
            return ""
        submodule = f"{current.__name__}.{part}"
        if part.startswith("_") and part not in vars(current):
            return ""  # a private module not loaded: the private-attribute rule refuses the chain, nothing imported
        if set(submodule.split(".")) & _FORBIDDEN_PARTS and part not in vars(current):
            return submodule if _is_module_path(submodule) else ""  # refused without importing it
        current = _loaded_attribute(current, part)
        if not isinstance(current, type(sys)):
            return ""
        name = current.__name__
        if name.split(".")[0] not in _REACHABLE_PACKAGES or set(name.split(".")) & _FORBIDDEN_PARTS:
            return name
    return ""


def _imported(dotted: str) -> object:
    """The installed module ``dotted``, as the kernel imports it (None when it cannot be imported)."""
    try:
        return importlib.import_module(dotted)
    except ImportError:
        return None


def _loaded_attribute(module: ModuleType, name: str) -> object:
    """``getattr(module, name)`` as the kernel may find it, or None where that fails: a module's own attribute is read
    off its dict (no code runs); a submodule on disk is imported, and an attribute that a module's ``__getattr__``
    makes (a lazy import) is made, by :func:`to_the_end`, where the reading budget cannot stop an import halfway."""
    found = vars(module).get(name, _ABSENT)
    if found is not _ABSENT:
        return found
    submodule = f"{module.__name__}.{name}"
    if _is_module_path(submodule):
        return to_the_end(functools.partial(_imported, submodule))
    return to_the_end(functools.partial(_attribute_or_none, module, name))


_ABSENT = object()


def _attribute_or_none(owner: object, name: str) -> object:
    try:
        return getattr(owner, name)
    except Exception:  # noqa: BLE001  (a lazy attribute that fails to load: nothing reached)
        return None


def _is_by_name(node: ast.AST) -> bool:
    """``getattr(x, "name")``: an attribute reached by a constant name."""
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
        and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
    )


def _is_chain(node: ast.AST) -> bool:
    """A plain name or attribute chain (``torch.nn``, ``F``): what an alias of a module or class looks like."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _holds_string(node: ast.AST) -> bool:
    """Whether a string constant is anywhere in ``node`` (``"int"``, ``List["x"]``, ``Optional[tuple["y"]]``)."""
    return any(isinstance(inner, ast.Constant) and isinstance(inner.value, str) for inner in ast.walk(node))


def _unpacks(node: ast.Call) -> bool:
    """``f(*args)`` or ``f(**kwargs)``: arguments the policy cannot read."""
    return any(isinstance(arg, ast.Starred) for arg in node.args) or any(k.arg is None for k in node.keywords)


def _names_themselves(node: ast.AST) -> bool:
    """``{"f": f, "x": x}``: a namespace that binds each name to the notebook's value of that name, so that code
    run in it reads what the cell reads (``{"t": torch}`` would hide a module under a name the policy
    does not know)."""
    return isinstance(node, ast.Dict) and all(
        isinstance(key, ast.Constant) and isinstance(value, ast.Name) and key.value == value.id
        for key, value in zip(node.keys, node.values, strict=True)
    )


def _is_super_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _looked_at(tree: ast.AST) -> set[int]:
    """ids of the expressions that are only compared, printed or named (``type(x) is T``, ``print(type(x))``,
    ``f"{type(x)}"``, ``type(x).__name__``): a class there gives nothing to call or change (no student class
    can receive it: ``__eq__`` and ``__contains__`` are not among the dunders a student may define)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            found |= {id(node.left), *map(id, node.comparators)}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _LOOKS_AT:
            found |= set(map(id, node.args))
        elif isinstance(node, ast.FormattedValue):
            found.add(id(node.value))
        elif isinstance(node, ast.Attribute) and node.attr == "__name__":
            found.add(id(node.value))
    return found


def _reads_by_field(template: str) -> bool:
    """Whether a format template has a field, or a field nested in a format spec, that reads an attribute or an
    item (``{0.walk}``, ``{0[k]}``, ``{0:{1.width}}``), or does not parse."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return True
    return any(name is not None and ("." in name or "[" in name) or spec and "{" in spec and _reads_by_field(spec)
               for _, name, spec, _ in fields)


def _bad_attribute(name: str) -> str:
    """Why an attribute name spelled in a string is refused ("" when it is harmless)."""
    if name.startswith("__") and name.endswith("__"):
        return "" if name in _DUNDER_STRINGS else f"the dunder attribute {name}"
    if name.startswith("_"):
        return f"the private attribute {name}"
    if name in FORBIDDEN_ATTRIBUTES or name in FORBIDDEN_NAMES:
        return f"the attribute {name}"
    return ""


#: The symbol-table names of the scopes of a cell's nodes (Python 3.11 gives each comprehension a scope).
_SCOPE_NAMES = {ast.Lambda: "lambda", ast.ListComp: "listcomp", ast.SetComp: "setcomp", ast.DictComp: "dictcomp",
                ast.GeneratorExp: "genexpr"}


@dataclass
class _Scopes:
    """Where a name used in a cell comes from, by Python's own scope rules (symtable): this cell, or another cell.

    Why: a cell's own aliases of modules are known (``t = torch.testing``), another cell's are not, so a
    name from another cell may be a module for all the policy can tell, and nothing of it may be changed.
    """

    bound_here: set[str]  # notebook globals this cell binds
    stack: list[symtable.SymbolTable]
    inner: dict[tuple[str, int], list[symtable.SymbolTable]]  # (scope name, line) -> its tables, in source order

    @classmethod
    def of(cls, code: str) -> _Scopes | None:
        """The scopes of ``code``, or None where Python would refuse to compile it (and so to run it)."""
        try:
            top = symtable.symtable(code, "<cell>", "exec")
        except SyntaxError:
            return None
        inner: dict[tuple[str, int], list[symtable.SymbolTable]] = {}
        pending = list(top.get_children())
        while pending:
            table = pending.pop(0)
            inner.setdefault((table.get_name(), table.get_lineno()), []).append(table)
            pending += table.get_children()
        names = _global_names(code)
        return cls(names[0] if names else set(), [top], inner)

    def enter(self, name: str, line: int) -> None:
        """Step into the scope that ``name`` opens on ``line`` (the one around it when none is known)."""
        tables = self.inner.get((name, line))
        self.stack.append(tables.pop(0) if tables else self.stack[-1])

    def leave(self) -> None:
        self.stack.pop()

    def is_parameter(self, name: str) -> bool:
        """Whether ``name``, where it is used now, is a parameter of a function around it (``self``, ``model``)."""
        for table in reversed(self.stack):
            if table.get_type() == "module":
                return False
            if name in table.get_identifiers():
                symbol = table.lookup(name)
                if symbol.is_parameter():
                    return True
                if not symbol.is_free():
                    return False
        return False

    def from_elsewhere(self, name: str) -> bool:
        """Whether ``name``, where it is used now, is a notebook global that this cell does not bind."""
        table = self.stack[-1]
        if table.get_type() != "module" and name in table.get_identifiers():
            symbol = table.lookup(name)
            if symbol.is_local() or symbol.is_parameter() or symbol.is_free():
                return False
        return name not in self.bound_here and name not in PROTECTED_NAMES


@dataclass
class _Reader(ast.NodeVisitor):
    """Collects the policy findings of one cell."""

    cell: int
    module_names: set[str]  # names bound to modules or their classes (imports, aliases, setup imports)
    setup_modules: dict[str, str]
    lab: LabNames
    banned: set[str] = field(default_factory=set)  # names the setup bound to modules students may not use
    findings: list[Finding] = field(default_factory=list)
    depth: int = 0  # 0 at the cell's top level, where a binding is a notebook global
    called: set[int] = field(default_factory=set)  # ids of the nodes that are the function of a call
    calls: dict[int, ast.Call] = field(default_factory=dict)  # the same ids -> their calls
    looked_at: set[int] = field(default_factory=set)  # ids of the expressions only compared or printed
    scopes: _Scopes | None = None  # where each name comes from (set before the visit)
    #: names this cell binds to computed values that may be modules (``m = box()``), found by a first reading
    computed: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)  # functions this cell defines: they may return anything
    module_paths: dict[str, str] = field(default_factory=dict)  # name -> the module path it was imported from
    parents: dict[int, ast.AST] = field(default_factory=dict)  # id(node) -> the node around it

    def scan_code(self, code: str) -> list[Finding]:
        """The findings of code this cell runs from a string (a magic's, Timer's), knowing the cell's modules."""
        return scan_cell(code, self.cell, {**self.setup_modules, **self.module_paths}, lab=self.lab,
                         modules=frozenset(self.module_names))

    def value_use(self, node: ast.AST, name: str, table: dict[str, str]) -> None:
        """Flag a call-only name (``getattr``, ``Timer``) that appears other than as the function of a call."""
        if name in table and id(node) not in self.called:
            self.flag(node, f"uses {name} as a value ({table[name]})")

    def flag(self, node: ast.AST, what: str) -> None:
        self.findings.append(Finding(self.cell, getattr(node, "lineno", 0), what))

    # ------------------------------------------------------------------------------ imports

    def check_import(self, node: ast.AST, module: str) -> None:
        top = module.split(".")[0]
        parts = set(module.split("."))
        if top not in ALLOWED_IMPORTS:
            self.flag(node, f"imports {module} (allowed: {', '.join(sorted(ALLOWED_IMPORTS))})")
        elif parts & _FORBIDDEN_PARTS or any(part.startswith("_") for part in parts):
            self.flag(node, f"imports {module}, a part of torch the labs do not allow")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.check_import(node, alias.name)
            # `import a.b` binds `a` to the package a; `import a.b as c` binds `c` to a.b
            bound, imported = (alias.asname, alias.name) if alias.asname else (alias.name.split(".")[0],) * 2
            if self.depth == 0:  # `import math` binds math to math: harmless (check_binding knows)
                self.check_binding(node, bound, imported=imported)
            self.module_names.add(bound)
            self.module_paths[bound] = imported

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.check_import(node, "." * node.level + (node.module or ""))
        for alias in node.names:
            if alias.name == "*" or alias.name in FORBIDDEN_NAMES or alias.name in FORBIDDEN_TORCH_PARTS:
                self.flag(node, f"imports {alias.name!r} from {node.module}")
            elif _bad_attribute(alias.name):
                self.flag(node, f"imports {_bad_attribute(alias.name)} from {node.module}")
            elif alias.name in _CALL_ONLY and alias.asname not in (None, alias.name):
                self.flag(node, f"imports {alias.name} as {alias.asname} ({alias.name} is used only by its own name)")
            bound = alias.asname or alias.name
            if self.depth == 0:
                self.check_binding(node, bound, imported=f"{node.module}.{alias.name}")
            self.module_names.add(bound)  # a module or one of its classes or functions: never to be changed
            if not node.level and node.module:
                self.module_paths[bound] = f"{node.module}.{alias.name}"

    # ----------------------------------------------------------------------------- bindings

    def check_binding(self, node: ast.AST, name: str, *, imported: str = "") -> None:
        # Importing a module under its usual name (``import torch.nn.functional as F``) changes nothing.
        if imported and (CONVENTIONAL_NAMES.get(name) == imported or name == imported):
            return
        if name in PROTECTED_NAMES:
            self.flag(node, f"rebinds {name!r}, a name the setup or Python defines")
        elif name in self.lab.guarded:
            self.flag(node, f"rebinds {name!r}, which the lab's set-up defines and its tests read")
        elif name.startswith("_ptgrader"):
            self.flag(node, f"rebinds {name!r}, a name of the grader")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_NAMES or node.id in self.banned:
            self.flag(node, f"uses {node.id}")
        elif node.id in _REFUSED_BECAUSE:
            self.flag(node, f"uses {node.id} ({_REFUSED_BECAUSE[node.id]})")
        elif OUTPUT_HISTORY.match(node.id):
            self.flag(node, f"uses {node.id} (IPython's history of earlier cells' results and inputs)")
        elif node.id.startswith("__") and node.id.endswith("__") and node.id not in ALLOWED_DUNDERS:
            self.flag(node, f"uses {node.id}")
        else:
            self.value_use(node, node.id, {**_CALL_ONLY, **_CALL_ONLY_NAMES})
        if isinstance(node.ctx, ast.Load):
            self._held_module(node)
        if isinstance(node.ctx, (ast.Store, ast.Del)) and self.depth == 0:
            self.check_binding(node, node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._aliases(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._annotation(node.annotation)
        if node.value is not None:
            self._aliases([node.target], node.value)
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        self._annotation(node.annotation)
        self.generic_visit(node)

    def _annotation(self, node: ast.expr | None) -> None:
        """An annotation is code to whatever resolves it (typing, functools.singledispatch, torch): no strings."""
        if node is not None and _holds_string(node):
            self.flag(node, "puts a string in an annotation (what resolves annotations evaluates it as code)")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        """``List["..."]``, ``dict[str, "..."]``: a string in a type is code to typing, annotation or not."""
        value = node.value
        is_type = (isinstance(value, ast.Name) and value.id in _GENERICS) or (
            _is_chain(value) and root_name(value) in self.module_names
        )
        if is_type and _holds_string(node.slice):
            self.flag(node, "puts a string in a type (typing evaluates it as code)")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        """Strings that spell what the policy refuses by name (attributes reached by a string, the grader's type)."""
        value = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
        if not isinstance(value, str):
            return
        if "ptgrader" in value.lower():
            self.flag(node, "spells the grader's name in a string (its display type is the grader's alone)")
        elif value in _REFUSED_BECAUSE:
            self.flag(node, f"spells {value!r} in a string ({_REFUSED_BECAUSE[value]})")
        elif value.isidentifier() and value.startswith("__") and value.endswith("__") and value not in _DUNDER_STRINGS:
            self.flag(node, f"spells the dunder name {value} in a string")

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._aliases([node.target], node.value)
        self.generic_visit(node)

    def _aliases(self, targets: list[ast.expr], value: ast.expr) -> None:
        """``T = torch.Tensor``, ``t = torch``, ``T = type(x)``: the new name is a module (or class) too."""
        values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        for target in targets:
            names = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            for name, item in zip(names, values if len(values) == len(names) else values * len(names), strict=False):
                is_type = isinstance(item, ast.Call) and isinstance(item.func, ast.Name) and item.func.id == "type"
                if not isinstance(name, ast.Name):
                    continue
                if is_type or (_is_chain(item) and root_name(item) in self.module_names) or self._module_path(item):
                    self.module_names.add(name.id)
                    path = self._module_path(item)
                    if path:
                        self.module_paths[name.id] = path
                elif self._computed(item, elsewhere=False):  # `m = box()`: a module, for all the policy can tell
                    self.computed.add(name.id)

    def visit_For(self, node: ast.For | ast.AsyncFor | ast.comprehension) -> None:
        """``for m in box():``, ``[m for m in (torch,)]``: each item of a computed value is one too."""
        if self._computed(node.iter, elsewhere=False):
            self.computed |= {name.id for name in ast.walk(node.target) if isinstance(name, ast.Name)}
        self.generic_visit(node)

    visit_AsyncFor = visit_comprehension = visit_For

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name and self.depth == 0:
            self.check_binding(node, node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name and self.depth == 0:
            self.check_binding(node, node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name and self.depth == 0:
            self.check_binding(node, node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest and self.depth == 0:
            self.check_binding(node, node.rest)
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        """``case object(__globals__=g)`` reads those attributes of whatever is matched: each is checked as an
        attribute of a value the policy cannot follow (round 114: ``__metadata__`` of a cached typing alias, and
        ``__builtins__`` of a function, which reached ``eval``)."""
        if node.patterns and not (isinstance(node.cls, ast.Name) and node.cls.id in _SELF_MATCHING):
            # a positional pattern reads what the class's __match_args__ names, which the cell does not show
            # (round 115: GradientEdge(n, i) read .node)
            self.flag(node, f"matches {ast.unparse(node.cls)}(...) by position (it reads the attributes its"
                            " __match_args__ names; name them: `case C(attr=x)`)")
        for attr in node.kwd_attrs:
            if attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
                self.flag(node, f"reads the attribute {attr} in a class pattern")
            elif attr in FORBIDDEN_ATTRIBUTES or attr in FORBIDDEN_NAMES:
                self.flag(node, f"reads .{attr} in a class pattern")
            elif attr.startswith("_"):
                self.flag(node, f"reads the private attribute {attr} in a class pattern (of a value, for all the"
                                " policy can tell, a module)")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self._declared(node, node.names, "global")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self._declared(node, node.names, "nonlocal")

    def _declared(self, node: ast.AST, names: list[str], keyword: str) -> None:
        for name in names:
            if name in PROTECTED_NAMES or name in self.lab.locked or name in self.lab.tests_read:
                self.flag(node, f"declares {name!r} {keyword}: a name the lab's locked cells use")
            else:
                self.check_binding(node, name)

    # --------------------------------------------------------------------------- attributes

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        root = root_name(node)
        computed = self._computed(node.value)
        if isinstance(node.ctx, ast.Load):
            self._held_module(node)
        foreign = _foreign_module_on(self._module_path(node))
        if foreign and not _foreign_module_on(self._module_path(node.value)):  # named once, where the chain leaves
            self.flag(node, f"reaches the module {foreign} through an attribute (allowed: "
                            f"{', '.join(sorted(ALLOWED_IMPORTS))})")
        if attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
            self.flag(node, f"uses the attribute {attr}")
        elif attr == "__init__" and not _is_super_call(node.value):
            self.flag(node, "uses __init__ of an existing object (only super().__init__(): it re-runs a constructor)")
        elif attr in _REFUSED_BECAUSE:
            self.flag(node, f"uses .{attr} ({_REFUSED_BECAUSE[attr]})")
        elif attr == "graph" and not (_is_chain(node.value) and root in self.module_names):
            self.flag(node, "uses .graph of an object (a torch.fx graph, which becomes code)")
        elif attr in FORBIDDEN_ATTRIBUTES:
            self.flag(node, f"uses .{attr}")
        elif attr in FORBIDDEN_NAMES and not self._honest_method(node, computed):
            self.flag(node, f"uses .{attr} (refused as a name, so as an attribute too)")
        elif attr.startswith("_") and (root in self.module_names or self._from_elsewhere(root)):
            self.flag(node, f"uses the private attribute {root}...{attr}")
        elif attr.startswith("_") and computed and attr not in ALLOWED_DUNDERS:
            self.flag(node, f"uses the private attribute {attr} of a computed value (a module, for all the policy can tell)")
        else:
            self.value_use(node, attr, _CALL_ONLY)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            if root in self.module_names or root in PROTECTED_NAMES:
                self.flag(node, f"changes {root}...{attr}, which belongs to a module or to Python")
            elif root is None or computed:  # `[type(x)][0].add = f`, `box().add = f`: a module or class, for all it shows
                self.flag(node, f"changes the attribute {attr} of an expression or of a name bound to one (a module, "
                                f"for all the policy can tell; only of a name: `model.{attr} = ...`)")
            elif self._from_elsewhere(root):
                self.flag(node, f"changes {root}...{attr}, and {root} comes from another cell (a module, for all it shows)")
        self.generic_visit(node)

    def _honest_method(self, node: ast.Attribute, computed: bool) -> bool:
        """``model.eval()`` and ``torch.compile(f)``/``model.compile()``: the methods of the same names as the builtins,
        told apart by their arguments (``eval`` takes none) or by what they are read from (a name, not a computed value)."""
        call = self.calls.get(id(node))
        if node.attr == "eval":
            return call is not None and not call.args and not call.keywords
        return node.attr == "compile" and not computed

    # ------------------------------------------------------------------------ values that may be modules

    def _computed(self, node: ast.AST, *, elsewhere: bool = True) -> bool:
        """Whether ``node``'s value is computed where the policy cannot follow it, so that it may be a module or one of
        its classes (``box()`` when box returns collections, ``[torch][0]``, ``d["t"]``, ``(lambda: math)()``,
        ``getattr(torch, "testing")``, ``m`` after ``m = box()``): none of its private parts may be read, and none of its
        attributes written. What a function's own arguments give (``self.model.get_submodule(name)``), a class this
        cell defines (``Net()``), a builtin (``next(...)``), a module's own function (``torch.ones(2)``) or a name bound
        to one of these (``a = torch.randn(3)``, then ``a.sigmoid()``) is not."""
        base = _chain_base(node)
        if isinstance(base, ast.Name):  # `m` after `m = box()`, `get = box`: a function of the cell's may return anything
            return (base.id in self.computed or base.id in self.functions) and not self._is_parameter(base.id)
        if isinstance(base, (ast.Constant, ast.JoinedStr, ast.BinOp, ast.UnaryOp, ast.Compare)) or _is_super_call(base):
            return False
        if not isinstance(base, (ast.Call, ast.Subscript)):
            # a container, a lambda, a conditional, a walrus, a boolean operation, a comprehension: read there, it may
            # hold anything; bound to a name, what it holds decides (a module in it is refused where it is put)
            return elsewhere or isinstance(base, ast.Lambda) or any(
                isinstance(inner, ast.Lambda) or self._names_module(inner) or (isinstance(inner, ast.Name) and (
                    inner.id in self.functions or self._computed(inner, elsewhere=False)))
                or (isinstance(inner, ast.Call) and _last_name(inner.func) in _BY_NAME)
                for inner in ast.walk(base) if inner is not base
            )
        if _is_by_name(base):  # `getattr(model, "weight")`: what it is read from decides
            obj, root = base.args[0], root_name(base.args[0])
            return self._computed(obj, elsewhere=elsewhere) or root in self.module_names or (
                elsewhere and self._from_elsewhere(root) and not self._is_parameter(root or ""))
        origin: ast.AST = base
        while isinstance(origin, (ast.Attribute, ast.Subscript, ast.Call)):
            origin = origin.func if isinstance(origin, ast.Call) else origin.value
        if not isinstance(origin, ast.Name):
            return self._computed(origin, elsewhere=elsewhere)
        name = origin.id
        if name in _BY_NAME or name in self.computed or name in self.functions:
            return True  # `getattr(torch, "testing")`, `d["t"]`, `box()`: whatever they were given or return
        # another cell's, as for `t.assert_close = f` (not for a name bound to it: `model = build(); model.head = h`)
        return elsewhere and self._from_elsewhere(name) and not self._is_parameter(name)

    def _is_parameter(self, name: str) -> bool:
        return self.scopes is not None and self.scopes.is_parameter(name)

    def _module_path(self, node: ast.AST) -> str:
        """``torch.testing`` for ``t.testing`` after ``import torch as t`` ("" when the chain does not start at a module)."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if _is_by_name(node):  # `getattr(typing, "collections")`: the attribute named, of the module given
            inner = self._module_path(node.args[0])
            return f"{inner}.{node.args[1].value}" if inner else ""
        if not isinstance(node, ast.Name) or self._is_parameter(node.id):
            return ""
        # `collections` from another cell is the module of that name, for all the policy can tell
        path = self.module_paths.get(node.id) or (node.id if node.id in ALLOWED_IMPORTS and self._from_elsewhere(node.id) else "")
        return ".".join([path, *reversed(parts)]) if path else ""

    def _names_module(self, node: ast.AST) -> bool:
        """``torch``, ``F``, ``torch.testing``, ``typing.collections``, ``getattr(typing, "collections")``: a module."""
        if not isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
            return False
        path = self._module_path(node)
        return bool(path) and (_is_module_path(path) or path.rsplit(".", 1)[-1] in _MODULE_NAMES)

    def _held_module(self, node: ast.Name | ast.Attribute | ast.Call) -> None:
        """A module held as a value (returned, put in a container, given to a function, a lambda's result, a default)
        escapes every rule above: ``def box(): return collections``, then ``box()._sys``. Only its attributes may be
        used, and it may be aliased by a name (``t = torch.testing``), compared or printed."""
        if not self._names_module(node):
            return
        child: ast.AST = node
        parent = self.parents.get(id(node))
        while isinstance(parent, ast.NamedExpr):  # `(m := torch)` is torch wherever it stands
            child, parent = parent, self.parents.get(id(parent))
        if isinstance(parent, ast.Attribute) and parent.value is child:
            return
        if isinstance(parent, ast.Call):
            function = parent.func.id if isinstance(parent.func, ast.Name) else ""
            if parent.func is child or function in _LOOKS_AT:
                return
            if function in ("getattr", "hasattr") and parent.args[:1] == [child]:
                return
        if isinstance(parent, (ast.Compare, ast.FormattedValue, ast.Expr)):
            return
        in_class = self.scopes is not None and self.scopes.stack[-1].get_type() == "class"  # `class B: m = math`
        if isinstance(parent, ast.Assign) and all(isinstance(t, ast.Name) for t in parent.targets) and not in_class:
            return
        if isinstance(parent, ast.AnnAssign) and isinstance(parent.target, ast.Name) and not in_class:
            return
        if isinstance(parent, ast.Dict) and self._timer_globals(parent):
            return
        name = ast.unparse(node)
        self.flag(node, f"holds the module {name} as a value (a module may only be used by its attributes or aliased by a name)")

    def _timer_globals(self, namespace: ast.Dict) -> bool:
        """``Timer(..., globals={"torch": torch})``: the names the timed code reads, each under its own name."""
        keyword = self.parents.get(id(namespace))
        call = self.parents.get(id(keyword))
        return (
            isinstance(keyword, ast.keyword) and keyword.arg == "globals" and isinstance(call, ast.Call)
            and _last_name(call.func) == "Timer" and _names_themselves(namespace)
        )

    def _from_elsewhere(self, name: str | None) -> bool:
        return name is not None and self.scopes is not None and self.scopes.from_elsewhere(name)

    def visit_Call(self, node: ast.Call) -> None:
        self.called.add(id(node.func))
        self.calls[id(node.func)] = node
        if _allowed_magic(node):
            # %time / %%timeit run their argument as code: read that code instead of the shell call.
            for what, code in _magic_code(node):
                if code is None:
                    self.flag(node, f"in %{node.args[0].value}: {what} does not parse as Python")
                    continue
                self.findings += [
                    Finding(self.cell, getattr(node, "lineno", 0), f"in %{node.args[0].value}: {finding.what}")
                    for finding in self.scan_code(code)
                ]
            return
        name = _last_name(node.func)
        if _is_by_name(node):
            self._held_module(node)
        if name in _BY_NAME:
            self._by_name(node, name)
        elif name == "type" and isinstance(node.func, ast.Name):
            self._type(node)
        elif name == "Timer":
            self._timer(node)
        elif name == "display":
            self._display(node)
        elif name in _WRAPPERS:
            self._wrapper(node, name)
        elif name in ("format", "format_map") and isinstance(node.func, ast.Attribute):
            self._format(node)
        elif name == "compile" and any(k.arg in ("options", None) for k in node.keywords):
            self.flag(node, "torch.compile(options=...): the compiler's settings name programs to run (its C++ compiler)")
        self.generic_visit(node)

    def _wrapper(self, node: ast.Call, name: str) -> None:
        """``update_wrapper``/``wraps``: ``assigned`` and ``updated``, if given, are constant tuples of functools'
        own attribute names (``updated=()`` is fine; a name built at run time is ``setattr``). And ``updated``
        copies another object's whole namespace (``__dict__``, the default) only into the def ``@wraps(...)``
        decorates, where the reading of the def reads the wrapped object too: called otherwise, it sets
        attributes no line of the cell names (round 106: ``update_wrapper(_tools, _Src)`` gave a def a loop as
        ``_tools.impl``)."""
        given = [*node.args[_WRAPPERS[name]:], *(keyword.value for keyword in node.keywords)]
        if any(keyword.arg not in ("assigned", "updated") for keyword in node.keywords):
            self.flag(node, f"{name} with arguments the policy cannot read")
        for names in given:
            if not (isinstance(names, (ast.Tuple, ast.List))
                    and all(isinstance(item, ast.Constant) and item.value in _WRAPPER_NAMES for item in names.elts)):
                self.flag(node, f"{name} with assigned= or updated= other than functools' own names"
                                " (it sets attributes by name)")
        updated = ([keyword.value for keyword in node.keywords if keyword.arg == "updated"]
                   or node.args[_WRAPPERS[name] + 1:_WRAPPERS[name] + 2])
        copies = not updated or any(isinstance(item, ast.Constant) and item.value == "__dict__"
                                    for item in getattr(updated[0], "elts", ()))
        parent = self.parents.get(id(node))
        decorates = isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in parent.decorator_list
        if copies and not (name == "wraps" and decorates):
            self.flag(node, f"{name} copying another object's attributes (updated= with '__dict__', the default) other"
                            " than as the decorator of a def: give updated=()")

    def _display(self, node: ast.Call) -> None:
        """``display(x)`` shows x in the types its own methods give; its other options are refused."""
        for keyword in node.keywords:
            if keyword.arg not in _DISPLAY_OPTIONS:
                allowed = ", ".join(sorted(_DISPLAY_OPTIONS))
                self.flag(node, f"display({keyword.arg or '**'}=...) (allowed: the objects, {allowed})")

    def _type(self, node: ast.Call) -> None:
        """``type(name, bases, namespace)`` makes a class; ``type(x)`` gives one, which may only be compared or printed
        (called, it would be a way around every check made at a call: ``type(timer)(stmt=...)``)."""
        if len(node.args) == 3:
            self.flag(node, "makes a class with type(name, bases, namespace)")
        elif id(node) not in self.looked_at:
            self.flag(node, "uses type(x) other than to compare or print it (a class, to call or to change)")

    def _by_name(self, node: ast.Call, name: str) -> None:
        """getattr(x, "name"), attrgetter("a.b"), methodcaller("name"): the names must be constant and harmless."""
        strings = node.args[1:2] if name in ("getattr", "hasattr") else node.args[:1]
        if name == "attrgetter":
            strings = node.args
        if not strings or node.keywords and name != "methodcaller":
            self.flag(node, f"{name} without a constant attribute name")
            return
        for argument in strings:
            if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
                self.flag(node, f"{name} with a computed attribute name")
                continue
            for part in argument.value.split("."):
                why = _bad_attribute(part) or (  # ``getattr(template, "format")(obj)``: checked where called by name
                    f"{part}, which may only be called by name ({_CALL_ONLY[part]})" if part in _CALL_ONLY else "")
                if why:
                    self.flag(node, f"{name} reaching {why}")

    def _format(self, node: ast.Call) -> None:
        """``template.format(...)`` and ``format_map``: a field such as ``{0.walk}`` or ``{0[k]}`` reads an attribute
        or an item by a name in a string, as ``getattr`` does, so only a constant template whose fields read none
        (round 122: ``("{0.walk}" * n).format(obj)`` ran a property of the student's once per row, under no name
        the source shows). An f-string reads the same, in code the policy sees."""
        template = node.func.value
        if isinstance(template, ast.Name) and template.id == "str" and node.args:  # str.format(template, ...)
            template = node.args[0]
        if not (isinstance(template, ast.Constant) and isinstance(template.value, str)):
            self.flag(node, f".{node.func.attr}() of a template built at run time (its fields may read any attribute;"
                            " use an f-string)")
            return
        if _reads_by_field(template.value):
            self.flag(node, f".{node.func.attr}() with a field that reads an attribute or an item (use an f-string)")

    def _timer(self, node: ast.Call) -> None:
        """``Timer(stmt="...", setup="...")`` runs its strings as code: every argument in sight, only Python's
        options, and the strings read as the cell's own code."""
        if _unpacks(node):
            self.flag(node, "Timer(*.../**...) with arguments the policy cannot read")
        if len(node.args) > len(_TIMER_CODE):
            self.flag(node, "Timer with more than stmt and setup given by position")
        for keyword in node.keywords:
            if keyword.arg not in (None, *_TIMER_CODE, *_TIMER_OPTIONS):
                self.flag(node, f"Timer({keyword.arg}=...) (allowed: stmt, setup, {', '.join(sorted(_TIMER_OPTIONS))})")
            elif keyword.arg == "globals" and not _names_themselves(keyword.value):
                self.flag(node, "Timer(globals=...) other than {'name': name, ...}: the code must read the cell's names")
        pieces = list(zip(_TIMER_CODE, node.args, strict=False))
        pieces += [(k.arg, k.value) for k in node.keywords if k.arg in _TIMER_CODE]
        for keyword, value in pieces:
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                self.flag(node, f"Timer({keyword}=...) with code that is not a constant string")
                continue
            if _parse(value.value) is None:
                self.flag(node, f"Timer({keyword}=...) with code that does not parse")
                continue
            self.findings += [
                Finding(self.cell, getattr(node, "lineno", 0), f"in Timer({keyword}=...): {finding.what}")
                for finding in self.scan_code(value.value)
            ]

    # ------------------------------------------------------------------------------- scopes

    def _visit_scope(self, node: ast.AST, name: str | None) -> None:
        if name is not None:
            if name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDERS:
                self.flag(node, f"defines {name}")
            elif name in _REFUSED_BECAUSE:
                self.flag(node, f"defines {name} ({_REFUSED_BECAUSE[name]})")
            if self.depth == 0:
                self.check_binding(node, name)
        self.depth += 1
        self._in_scope(node, name or _SCOPE_NAMES[type(node)])
        self.depth -= 1

    def _in_scope(self, node: ast.AST, name: str) -> None:
        """Visit ``node`` inside the scope it opens, so that its names resolve as Python resolves them."""
        if self.scopes is None:
            self.generic_visit(node)
            return
        self.scopes.enter(name, node.lineno)
        self.generic_visit(node)
        self.scopes.leave()

    def _visit_comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        self._in_scope(node, _SCOPE_NAMES[type(node)])

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._annotation(node.returns)
        self._visit_scope(node, node.name)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._annotation(node.returns)
        self._visit_scope(node, node.name)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        # A tensor subclass can override the very methods the checks compare with.
        if any(isinstance(base, (ast.Name, ast.Attribute)) and _last_name(base) in _TENSOR_TYPES for base in node.bases):
            self.flag(node, f"defines {node.name}, a subclass of torch.Tensor")
        if any(not _is_chain(base) for base in node.bases):
            self.flag(node, f"defines {node.name} on a base class that is computed (`class X(type(y))`)")
        if node.keywords:
            self.flag(node, f"defines {node.name} with a metaclass or class keywords")
        self._visit_scope(node, node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_scope(node, None)


def _allowed_magic(node: ast.Call) -> bool:
    """``get_ipython().run_line_magic("time", "<code>")`` (or run_cell_magic) of an allowed magic."""
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in ("run_line_magic", "run_cell_magic")
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "get_ipython"
        and not func.value.args
        and len(node.args) >= 2
        and not node.keywords
        and all(isinstance(arg, ast.Constant) and isinstance(arg.value, str) for arg in node.args)
        and node.args[0].value in ALLOWED_MAGICS
    )


def _magic_code(node: ast.Call) -> list[tuple[str, str | None]]:
    """The code an allowed magic runs, read the way IPython reads it: (what, code or None if it does not parse).

    ``%timeit -n1 -r1 STMT`` runs STMT; ``%%timeit -n1 SETUP`` runs SETUP, then the cell;
    ``%time [--no-raise-error] STMT`` runs STMT; ``%%time`` runs the cell.
    """
    name, line = node.args[0].value, node.args[1].value
    cell = node.args[2].value if len(node.args) > 2 else None
    if name == "timeit":
        _, statement = _magics.parse_options(line, _TIMEIT_OPTIONS, posix=False, strict=False, preserve_non_opts=True)
    else:
        _, extra = magic_arguments.parse_argstring(ExecutionMagics.time, line, partial=True)
        statement = " ".join(extra)
    found = []
    for what, code in (("the code after its options", statement), ("the cell", cell)):
        if code is not None and code.strip():
            found.append((what, code if _parse(code) is not None else None))
    return found


def setup_module_names(trusted_sources: list[str]) -> dict[str, str]:
    """Names that the trusted (locked) cells bind to modules: ``{"F": "torch.nn.functional", ...}``.

    The setup and bootstrap cells import modules a student may not (``os`` and ``subprocess``
    for the Colab install): their names stay bound in the kernel, so a student cell that uses
    them without importing anything must be caught as if it had imported them.
    """
    names: dict[str, str] = {}
    for source in trusted_sources:
        tree = _parse(source)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:  # `import a.b` binds `a` to the package a; `import a.b as c`, `c` to a.b
                    top = alias.name.split(".")[0]
                    names[alias.asname or top] = alias.name if alias.asname else top
            elif isinstance(node, ast.ImportFrom):
                names.update({alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names})
    return names


def scan_cell(
    source: str,
    cell: int,
    setup_modules: dict[str, str],
    *,
    lab: LabNames | None = None,
    modules: frozenset[str] = frozenset(),
) -> list[Finding]:
    """The policy findings of one student cell ([] when it keeps to the rules).

    ``modules``: more names bound to modules or their classes, for code that a cell runs from a
    string (its aliases, ``t = torch.testing``, hold there too).

    The cell is first turned into Python the way IPython does it, so ``!cmd`` and ``%magic``
    appear as the ``get_ipython()`` calls they are. A cell that does not parse is left alone:
    the kernel cannot run it either (a magic's code that does not parse is refused: IPython
    might read it otherwise).
    """
    tree = _parse(source)
    if tree is None:
        return []
    code = as_python(source)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    functions = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    known: tuple[set[str], set[str], dict[str, str]] = (set(), set(setup_modules) | modules, dict(setup_modules))
    while True:  # read again until every alias and computed name is known where it is used (a function may use
        # one that the cell binds further down); each reading only adds names, so this ends
        reader = _Reader(cell, set(known[1]), setup_modules, lab or LabNames())
        reader.banned = {name for name, module in setup_modules.items() if not _allowed_to_use(module)}
        reader.looked_at = _looked_at(tree)
        reader.scopes = _Scopes.of(code)
        reader.computed, reader.module_paths = set(known[0]), dict(known[2])
        reader.parents, reader.functions = parents, functions
        reader.visit(tree)
        found = (reader.computed, reader.module_names, reader.module_paths)
        if found == known:
            return reader.findings
        known = found


def _allowed_to_use(module: str) -> bool:
    """May a student cell use a name the setup bound to ``module``? (torch yes, ptlabs yes, os no)."""
    top = module.split(".")[0]
    return (top in ALLOWED_IMPORTS or top == "ptlabs") and not set(module.split(".")) & _FORBIDDEN_PARTS
