"""Each lab part states its domain and guarantees, and its hidden test covers exactly that domain.

A part's text has a ``**Domain.**`` paragraph naming, in backticks, the families of inputs its
function must handle (words of ``ptchecks.domain.FAMILIES``: dtypes, ``empty`` and ``size-1``
sizes, ``inf/nan`` and ``ties``, ``non-contiguous`` and ``permuted`` layouts, the ``meta`` device,
module structures), and a ``**Guarantees.**`` paragraph. Its hidden test declares the same families
in ``ptchecks.Domain(...)``, builds every module structure it declares (``domain.structure(...)``),
and runs the student's function through the contract harness (``ptchecks.call``). Read statically:
the reference's own run over these cases (test_labs.py) proves it handles its whole domain.
"""

from __future__ import annotations

import ast
import re

import nbformat
import pytest

from ptchecks.domain import DTYPES, FAMILIES, STRUCTURES
from tests import lab_tools

LAB_NAMES = lab_tools.lab_names()
#: Backticked words in a Domain paragraph that name a family.
_TICKED = re.compile(r"`([^`]+)`")


def _parts(lab: str) -> list[tuple[str, str, str]]:
    """(part, its text, its hidden test) for every part of a lab."""
    parts = []
    for path in lab_tools.source_notebooks(lab):
        nb = nbformat.read(path, as_version=4)
        texts = {lab_tools.nbgrader_meta(c).get("grade_id"): c.source for c in nb.cells if c.cell_type == "markdown"}
        for grade_id, cell in lab_tools.graded_cells(nb).items():
            part = grade_id.removeprefix("test_")
            hidden = cell.source.split(lab_tools.BEGIN_HIDDEN, 1)[-1]
            parts.append((part, texts.get(f"{part}_text", ""), hidden))
    return parts


PARTS = [pytest.param(lab, part, text, hidden, id=f"{lab}:{part}")
         for lab in LAB_NAMES for part, text, hidden in _parts(lab)]


def paragraph(text: str, title: str) -> str:
    """The paragraph (up to a blank line) that starts with ``**<title>.**``; "" when there is none."""
    match = re.search(rf"^\*\*{title}\.\*\*(.*?)(?:\n\s*\n|\Z)", text, flags=re.M | re.S)
    return match.group(1) if match else ""


def stated_families(text: str) -> set[str]:
    """The families a part's Domain paragraph names."""
    return {word for word in _TICKED.findall(paragraph(text, "Domain")) if word in FAMILIES}


def declared_families(hidden: str) -> tuple[set[str], set[str]]:
    """(families declared in the hidden test's ptchecks.Domain calls, structures it names as built)."""
    declared: set[str] = set()
    built: set[str] = set()
    for node in ast.walk(ast.parse(hidden)):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name == "ptchecks.Domain":
            for keyword in node.keywords:
                if keyword.arg in ("seed", "device"):
                    continue
                for item in ast.walk(keyword.value):
                    if isinstance(item, ast.Constant) and isinstance(item.value, str):
                        declared.add(item.value)
                    elif isinstance(item, ast.Attribute) and item.attr in DTYPES:
                        declared.add(item.attr)
        elif name.endswith(".structure") and node.args and isinstance(node.args[0], ast.Constant):
            built.add(node.args[0].value)
    return declared, built


@pytest.mark.parametrize(("lab", "part", "text", "hidden"), PARTS)
def test_each_part_states_its_domain_and_guarantees(lab: str, part: str, text: str, hidden: str) -> None:
    assert stated_families(text), f"{lab} {part}: no **Domain.** paragraph naming its families in backticks"
    assert paragraph(text, "Guarantees").strip(), f"{lab} {part}: no **Guarantees.** paragraph"


@pytest.mark.parametrize(("lab", "part", "text", "hidden"), PARTS)
def test_each_hidden_test_covers_exactly_the_stated_domain(lab: str, part: str, text: str, hidden: str) -> None:
    stated = stated_families(text)
    declared, built = declared_families(hidden)
    assert declared == stated, (
        f"{lab} {part}: stated but not tested {sorted(stated - declared)}; "
        f"tested but not stated {sorted(declared - stated)}")
    unbuilt = (declared & set(STRUCTURES)) - built
    assert not unbuilt, f"{lab} {part}: module structures declared but never built: {sorted(unbuilt)}"
    assert "ptchecks.call(" in hidden, f"{lab} {part}: the hidden test does not use the contract harness"


