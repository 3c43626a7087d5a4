"""Start a chapter from the book's template: a numbered notebook, registered everywhere, that passes `make check`.

Usage: python -m tests.new_chapter NN name "Title"    (e.g. 08 func "torch.func in practice")

It writes notebooks/NN_name.ipynb with every part CONTRIBUTING.md asks of a chapter (the `# NN · Title`
line, the bootstrap, goals, a section with an experiment, an explorer with its states, a pitfall, an
exercise with its solution and check, a claims table, the summary), registers it in the three places a
chapter is listed (_toc.yml, tests/notebooks.toml, book/intro.md), and runs it once as `make refresh`
does, so the committed outputs exist. Replace the placeholder text and code, keeping the shape; then run
`make check NB=notebooks/NN_name.ipynb`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from tests import refresh
from tests.bootstrap import bootstrap_source
from tests.manifest import ROOT
from tests.notebook_tools import BOOTSTRAP_TAGS

#: The chapter entries of book/intro.md's list: "- {doc}`NN · Title </notebooks/NN_name>`".
INTRO_ENTRY = re.compile(r"^- \{doc\}`\d\d · .*</notebooks/\d\d_\w+>`$", re.MULTILINE)
#: A chapter in _toc.yml's "Chapters" part.
TOC_ENTRY = re.compile(r"^      - file: notebooks/\d\d_\w+$", re.MULTILINE)


def _markdown(source: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(source.strip("\n"))


def _code(source: str, tags: tuple[str, ...] = ()) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def template(number: str, name: str, title: str) -> nbformat.NotebookNode:
    """The chapter skeleton: each cell shows the convention it stands for, in working code."""
    key = name.replace("_", "-")
    label = f"ex-{number}-double"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [
        _markdown(f"""
# {number} · {title}

One paragraph: what the chapter teaches, and why a practitioner needs it. It tests what the
[practice article](source-practice) says about it (cite the articles through the Sources page,
with their section: `[practice article](source-practice), §3.1`).

**Learning goals**

- One goal per line, each something the reader can do after the chapter.
- A second goal.
"""),
        _code(bootstrap_source(), BOOTSTRAP_TAGS),
        _code("""
import torch
from IPython.display import display
from ipywidgets import interactive

import ptlabs

device = torch.device("cpu")
if torch.accelerator.is_available():  # CUDA, ROCm, Apple MPS, Intel XPU...
    device = torch.accelerator.current_accelerator()
ptlabs.setup(device)  # seeds random/NumPy/torch, print options, plot style
"""),
        _markdown("""
## 1. The first idea

A short explanation, then a live experiment whose output shows it. Make inputs on the CPU (seeded) and
move them with `.to(device)`; print verdicts or rounded values, never the last bits of a float sum.
"""),
        _code("""
x = torch.arange(6.0).to(device)
y = x.view(2, 3)  # a view: the same storage, read with other strides
y[0, 0] = 100.0
print("x after writing through the view:", x.tolist())
"""),
        _markdown("""
## 2. An explorer

The explorer's function is defined in a visible cell. The live widget (tagged `remove-cell` and
`nbval-ignore-output`) works in Jupyter and Colab; the cell after it shows a handful of its states with
`ptlabs.show_states`, which the website displays with no kernel.
"""),
        _code("""
def view_of(rows: int) -> str:
    t = torch.arange(12.0).to(device)
    return f"view({rows}, -1): shape {tuple(t.view(rows, -1).shape)}"
"""),
        _code("""
explorer = interactive(lambda rows: print(view_of(rows)), rows=[1, 2, 3, 4, 6, 12])
display(explorer, exclude=["text/plain"])  # the live widget only
""", ("remove-cell", "nbval-ignore-output")),
        _code("ptlabs.show_states({f\"rows={rows}\": view_of(rows) for rows in (1, 2, 3)})"),
        _markdown("""
## 3. Pitfalls: the real error messages

Show a deliberate error with `ptlabs.expect_error`; the torch call that raises stays in the cell.
"""),
        _code("""
