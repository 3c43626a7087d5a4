"""The code policy of a graded submission, checked by reading the code before any of it runs.

The grading kernel runs student code in the same process as the hidden tests, so a solution cell
could rewrite the checks, the IPython shell or the gradebook. None of that is needed to solve a
lab: the labs ask for tensor code. So the grader reads every cell a student could have written
and withholds the grade of a submission that reaches for a tool of tampering: an import beyond
the allowed list, the IPython shell, files, dynamic code (``eval``, ``getattr`` with a computed
name), dunder attributes, private parts of modules, or a rebinding of a name the checks use.
The labs' intro states the rule in words; ``ALLOWED_IMPORTS`` is its list of modules.

This is a gate, not a proof: the runtime defences (``ptlabs.grading`` canaries, the course
snapshot, process reaping) stay in place for whatever gets past it.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from IPython.core.inputtransformer2 import TransformerManager

#: Top-level modules a solution may import (the labs' intro lists the same ones).
ALLOWED_IMPORTS = frozenset({"torch", "math", "itertools", "functools", "collections", "typing", "dataclasses", "operator"})

#: torch sub-packages that load code or files, start processes, or replace torch's own behaviour.
FORBIDDEN_TORCH_PARTS = frozenset(
    {"hub", "cpp_extension", "load_library", "package", "multiprocessing", "distributed", "overrides", "library", "ops"}
)

#: Names that evaluate code, reach the shell, touch files or processes, or rewrite attributes.
FORBIDDEN_NAMES = frozenset(
    {
        "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "open", "breakpoint",
        "exit", "quit", "setattr", "delattr", "get_ipython", "__builtins__",
        # IPython's input and output history: it holds the source of the cell being graded.
        "In", "Out", "_ih", "_oh", "_i", "_ii", "_iii", "_dh", "_exit_code",
    }
)

#: Attributes that walk from an object to interpreter internals (frames, code, modules of the runtime).
FORBIDDEN_ATTRIBUTES = frozenset(
    {
        "gi_frame", "gi_code", "cr_frame", "ag_frame", "f_globals", "f_locals", "f_back", "f_builtins", "f_code",
        "tb_frame", "tb_next", "co_code", "os", "sys", "subprocess", "builtins", "importlib", "ctypes", "signal",
        "shutil", "socket", "threading", "inspect", "gc", "pickle", "marshal", "types", "io", "tempfile",
        "sqlite3", "atexit", "resource", "save", "load", "tofile", "fromfile", "from_file", "grading",
        "autograde", "checks", "LEDGER",
    }
)

#: Dunder attributes and method names an honest solution uses (a class's constructor, a context manager).
ALLOWED_DUNDERS = frozenset(
    {"__init__", "__call__", "__enter__", "__exit__", "__repr__", "__str__", "__len__", "__iter__", "__next__",
     "__getitem__", "__contains__", "__name__", "__post_init__"}
)

#: Names bound by the locked setup cells and Python itself: rebinding one changes what the tests run.
PROTECTED_NAMES = frozenset(dir(builtins)) | {"torch", "nn", "F", "math", "ptlabs"}

#: The modules those names stand for: a student may import them under these names themselves.
CONVENTIONAL_NAMES = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional", "math": "math"}

_transformer = TransformerManager()


@dataclass(frozen=True)
class Finding:
    """One place where a cell breaks the policy."""

    cell: int  # index of the cell in the notebook (0-based)
    line: int  # line in the cell (after IPython's magics were turned into Python)
    what: str

    def __str__(self) -> str:
        return f"cell {self.cell + 1}, line {self.line}: {self.what}"  # counted from 1, as a reader counts


def _last_name(node: ast.AST) -> str:
    """``Tensor`` for ``torch.Tensor`` or ``Tensor``."""
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _root_name(node: ast.AST) -> str | None:
    """The name at the start of an attribute chain (``torch`` for ``torch.nn.functional.relu``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


class _Reader(ast.NodeVisitor):
    """Collects the policy findings of one cell."""

    def __init__(self, cell: int, module_names: set[str]) -> None:
        self.cell = cell
        self.module_names = module_names  # names bound to modules (import aliases and setup imports)
        self.findings: list[Finding] = []
        self.banned: set[str] = set()  # names the setup bound to modules students may not use
        self.setup_modules: dict[str, str] = {}
        self.depth = 0  # 0 at the cell's top level, where assignments bind notebook globals

    def flag(self, node: ast.AST, what: str) -> None:
        self.findings.append(Finding(self.cell, getattr(node, "lineno", 0), what))

    def check_import(self, node: ast.AST, module: str) -> None:
        top = module.split(".")[0]
        parts = set(module.split("."))
        if top not in ALLOWED_IMPORTS:
            self.flag(node, f"imports {module} (allowed: {', '.join(sorted(ALLOWED_IMPORTS))})")
        elif parts & FORBIDDEN_TORCH_PARTS or any(part.startswith("_") for part in parts):
            self.flag(node, f"imports {module}, a part of torch the labs do not allow")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.check_import(node, alias.name)
            bound = alias.asname or alias.name.split(".")[0]
            if alias.asname is not None and self.depth == 0:  # `import math` binds math to math: harmless
                self.check_binding(node, bound, imported=alias.name)
            self.module_names.add(bound)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.check_import(node, "." * node.level + (node.module or ""))
        for alias in node.names:
            if alias.name == "*" or alias.name in FORBIDDEN_NAMES or alias.name in FORBIDDEN_TORCH_PARTS:
                self.flag(node, f"imports {alias.name!r} from {node.module}")
            if self.depth == 0:
                self.check_binding(node, alias.asname or alias.name, imported=f"{node.module}.{alias.name}")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_NAMES or node.id in self.banned:
            self.flag(node, f"uses {node.id}")
        elif node.id.startswith("__") and node.id.endswith("__") and node.id not in ALLOWED_DUNDERS:
            self.flag(node, f"uses {node.id}")
        if isinstance(node.ctx, (ast.Store, ast.Del)) and self.depth == 0:
            self.check_binding(node, node.id)

    def check_binding(self, node: ast.AST, name: str, *, imported: str = "") -> None:
        # Importing a module under its usual name (``import torch.nn.functional as F``) changes nothing.
        if name in PROTECTED_NAMES and CONVENTIONAL_NAMES.get(name) != imported:
            self.flag(node, f"rebinds {name!r}, a name the setup or Python defines")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        root = _root_name(node)
        if attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
            self.flag(node, f"uses the attribute {attr}")
        elif attr in FORBIDDEN_ATTRIBUTES or (root in self.module_names and attr in FORBIDDEN_TORCH_PARTS):
            self.flag(node, f"uses .{attr}")
        elif root in self.module_names and attr.startswith("_"):
            self.flag(node, f"uses the private attribute {root}...{attr}")
        if isinstance(node.ctx, (ast.Store, ast.Del)) and (root in self.module_names or root in PROTECTED_NAMES):
            self.flag(node, f"changes {root}...{attr}, which belongs to a module or to Python")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if _allowed_magic(node):
            # %time / %%timeit run their argument as code: read that code instead of the shell call.
            for argument in node.args[1:]:
                self.findings += [
                    Finding(self.cell, getattr(node, "lineno", 0), f"in %{node.args[0].value}: {finding.what}")
                    for finding in scan_cell(argument.value, self.cell, self.setup_modules)
                ]
            return
        if isinstance(node.func, ast.Name) and node.func.id == "getattr":
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and not name.value.startswith("_")):
                self.flag(node, "getattr with a computed or private attribute name")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            self.check_binding(node, name)

    def _visit_scope(self, node: ast.AST, name: str | None) -> None:
        if name is not None:
            if name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDERS:
                self.flag(node, f"defines {name}")
            if self.depth == 0:
                self.check_binding(node, name)
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_scope(node, node.name)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_scope(node, node.name)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        # A tensor subclass can override the very methods the checks compare with.
        if any(isinstance(base, (ast.Name, ast.Attribute)) and _last_name(base) == "Tensor" for base in node.bases):
            self.flag(node, f"defines {node.name}, a subclass of torch.Tensor")
        self._visit_scope(node, node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_scope(node, None)


#: IPython magics a student may use: they time code and run nothing else.
ALLOWED_MAGICS = frozenset({"time", "timeit"})


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


def setup_module_names(trusted_sources: list[str]) -> dict[str, str]:
    """Names that the trusted (locked) cells bind to modules: ``{"F": "torch.nn.functional", ...}``.

    The setup and bootstrap cells import modules a student may not (``os`` and ``subprocess``
    for the Colab install): their names stay bound in the kernel, so a student cell that uses
    them without importing anything must be caught as if it had imported them.
    """
    names: dict[str, str] = {}
    for source in trusted_sources:
        try:
            tree = ast.parse(_transformer.transform_cell(source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:  # `import a.b` binds `a` to the package a; `import a.b as c`, `c` to a.b
                    top = alias.name.split(".")[0]
                    names[alias.asname or top] = alias.name if alias.asname else top
            elif isinstance(node, ast.ImportFrom):
                names.update({alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names})
    return names


def scan_cell(source: str, cell: int, setup_modules: dict[str, str]) -> list[Finding]:
    """The policy findings of one student cell ([] when it keeps to the rules).

    The cell is first turned into Python the way IPython does it, so ``!cmd`` and ``%magic``
    appear as the ``get_ipython()`` calls they are. A cell that does not parse is left alone:
    the kernel cannot run it either.
    """
    try:
        tree = ast.parse(_transformer.transform_cell(source))
    except SyntaxError:
        return []
    reader = _Reader(cell, set(setup_modules))
    reader.setup_modules = setup_modules
    reader.banned = {name for name, module in setup_modules.items() if not _allowed_to_use(module)}
    reader.visit(tree)
    return reader.findings


def _allowed_to_use(module: str) -> bool:
    """May a student cell use a name the setup bound to ``module``? (torch yes, ptlabs yes, os no)."""
    top = module.split(".")[0]
    return (top in ALLOWED_IMPORTS or top == "ptlabs") and not set(module.split(".")) & FORBIDDEN_TORCH_PARTS