def test_the_parser_reads_a_domain_paragraph_and_a_declaration() -> None:
    text = "**Domain.** Inputs:\n- dtypes: `float32`, `int16`;\n- layouts: `permuted`, and `x` itself.\n\nMore."
    assert stated_families(text) == {"float32", "int16", "permuted"}
    hidden = ('d = ptchecks.Domain(seed=1, device=device, dtypes=(torch.float32, torch.int16),\n'
              '    layouts=("permuted",), structures=("tied weight",))\nd.structure("tied weight")\n')
    assert declared_families(hidden) == ({"float32", "int16", "permuted", "tied weight"}, {"tied weight"})


def _tolerant(call: ast.Call) -> bool:
    """The call passes a tolerance: ``rtol=``/``atol=``, or keywords unpacked (``**tol``)."""
    return any(keyword.arg in (None, "rtol", "atol") for keyword in call.keywords)


def untolerant_elsewhere_calls(hidden: str) -> list[str]:
    """The ``emit_elsewhere`` calls of a function that the same test's ``ptchecks.call`` holds to a tolerance,
    made without one.

    Why: a caller elsewhere (another default device) changes where tensors are made, not how sums round.
    Held to the default (``1e-9`` for a Python float) where the part's other calls allow float32's
    rounding, a right answer that sums in another order lost its part there alone (round 18).
    """
    tree = ast.parse(hidden)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    # A test's own wrapper (``def typed_step(...): return accumulation_step(...)``) holds what it calls.
    wraps = {node.name: {ast.unparse(inner.func) for inner in ast.walk(node) if isinstance(inner, ast.Call)}
             for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}

    def function_of(call: ast.Call) -> str:
        return ast.unparse(call.args[1]) if len(call.args) > 1 else ""

    passed = {function_of(call) for call in calls if ast.unparse(call.func) == "ptchecks.call" and _tolerant(call)}
    held = passed.union(*(wraps.get(name, set()) for name in passed))
    return [ast.unparse(call.args[0]) for call in calls
            if ast.unparse(call.func).endswith("emit_elsewhere") and function_of(call) in held - {""}
            and not _tolerant(call)]


@pytest.mark.parametrize(("lab", "part", "text", "hidden"), PARTS)
def test_a_caller_elsewhere_is_held_to_the_parts_tolerance(lab: str, part: str, text: str, hidden: str) -> None:
    assert not untolerant_elsewhere_calls(hidden), (
        f"{lab} {part}: emit_elsewhere without the tolerance the part's ptchecks.call uses: "
        f"{untolerant_elsewhere_calls(hidden)}")


#: Parts whose function makes no tensor that a caller's default device could place: lab:part -> why. Every other
#: part's hidden test calls it from a caller whose default device, and whose notebook ``device``, are elsewhere
#: (``ptchecks.emit_elsewhere``), since every lab's introduction says such callers call it (round 97: five parts of
#: labs 04 and 07 kept their marks with a constant made by ``torch.tensor(c, dtype=...)`` and no ``device=``).
DEVICE_NEUTRAL = {
    "lab01_tensors:expand_strides": "it works on shapes and strides, Python ints, and its text forbids torch",
    "lab02_modules:freeze_and_group": "it returns the model's own parameters in groups, with the rates given",
    "lab03_optim_data:build_param_groups": "it returns the model's own parameters in groups, with the decay given",
    "lab05_acceleration:costliest_op": "it returns an operator's name and a count, read off a profile of fn",
    "lab06_distributed_export:export_for_serving": "torch.export traces on the example it is given, and its"
                                                   " other calls already serve batches on the example's device",
}


@pytest.mark.parametrize(("lab", "part", "text", "hidden"), PARTS)
def test_each_part_is_called_from_a_caller_whose_default_device_is_elsewhere(
        lab: str, part: str, text: str, hidden: str) -> None:
    if f"{lab}:{part}" in DEVICE_NEUTRAL:
        assert "emit_elsewhere(" not in hidden, f"{lab}:{part} is called elsewhere: remove it from DEVICE_NEUTRAL"
        return
    assert "emit_elsewhere(" in hidden, (
        f"{lab} {part}: no hidden call from a caller whose default device is elsewhere (ptchecks.emit_elsewhere); "
        "a tensor made without device= lands on the caller's default device. Add one, or say in DEVICE_NEUTRAL why "
        "the part makes no tensor a default device could place")


def test_every_device_neutral_part_exists() -> None:
    parts = {f"{lab}:{part}" for lab in LAB_NAMES for part, _, _ in _parts(lab)}
    assert set(DEVICE_NEUTRAL) <= parts, set(DEVICE_NEUTRAL) - parts