with ptlabs.expect_error(RuntimeError):
    torch.arange(6.0).to(device).view(4, -1)
"""),
        _markdown("""
## 4. Exercises

Each solution is hidden behind a dropdown. After it, a check cell runs on whatever you defined (your
answer, or the solution) and prints a ✅ line when the answer is right, or explains what is wrong.
"""),
        _markdown(f"""
```{{exercise-start}}
:label: {label}
```
Write `double(t)` that returns a new tensor holding `2 * t`, on `t`'s device, leaving `t` unchanged.
"""),
        _markdown("```{exercise-end}\n```"),
        _markdown(f"```{{solution-start}} {label}\n:class: dropdown\n```"),
        _code("""
def double(t: torch.Tensor) -> torch.Tensor:
    return t * 2
"""),
        _markdown("```{solution-end}\n```"),
        _code(f"""
answer = ptlabs.check_function(globals(), "double")  # explains a missing answer
t = torch.tensor([1.0, -2.0, 3.0]).to(device)
ptlabs.check_close(answer(t), torch.tensor([2.0, -4.0, 6.0]).to(device),
                   name="{label} (values)")
ptlabs.check_close(t, torch.tensor([1.0, -2.0, 3.0]).to(device),
                   name="{label} (input unchanged)")
""", ("nbval-check-output",)),
        _markdown(f"""
## 5. Claims checked in this chapter

| key | claim (source) | verdict | settled by | shown in |
|---|---|---|---|---|
| `{key}-view-shares-storage` | "A view shares its base's storage" ([practice article](source-practice), §1) | **True.** Writing through `y` changed `x`. | cell | §1 |
"""),
        _markdown("""
## 6. Summary and cheat sheet

| want | write | remember |
|---|---|---|
| the same data, another shape | `t.view(shape)` | a view shares storage: writes show through |
"""),
    ]
    return nb


def register(root: Path, number: str, name: str, title: str) -> None:
    """List the chapter where the book looks for chapters: _toc.yml, tests/notebooks.toml, book/intro.md."""
    stem = f"notebooks/{number}_{name}"
    _insert_after_last(root / "_toc.yml", TOC_ENTRY, f"      - file: {stem}")
    manifest = root / "tests" / "notebooks.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8") + f'\n[notebooks."{stem}.ipynb"]\n', encoding="utf-8")
    _insert_after_last(root / "book" / "intro.md", INTRO_ENTRY, f"- {{doc}}`{number} · {title} </{stem}>`")


def _insert_after_last(path: Path, entry: re.Pattern[str], line: str) -> None:
    text = path.read_text(encoding="utf-8")
    last = list(entry.finditer(text))
    if not last:
        raise SystemExit(f"{path}: found no chapter entry to add {line.strip()!r} after")
    end = last[-1].end()
    path.write_text(text[:end] + "\n" + line + text[end:], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("number", help="two digits, e.g. 08")
    parser.add_argument("name", help="snake_case, e.g. func")
    parser.add_argument("title", help='the title after "NN · ", e.g. "torch.func in practice"')
    args = parser.parse_args(argv)
    if not re.fullmatch(r"\d\d", args.number) or not re.fullmatch(r"[a-z][a-z0-9_]*", args.name):
        parser.error("NN is two digits and name is snake_case (notebooks/NN_name.ipynb)")
    taken = sorted(ROOT.glob(f"notebooks/{args.number}_*.ipynb"))
    if taken:
        parser.error(f"chapter {args.number} exists already: {taken[0].relative_to(ROOT)}")
    path = ROOT / "notebooks" / f"{args.number}_{args.name}.ipynb"
    nbformat.write(template(args.number, args.name, args.title), path)
    register(ROOT, args.number, args.name, args.title)
    status = refresh.main([str(path)])  # executes and stamps it, as `make refresh` does
    print(f"wrote {path.relative_to(ROOT)}; registered in _toc.yml, tests/notebooks.toml and book/intro.md\n"
          f"next: replace the placeholders, then `make check NB={path.relative_to(ROOT)}`")
    return status


if __name__ == "__main__":
    sys.exit(main())