def test_the_tolerance_rule_finds_an_elsewhere_call_without_one() -> None:
    hidden = ('def typed(x):\n    return h(x)\n'
              'ptchecks.call("a", f, x, **tol)\nptchecks.call("b", g, x)\nptchecks.call("c", typed, x, rtol=0.1)\n'
              'ptchecks.emit_elsewhere("f elsewhere", f, x)\nptchecks.emit_elsewhere("g elsewhere", g, x)\n'
              'ptchecks.emit_elsewhere("f again", f, x, rtol=1e-5, atol=1e-6)\n'
              'ptchecks.emit_elsewhere("h elsewhere", h, x)\n')
    assert untolerant_elsewhere_calls(hidden) == ["'f elsewhere'", "'h elsewhere'"]


#: Words of a Domain paragraph that say a part's values are only moved or copied, never computed with.
_MOVED = re.compile(r"never computed with|copied as it is")
#: A tolerance of zero in a hidden test (``rtol=0.0``, or a dict such as ``{"rtol": 0.0, ...}``): the same bits.
_NO_TOLERANCE = re.compile(r"""["']?rtol["']?\s*[:=]\s*0(?:\.0)?\b""")


def moved_without_same_bits(text: str, hidden: str) -> list[str]:
    """What is missing where a part's Domain says its values are moved or copied, never computed with: the text's
    promise that they are compared bit for bit, and a hidden check that asks for the same bits (``rtol=0``).

    Why: ``assert_close`` holds ``-0.0`` and ``0.0`` equal, so an answer that turns one into the other (``+ 0.0``,
    to make a copy) kept its marks wherever a tolerance compared what it moved (round 29 in lab 01; round 50 in
    lab 07's copied codes, and so in lab 02's checkpoints and lab 03's padding too)."""
    domain = paragraph(text, "Domain")
    if not _MOVED.search(domain):
        return []
    missing = [] if "bit for bit" in domain else ["the text does not say the values are compared bit for bit"]
    return missing + ([] if _NO_TOLERANCE.search(hidden) else ["no hidden check asks for the same bits (rtol=0)"])


@pytest.mark.parametrize(("lab", "part", "text", "hidden"), PARTS)
def test_values_only_moved_are_compared_bit_for_bit(lab: str, part: str, text: str, hidden: str) -> None:
    assert not moved_without_same_bits(text, hidden), f"{lab} {part}: {moved_without_same_bits(text, hidden)}"


def test_the_same_bits_rule_finds_a_part_that_moves_values_under_a_tolerance() -> None:
    text = "**Domain.** Every input of these kinds:\n- values: any (they are moved, never computed with);\n"
    assert moved_without_same_bits(text, 'ptchecks.call("f", f, x)\n') == [
        "the text does not say the values are compared bit for bit", "no hidden check asks for the same bits (rtol=0)"]
    exact = text.replace("computed with", "computed with, compared bit for bit")
    assert moved_without_same_bits(exact, 'EXACT = {"rtol": 0.0, "atol": 0.0}\n') == []
    assert moved_without_same_bits(exact, 'ptchecks.call("f", f, x, rtol=0.0, atol=0.0)\n') == []
    assert moved_without_same_bits("**Domain.** values: any, computed with.\n", "") == []


def expected_answers_in_the_kernel(hidden: str) -> list[str]:
    """Where a hidden test holds a right answer in the kernel under a name that says so: a keyword, a parameter or a
    variable named ``expected`` (or holding the word).

    Why: the hidden tests send outputs and hold no expected value; the grader alone compares. Lab 05's retries asked
    ``costliest_op`` again "while the answer is not ``expected``", and code that walked up the stack read that
    ``expected`` and returned it, full marks with nothing profiled (round 90, with the code policy off).
    """
    found = []
    for node in ast.walk(ast.parse(hidden)):
        if isinstance(node, ast.keyword) and node.arg and "expected" in node.arg:
            found.append(f"{node.arg}=... (line {node.value.lineno})")
        elif isinstance(node, ast.arg) and "expected" in node.arg:
            found.append(f"parameter {node.arg} (line {node.lineno})")
        elif isinstance(node, ast.Name) and "expected" in node.id:
            found.append(f"{node.id} (line {node.lineno})")
    return found


@pytest.mark.parametrize(("lab", "part", "text", "hidden"), PARTS)
def test_no_hidden_test_holds_an_expected_answer_in_the_kernel(lab: str, part: str, text: str, hidden: str) -> None:
    assert not expected_answers_in_the_kernel(hidden), f"{lab} {part}: {expected_answers_in_the_kernel(hidden)}"


def test_the_expected_answer_rule_finds_one() -> None:
    hidden = ('answer = profiled_answer(f, x, expected=("aten::mm", 2))\nexpected_rows = 3\n'
              'def retry(fn, expected_answer):\n    return fn()\nptchecks.emit("a", f(x))\n')
    assert sorted(expected_answers_in_the_kernel(hidden)) == [
        "expected=... (line 1)", "expected_rows (line 2)", "parameter expected_answer (line 3)"]
