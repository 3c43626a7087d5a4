"""Hostile submissions: cheats and broken notebooks, each with the grade it must get.

The labs' wrong-answer fixtures (tests/fixtures/<lab>/) are honest mistakes. These are the
other kind: a student who tries to get marks without the work, or a notebook that breaks the
grading run. Each case builds a submission from the lab's release and says what every graded
part must score:

- a **cheat** starts from wrong answers (the first wrong-answer fixture of every part whose outputs
  are wrong, each of which loses its whole part when graded honestly) and adds the cheating code as a cell of its own
  (tests/fixtures/hostile/<name>.py, or .ipy when it uses magics). It must score zero everywhere: with the course's code
  policy on (the documented configuration) the grades are withheld before anything runs; with the
  policy off, the jail and the runtime defences alone (held checks, canaries, completion tokens,
  the course record) must still give it nothing, and the honest student graded after the cheats
  (``lab_tools.HONEST_AFTER_HOSTILE``) keeps full marks;
- a **runtime** case starts from the solution and breaks the run (a dead kernel, a loop that
  ignores SIGINT, 5 MB of output with a ``<script>`` in it, a deleted test cell, stripped
  metadata): the parts it did not break keep their points, and ``nbgrader autograde`` still
  exits 0 for the whole class.

Each case is graded in the first lab and in one other (``lab_tools.hostile_cases_for``). The attacks
of issue 21, one case per class (the cheats' first lines say what they try):

1. forbidden things reached without forbidden syntax: ``reach_by_name`` (getattr/attrgetter/
   reduce by name, a magic's options, an alias of a torch module, ``except ... as`` a builtin);
2. what the test cell reads changed after the student's code ran: ``rebind_test_globals`` (a
   replaced ``ptchecks`` that would receive the token, ``global expected``);
3. persisting past the kernel: ``outlive_the_kernel`` (bytecode in ptlabs, a fork-and-exit chain
   that writes the gradebook, the next submission and HOME later);
4. attacking the grader: ``attack_the_grader`` (SIGKILL, ``/proc/<pid>/mem``, a stalled socket);
5. no resource limits: ``exhaust_the_machine`` (8 GiB, hundreds of processes, a 1 GiB file);
6. output rendered as HTML: the runtime case ``huge_and_active_output``;
7. the verdict decided inside the kernel: ``forge_the_verdict`` replaces the grader's hold, runs each
   test cell with its failures swallowed and prints every completion token. It scores 0 only because
   every hidden test sends the student's outputs out (``ptchecks.emit``) and the grader compares
   them with the reference solution's, outside the kernel.

The submissions of issue 25 that stopped or harmed the whole run (``_broken_submissions``): folders
nbgrader must not open (a notebook linked to the source or to ``/dev/stdin``, a lab folder linked to
the source, a FIFO, a name with terminal escape codes: each *arranged* after its notebook is written,
since git and nbformat hold only files), cell flags edited, a malformed output on the grader's channel, dicts
on it whose keys all hash alike (round 27),
a display nested 3,000 deep, active HTML in Markdown and in an image's metadata, a picture 2**31 - 1 px tall, a tiny one
shown 95 times at 4096 px (round 74)
(tests/fixtures/hostile/broken/), and files handed in beside the notebook (an HTML page, a folder named
like the feedback page), which must not reach autograded/.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import os
import shutil
import struct
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ptgrader.execute import setup_index
from tests import lab_tools

HOSTILE = Path(__file__).resolve().parent / "fixtures" / "hostile"

#: A submission built from (release, solution answers, wrong answers) -> notebook.
Builder = Callable[[nbformat.NotebookNode, dict[str, str], dict[str, str]], nbformat.NotebookNode]

#: A submission's folder reshaped after its notebook was written: (submitted/<student>/<lab>, course, lab).
Arrange = Callable[[Path, Path, str], None]

#: What the grader's report must say of a cheat graded with the policy off (runtime defences only).
#: Exhausting the machine ends one of three ways, by timing: the grader kills the processes the kernel left; or
#: the kernel dies first (no thread can start past the process limit) and its PID namespace takes them along;
#: or the starved kernel sends a broken message (jupyter_client: "Invalid Signature"), and the failsafe reports
#: the submission as unprocessed. Every way, no part scores and the report says why.
#: Round 103: a hook on every nn.Module left registered (a harmless one here, wrapped by torch so that it reads as
#: torch's own function), which runs inside every later call, the answers' included: the code policy lets it
#: through (a correct answer may register such hooks and remove them), and every part after it earns nothing.
MODULE_HOOK_LEFT_REGISTERED = (
    "def _seen(module, args, output):\n    return output\n\n\n"
    "torch.nn.modules.module.register_module_forward_hook(torch.enable_grad()(_seen))"
)

RUNTIME_FLAGS = {"outlive_the_kernel": "killed_processes",
                 "exhaust_the_machine": "killed_processes or stopped or unprocessed"}


@dataclass(frozen=True)
class HostileCase:
    """One hostile submission and the score each graded part must get."""

    name: str
    build: Builder
    #: test cell grade_ids in notebook order -> score each must get ("full" or 0)
    expect: Callable[[list[str]], dict[str, str | int]]
    #: what the grader's report must say (a truthy field of ptgrader-report.json, or either of two joined by
    #: " or "), "" when nothing
    flag: str
    policy: bool  # graded with the code policy on (the course default) or off (runtime defences only)
    #: what the submission folder becomes once the notebook is written (a link, a FIFO, an odd name), or None
    arrange: Arrange | None = None
    #: words the report's ``stopped`` must hold: why the kernel was stopped ("" when any reason will do), or either of
    #: two joined by " or "
    reason: str = ""

    @property
    def student(self) -> str:
        return f"hostile-{self.name.replace('_', '-')}-{'policy' if self.policy else 'runtime'}"


#: A cheat is a cell of Python (``.py``) or of IPython's own syntax, magics included (``.ipy``).
CHEAT_SUFFIXES = (".py", ".ipy")


def cheat_source(name: str) -> str:
    """The cheating cell tests/fixtures/hostile/<name>.py or .ipy (its first line names the cheat)."""
    (path,) = [HOSTILE / f"{name}{suffix}" for suffix in CHEAT_SUFFIXES if (HOSTILE / f"{name}{suffix}").is_file()]
    return path.read_text(encoding="utf-8").rstrip("\n")


def cheat_names() -> list[str]:
    return sorted(path.stem for path in HOSTILE.iterdir() if path.suffix in CHEAT_SUFFIXES)


def _test_index(nb: nbformat.NotebookNode, position: int) -> int:
    """Index of the ``position``-th graded test cell (0-based)."""
    return [i for i, cell in enumerate(nb.cells) if lab_tools.nbgrader_meta(cell).get("grade")][position]


def _with_cell(nb: nbformat.NotebookNode, after: int, source: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` with a new student code cell (no nbgrader metadata) after cell ``after``."""
    nb = copy.deepcopy(nb)
    nb.cells.insert(after + 1, nbformat.v4.new_code_cell(source))
    return nb


def _cheat(name: str) -> Builder:
    def build(release, answers, wrong):  # noqa: ANN001, ANN202
        nb = lab_tools.build_submission(release, wrong)
        return _with_cell(nb, setup_index(nb), cheat_source(name))

    return build


def _cheat_above_setup(name: str) -> Builder:
    """Wrong answers, and the cheat as the notebook's first cell: it would run before the checks exist."""

    def build(release, answers, wrong):  # noqa: ANN001, ANN202
        return _with_cell(lab_tools.build_submission(release, wrong), -1, cheat_source(name))

    return build


def _after_test(source: str, test: int = 1, copies: int = 1) -> Builder:
    """The solution with ``copies`` cells of ``source`` after its ``test``-th test cell (0-based; -1: the last)."""

    def build(release, answers, wrong):  # noqa: ANN001, ANN202
        nb = lab_tools.build_submission(release, answers)
        for _ in range(copies):
            nb = _with_cell(nb, _test_index(nb, test), source)
        return nb

    return build


def _first_part_wrapped(comment: str, line: str) -> Builder:
    """The solution, with the first part's function running ``line`` on every call, inside the test cell."""

    def build(release, answers, wrong):  # noqa: ANN001, ANN202
        nb = lab_tools.build_submission(release, answers)
        first = next(i for i, cell in enumerate(nb.cells) if lab_tools.nbgrader_meta(cell).get("solution"))
        name = lab_tools.nbgrader_meta(nb.cells[first])["grade_id"]
        wrapped = (
            f"# {comment}\nplain_{name} = {name}\n\n\n"
            f"def {name}(*args, **kwargs):\n    {line}\n    return plain_{name}(*args, **kwargs)"
        )
        return _with_cell(nb, first, wrapped)

    return build


#: Five times what a cell keeps at each call; not more, because a test cell may call the function a
#: hundred times (gradcheck does), and the kernel still has to send everything it prints.
_noisy_first_part = _first_part_wrapped("Every call prints 100 kB (a debugging print left in).", "print('x' * 100_000)")
#: torch warns on stderr (UserWarning: To copy construct from a tensor...): nbgrader alone would score it 0.
_warning_first_part = _first_part_wrapped(
    "An honest answer whose first call makes torch print a UserWarning on stderr, in the test cell.",
    "torch.tensor(torch.zeros(1))",
)


def _delete_first_test(release, answers, wrong):  # noqa: ANN001, ANN202
    nb = lab_tools.build_submission(release, answers)
    del nb.cells[_test_index(nb, 0)]
    return nb


def _strip_metadata(release, answers, wrong):  # noqa: ANN001, ANN202
    nb = lab_tools.build_submission(release, answers)
    for cell in nb.cells:
        cell.metadata = {}
    return nb


def _metadata_for_the_page(release, answers, wrong):  # noqa: ANN001, ANN202
    """Round 63: the first part wrong, its solution and test cells tagged ``hidden`` (Bootstrap hides them) and its
    code removed from the page (``transient``), a fake score in a cell pinned over the page by its tags, and a
    notebook title that claims full marks. The pages must show the failed part and draw no class of the student's."""
    nb = lab_tools.build_submission(release, wrong)
    solution = next(cell for cell in nb.cells if lab_tools.nbgrader_meta(cell).get("solution"))
    test = nb.cells[_test_index(nb, 0)]
    solution.metadata.update(tags=["y hidden"], transient={"remove_source": True})
    test.metadata["tags"] = ["x hidden"]
    banner = nbformat.v4.new_code_cell("print('Score: full marks, every test cell passed')",
                                       metadata={"tags": ["b alert alert-success navbar-fixed-top"]})
    nb.cells.insert(_test_index(nb, 0) + 1, banner)
    nb.metadata["title"] = "Score: full marks"
    return nb


def _edit_bootstrap_and_tests(release, answers, wrong):  # noqa: ANN001, ANN202
    """Wrong answers; the locked bootstrap cell and every test cell rewritten to pass."""
    nb = lab_tools.build_submission(release, wrong)
    for cell in nb.cells:
        meta = lab_tools.nbgrader_meta(cell)
        if meta.get("grade_id") == "bootstrap":
            cell.source = cheat_source("noop_comparisons")
        elif meta.get("grade"):
            cell.source = "pass"
    return nb


DEAD_KERNEL = "# The kernel dies (os._exit) after part 2.\nimport os\nos._exit(0)"


def _refused_or_dead(comment: str, attempt: str) -> str:
    """A cell that tries ``attempt`` (lines of code, importing os and socket): refused, it prints why and the
    lab goes on; done, the kernel ends there, so its later parts earn nothing and the case fails."""
    body = "".join(f"    {line}\n" for line in attempt.splitlines())
    return (f"# {comment}\nimport os, socket\ntry:\n{body}except OSError as refused:\n"
            "    print('refused:', refused)\nelse:\n    os._exit(0)")


#: Round 33: a socket of a family that no network namespace holds (AF_VSOCK, 40, reaches the virtual machine's
#: host, and other kernels where a vsock loopback is loaded), bound and listening.
VSOCK_SOCKET = _refused_or_dead(
    "An AF_VSOCK socket: past the kernel's network namespace.",
    "listener = socket.socket(40, socket.SOCK_STREAM)\nlistener.bind((0xFFFFFFFF, 47123))\nlistener.listen()",
)
#: Round 34: socket buffers of 8 MiB (the Linux kernel's memory, which no address-space limit counts): 512 pairs
#: of them held 8 GiB for a regular user's kernel, which has no control group.
LARGE_SOCKET_BUFFERS = _refused_or_dead(
    "A socket pair whose buffers hold 8 MiB each way: memory outside the address space.",
    "pair = socket.socketpair()\npair[0].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)",
)
#: Round 35: TCP on the kernel's own loopback device, whose buffers Linux grows to 4 MiB a connection out of one
#: pool for the whole machine (430 connections put its TCP under memory pressure, counted by no limit).
LOOPBACK_TCP = _refused_or_dead(
    "A TCP listener on the kernel's own loopback device.",
    "listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\nlistener.bind(('127.0.0.1', 0))\n"
    "listener.listen()",
)
#: Round 28: a message of a million empty frames (zmq "buffers") costs its sender nothing and was charged a few
#: hundred bytes, while each frame cost the grader about 400 bytes and 8 us (10 million: 4.4 GB, 87 s of CPU).
#: A hundred thousand frames are as far past MAX_FRAMES as a million: a million took the kernel over the 5 s of a
#: cell on a slow, loaded host (stop 77's CI), so the grader stopped it for time before it read the message.
EMPTY_FRAMES = (
    "# A message of a hundred thousand empty frames on the output channel.\n"
    "from ipykernel.kernelbase import Kernel\n"
    "kernel = Kernel.instance()\n"
    "kernel.session.send(kernel.iopub_socket, 'x_unknown', {}, buffers=[b''] * 100_000)"
)
#: Round 28: raw ZMTP frames (2 bytes each) written by the kernel onto its connection to the grader's output
#: socket. libzmq holds every frame of a message before any can be read, at about 64 bytes each: 6 million of
#: them held the grader at 1.5 GB for 46 s of its CPU. The reader is the relay now (ptgrader.relay), which dies
#: at its memory limit.
RAW_FRAMES = (
    "# 12 MB of raw empty frames onto the connections whose peer is outside the jail.\n"
    "import os, select, socket, struct, time\n"
    "peers = []\n"
    "for fd in map(int, os.listdir('/proc/self/fd')):\n"
    "    try:\n"
    "        probe = socket.socket(fileno=os.dup(fd))\n"
    "        creds = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)\n"
    "        probe.close()\n"
    "        if struct.unpack('3i', creds)[0] == 0:\n"
    "            peers.append(fd)\n"
    "    except OSError:\n"
    "        pass\n"
    "time.sleep(0.5)\n"
    "data = memoryview(b'\\x01\\x00' * 6_000_000 + b'\\x00\\x00')\n"
    "sent = dict.fromkeys(peers, 0)\n"
    "deadline = time.monotonic() + 20\n"
    "while time.monotonic() < deadline and any(n < len(data) for n in sent.values()):\n"
    "    waiting = [fd for fd in peers if sent[fd] < len(data)]\n"
    "    for fd in select.select([], waiting, [], 1.0)[1]:\n"
    "        try:\n"
    "            sent[fd] += os.write(fd, data[sent[fd]:sent[fd] + (1 << 20)])\n"
    "        except BlockingIOError:\n"
    "            pass\n"
    "        except OSError:\n"
    "            sent[fd] = len(data)"
)
#: Round 40: messages of 7 frames of 31 MiB each, under every limit of their shape, that the relay could not hold:
#: libzmq dropped the relay's connection, and the grader waited for a silent kernel until the cell's time ran
#: out. The relay now stops on a dropped connection to a running kernel, and says so. Here one message of 14 such
#: frames (434 MiB): none of it reaches the grader, whose byte budget would stop a smaller one first.
FRAMES_PAST_THE_RELAYS_MEMORY = (
    "# A message of 14 frames of 31 MiB each on the output channel, twice.\n"
    "from ipykernel.kernelbase import Kernel\n"
    "kernel = Kernel.instance()\n"
    "frame = bytes(31 << 20)\n"
    "for _ in range(2):\n"
    "    kernel.session.send(kernel.iopub_socket, 'stream', {'name': 'stdout', 'text': 'a'},\n"
    "                        parent=kernel.get_parent(), buffers=[frame] * 14)"
)
#: Round 41: the kernel's control socket renamed and replaced by a link to a path of the grader's machine, then the
#: relay's connection to it shut down: the relay asked that file whether the kernel had ended, following the link
#: on the grader's machine (an oracle on which paths exist there; a missing one kept the relay waiting). It asks
#: the kernel's process now: the connection of a running kernel dropped, whatever its socket file became.
SOCKET_REPLACED_BY_A_LINK = (
    "# The control socket replaced by a link to a missing path, its connection shut down.\n"
    "import json, os, socket, time\n"
    "path = f\"/ptgrader/run/ipc-{json.load(open('/ptgrader/run/connection.json'))['control_port']}\"\n"
    "os.rename(path, path + '.old')\n"
    "os.symlink('/no/such/path/on/the/graders/machine', path)\n"
    "for fd in map(int, os.listdir('/proc/self/fd')):\n"
    "    try:\n"
    "        end = socket.socket(fileno=os.dup(fd))\n"
    "    except OSError:\n"
    "        continue\n"
    "    try:\n"
    "        if end.getsockname() == path and not end.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):\n"
    "            end.shutdown(socket.SHUT_RDWR)\n"
    "    except OSError:\n"
    "        pass\n"
    "    finally:\n"
    "        end.detach()\n"
    "time.sleep(2)"
)
#: Round 42: single frames of one byte on the output channel, no message at all: the grader's reading raised
#: ValueError (no delimiter) and the failsafe reported the submission with Python's raw error. The kernel is now
#: stopped at the first such frame, and the report says the grader could not read its message.
UNREADABLE_MESSAGES = (
    "# Frames of one byte on the output channel, from ipykernel's own output thread.\n"
    "from ipykernel.kernelbase import Kernel\n"
    "thread = Kernel.instance().iopub_thread\n"
    "for _ in range(3):\n"
    "    thread.schedule(lambda: thread.socket.send(b'x'))\n"
    "import time\n"
    "time.sleep(2)"
)
#: Round 43: a message signed with the kernel's own key, well framed, whose content is a JSON list: it decoded, and
#: nbclient raised on it, which ended the submission in the failsafe with Python's raw error. A message without the
#: protocol's shape is one the grader cannot read now (ptgrader.kernel_client.misshapen).
MISSHAPEN_MESSAGE = (
    "# A signed stream message whose content is a list.\n"
    "import json\n"
    "from ipykernel.kernelbase import Kernel\n"
    "kernel = Kernel.instance()\n"
    "session = kernel.session\n"
    "frames = session.serialize(session.msg('stream', {}, parent=kernel.get_parent()))\n"
    "frames[5] = json.dumps(['x', 'y']).encode()\n"
    "frames[1] = session.sign(frames[2:6])\n"
    "kernel.iopub_socket.send_multipart(frames)\n"
    "import time\n"
    "time.sleep(2)"
)
#: Round 44: a display of the protocol's shape whose display id is an object: the grader's own handling raised
#: (an unhashable key), which ended the submission in the failsafe with Python's raw error. Whatever a kernel's
#: message makes fail while the grader takes it in now stops the kernel, with the reason.
DISPLAY_ID_AN_OBJECT = (
    "# A display whose display id is an object, not a string.\n"
    "from ipykernel.kernelbase import Kernel\n"
    "kernel = Kernel.instance()\n"
    "content = {'data': {'text/plain': 'x'}, 'metadata': {}, 'transient': {'display_id': {'a': 1}}}\n"
    "kernel.session.send(kernel.iopub_socket, 'display_data', content, parent=kernel.get_parent())\n"
    "import time\n"
    "time.sleep(2)"
)
#: Round 45: a kernel_info_reply without a status, sent on the shell channel as the running cell's reply: nbclient
#: took it as the reply, and nbgrader's hook raised on its missing status, into the failsafe. Only replies with a
#: status are read on the shell channel now.
REPLY_WITHOUT_STATUS = (
    "# A kernel_info_reply without a status, as the running cell's reply.\n"
    "import json\n"
    "from ipykernel.kernelbase import Kernel\n"
    "kernel = Kernel.instance()\n"
    "session = kernel.session\n"
    "header = session.msg_header('kernel_info_reply')\n"
    "header['date'] = header['date'].isoformat()\n"
    "asked = kernel.get_parent('shell')['header']\n"
    "parent = {k: v.isoformat() if hasattr(v, 'isoformat') else v for k, v in asked.items()}\n"
    "parts = [json.dumps(part).encode() for part in (header, parent, {}, {'protocol_version': '5.3'})]\n"
    "ident = kernel._parent_ident['shell']\n"
    "idents = ident if isinstance(ident, list) else [ident]\n"
    "kernel.shell_stream.send_multipart([*idents, b'<IDS|MSG>', session.sign(parts), *parts])\n"
    "import time\n"
    "time.sleep(1)"
)
#: Round 47: well-formed replies on the shell channel that answer no request (an empty parent header): 260,000
#: of them in 45 s cost the grader 45 s of CPU, within the byte budget, and full marks. Each reply must now answer
#: a request the grader is waiting on, and a message costs at least 4 KiB of the budget.
REPLIES_TO_NOTHING = (
    "# 100,000 kernel_info_replies on the shell channel, answering no request.\n"
    "from ipykernel.kernelbase import Kernel\n"
    "kernel = Kernel.instance()\n"
    "ident = kernel._parent_ident['shell']\n"
    "for _ in range(100_000):\n"
    "    kernel.session.send(kernel.shell_stream, 'kernel_info_reply', {'status': 'ok'}, parent={}, ident=ident)"
)
#: Round 48: the kernel's own execution count, which nbclient copies into the notebook and the feedback page shows
#: beside each cell: 4,290 digits ran every later label off the page. The grader numbers the cells itself.
HUGE_EXECUTION_COUNT = "get_ipython().execution_count = 10**4290"
def _tall_png() -> bytes:
    """A blank PNG 1 px wide and 1,000,000 px tall by its own header: about 2 kB, since blank rows compress well."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 1, 1_000_000, 8, 0, 0, 0, 0)  # width, height, 8-bit grey
    rows = zlib.compress(b"\x00\x00" * 1_000_000, 9)  # each row: its filter byte, one pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


#: Round 51: a picture whose size is only in its own header (no metadata to cap): Chromium laid the feedback and
#: formgrader pages out a million pixels tall, every later part below it. The grader reads the header now.
TALL_PNG = (
    "# A PNG 1 px wide and 1,000,000 px tall by its own header, with no size in its metadata.\n"
    "class Tall:\n"
    "    def _repr_png_(self):\n"
    "        return bytes.fromhex(\n"
    + "".join(f"            '{hexed[start:start + 64]}'\n" for hexed in [_tall_png().hex()]
              for start in range(0, len(hexed), 64))
    + "        )\n\n\nTall()"
)
#: Round 58: text-direction overrides reordered what the feedback page and the formgrader drew: a comment read
#: otherwise than it was ("Trojan Source"), and printed text too. The pages show them as escapes.
TEXT_DIRECTION = (
    "# \u202e tnemmoc \u2066 this comment reads backwards on a page that honours the override\n"
    "print('In \u202eevil\u202c text.\u200b')"
)
#: Round 30: one-frame 16 MiB messages written raw onto the kernel's end of its control connection, which the
#: grader never reads: the relay forwarded them into the grader's control socket, unread and uncounted (3.5 GB
#: for 200 of them, full marks, a clean report). The relay carries nothing up that route now: the kernel's
#: writes wait, and its cell runs out of time.
CONTROL_FLOOD = (
    "# 40 messages of 16 MiB on the control connection, written raw.\n"
    "import json, os, socket, struct\n"
    "port = json.load(open('/ptgrader/run/connection.json'))['control_port']\n"
    "payload = b'\\x02' + struct.pack('>Q', 16 << 20) + bytes(16 << 20)\n"
    "for fd in map(int, os.listdir('/proc/self/fd')):\n"
    "    try:\n"
    "        end = socket.socket(fileno=os.dup(fd))\n"
    "    except OSError:\n"
    "        continue\n"
    "    try:\n"
    "        ours = str(end.getsockname()).endswith(f'-{port}')\n"
    "        if ours and not end.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):\n"
    "            end.settimeout(60)\n"
    "            for _ in range(40):\n"
    "                end.sendall(payload)\n"
    "    except OSError:\n"
    "        pass\n"
    "    end.close()"
)
#: Round 31: date strings in a message's header, each parsed into a datetime by jupyter_client in the grader's
#: process before the grader sees the message (four 64 MB headers: 3.9 GB, ten minutes of the grader's time).
DATED_HEADER = (
    "# A message whose header holds 200,000 date strings (4.6 MB).\n"
    "from ipykernel.kernelbase import Kernel\n"
    "kernel = Kernel.instance()\n"
    "header = kernel.session.msg_header('stream')\n"
    "header['dates'] = ['2020-01-01T00:00:00'] * 200_000\n"
    "content = {'name': 'stdout', 'text': 'x'}\n"
    "kernel.session.send(kernel.iopub_socket, 'stream', content, header=header)"
)
#: Round 36: headers of date strings just under the 64 KiB limit, each string parsed by jupyter_client at about
#: 1 us of the grader's CPU a byte: the grader decoded for 110 s, past the cell's 60 s, on 21 s of the kernel's.
#: Here 100 messages whose header and parent header hold 62 KB of dates each (12.5 MB, within the runtime
#: course's 16 MiB budget): about 12 s of decoding that way, past that course's 5 s cells; a tenth of a second now.
DATED_HEADERS_UNDER_THE_LIMIT = (
    "# 100 messages, their header and parent header each holding 2,600 date strings.\n"
    "from ipykernel.kernelbase import Kernel\n"
    "kernel = Kernel.instance()\n"
    "dates = ['2020-01-01T00:00:00'] * 2_600\n"
    "for _ in range(100):\n"
    "    header = kernel.session.msg_header('stream') | {'dates': dates}\n"
    "    content = {'name': 'stdout', 'text': ''}\n"
    "    parent = {'msg_id': 'none', 'dates': dates}\n"
    "    kernel.session.send(kernel.iopub_socket, 'stream', content, parent, header=header)"
)
#: One line, no comment: Python to the code policy (``reset - f``), but IPython's automagic read it as
#: ``%reset -f``, which empties the notebook's namespace (the answers of the parts after it); the round that
#: found it started a shell the same way (``sx /"";sh -"c" "id"``). Grading kernels run with automagic off.
AUTOMAGIC_LINE = "reset -f"
SIGINT_PROOF_LOOP = (
    "# A loop that ignores the interrupt a timeout sends.\n"
    "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
)
#: A cell well within a cell's time limit (lab_tools.RUNTIME_ONLY_CONFIG). SILENT_CELLS of them, with no
#: output, after the last test cell, run past the submission's limit there: each within its own limit, and
#: the run is stopped all the same (every part ran before: full marks, and the report says it was stopped).
SILENT_CELL = "# Half a second, silent.\nimport time\ntime.sleep(0.5)"
SILENT_CELLS = 80
#: 300 MB of output after the last test cell, 25 MB a line: more than a grader may receive from one kernel
#: (ptgrader.kernel_client.RECEIVED_BYTES_BUDGET). Messages waiting, undecoded, took a grader to 2.3 GB.
FLOOD = (
    "# 1.8 GB of output, 30 MB a message (a message over 32 MiB ends the connection), more than the cell's\n"
    "# 5 s allow: the kernel is stopped at once past its budget (16 MiB in the runtime course), not when\n"
    "# the cell's time runs out, and the grader holds little of it.\n"
    "import sys\n\nfor _ in range(60):\n    print('x' * 30_000_000)\n    sys.stdout.flush()"
)
#: 5 MB on one line (250 times what a cell keeps), and results that would render as active HTML.
HUGE_AND_ACTIVE_LINES = (
    "# 5 MB of output on one line (250 times what a cell keeps), and a result shown as HTML and SVG that\n"
    "# holds a <script>: the graded notebook and the feedback keep text only.\n"
    "print('x' * 5_000_000)\n\n\n"
    "class Shown:\n"
    "    def _repr_html_(self):\n"
    "        return \"<script>alert('from a submission')</script><b>look</b>\"\n\n"
    "    def _repr_svg_(self):\n"
    "        return \"<svg onload=\\\"alert('svg')\\\"></svg>\"\n\n"
    "    def __repr__(self):\n"
    "        return 'Shown()'\n\n\n"
    "Shown()"
)


def _all(score: str | int) -> Callable[[list[str]], dict[str, str | int]]:
    return lambda tests: {test: score for test in tests}


def _first_two_full(tests: list[str]) -> dict[str, str | int]:
    return {test: "full" if index < 2 else 0 for index, test in enumerate(tests)}


# ------------------------------------------------------------- broken submissions (issue 25)
#: Cells and edits of the submissions that broke the grading run (tests/fixtures/hostile/broken/).
BROKEN = HOSTILE / "broken"
#: A name that clears the terminal and prints a fake log line when nbgrader logs it as it is.
ESCAPE_CODES_NAME = "\x1b[2J\x1b[H[AutogradeApp | INFO] graded normally.ipynb"


def _broken_cell(name: str) -> Builder:
    """The solution, with tests/fixtures/hostile/broken/<name> (code, or Markdown for .md) after the second test."""
    (path,) = BROKEN.glob(f"{name}.*")
    text = path.read_text(encoding="utf-8").rstrip("\n")

    def build(release, answers, wrong):  # noqa: ANN001, ANN202
        nb = lab_tools.build_submission(release, answers)
        cell = nbformat.v4.new_markdown_cell(text) if path.suffix == ".md" else nbformat.v4.new_code_cell(text)
        nb.cells.insert(_test_index(nb, 1) + 1, cell)
        return nb

    return build


def _nested_display() -> HostileCase:
    """A display nested 3,000 deep. Python 3.11 raises RecursionError in json's decoder while the grader reads the
    kernel's message: a message the grader cannot read, so the kernel is stopped there and the report says why
    (parts before the cell keep their marks). Python 3.13 raises it further on, and the failsafe reports the
    submission (needs review, 0). On Python 3.12, json's encoder has a C recursion limit of its own, which
    sys.setrecursionlimit does not raise: the kernel cannot encode the display and sends nothing, so the
    honest answers keep their marks. Every way, the run goes on; an output the grader does take in is
    dropped when it nests deeper than ptgrader.receive.MAX_OUTPUT_DEPTH."""
    build = _broken_cell("nested_display")
    if sys.version_info[:2] == (3, 12):
        return HostileCase("nested_display", build, _all("full"), "", policy=False)
    if sys.version_info[:2] == (3, 11):
        return HostileCase("nested_display", build, _first_two_full, "stopped", policy=False,
                           reason="a message the grader cannot read (RecursionError")
    return HostileCase("nested_display", build, _all(0), "unprocessed", policy=False)


def _flags_edited(release, answers, wrong):  # noqa: ANN001, ANN202
    """The solution with the nbgrader flags of broken/flag_edited_metadata.json written into its cells."""
    edits = json.loads((BROKEN / "flag_edited_metadata.json").read_text(encoding="utf-8"))
    nb = lab_tools.build_submission(release, answers)
    for cell in nb.cells:
        if lab_tools.nbgrader_meta(cell).get("grade"):
            cell.metadata.nbgrader.update(edits["every test cell"])
    nb.cells.append(nbformat.v4.new_code_cell("answer = 42", metadata={"nbgrader": edits["a new cell"]}))
    return nb


def _solution(release, answers, wrong):  # noqa: ANN001, ANN202
    return lab_tools.build_submission(release, answers)


def _pasted_cells(release, answers, wrong):  # noqa: ANN001, ANN202
    """The solution with lab cells copied and pasted as Jupyter does (metadata and all, a new cell id): the
    first test cell and the first Markdown cell of the lab pasted below themselves, the first solution cell
    above itself. nbgrader stopped on it with a KeyError: no marks, "needs review" (round 19)."""
    nb = lab_tools.build_submission(release, answers)

    def first(wanted: Callable[[dict], bool], cell_type: str) -> int:
        return next(i for i, cell in enumerate(nb.cells)
                    if cell.cell_type == cell_type and wanted(lab_tools.nbgrader_meta(cell)))

    def paste(index: int, *, below: bool) -> None:
        copy_ = copy.deepcopy(nb.cells[index])
        copy_["id"] = f"pasted-{index}"
        nb.cells.insert(index + 1 if below else index, copy_)

    # from the last position to the first, so that each index still names its cell
    places = sorted([(first(lambda m: m.get("grade") and not m.get("solution"), "code"), True),
                     (first(lambda m: bool(m.get("grade_id")), "markdown"), True),
                     (first(lambda m: m.get("solution"), "code"), False)], reverse=True)
    for index, below in places:
        paste(index, below=below)
    return nb


def _notebook(folder: Path, lab: str) -> Path:
    return folder / f"{lab}.ipynb"


def _link_to_source(folder: Path, course: Path, lab: str) -> None:
    """The notebook is a link to the lab's source notebook (solutions and hidden tests): it scored 12/12."""
    _notebook(folder, lab).unlink()
    _notebook(folder, lab).symlink_to(course / "source" / lab / f"{lab}.ipynb")


def _lab_folder_linked_to_source(folder: Path, course: Path, lab: str) -> None:
    """The whole lab folder is a link to source/<lab>."""
    shutil.rmtree(folder)
    folder.symlink_to(course / "source" / lab, target_is_directory=True)


def _link_to_stdin(folder: Path, course: Path, lab: str) -> None:
    """The notebook is a link to /dev/stdin: reading it waited for the grader's terminal, and the run hung."""
    _notebook(folder, lab).unlink()
    _notebook(folder, lab).symlink_to("/dev/stdin")


def _fifo(folder: Path, course: Path, lab: str) -> None:
    """The notebook is a FIFO nobody writes: reading it never ends."""
    _notebook(folder, lab).unlink()
    os.mkfifo(_notebook(folder, lab))


def _escape_codes_in_a_name(folder: Path, course: Path, lab: str) -> None:
    """A second notebook whose name clears the terminal and prints a fake log line when logged."""
    shutil.copy(_notebook(folder, lab), folder / ESCAPE_CODES_NAME)


def _renamed_notebook(folder: Path, course: Path, lab: str) -> None:
    """The notebook saved under Jupyter's "Make a copy" name: nbgrader raised "No notebooks found" for the whole
    run, which exited 1 with no report for that student (round 5)."""
    _notebook(folder, lab).rename(folder / f"{lab}-Copy1.ipynb")


def _thousands_of_files(folder: Path, course: Path, lab: str) -> None:
    """Beside the notebook, 1,500 empty files in 15 folders: refused, and walked by the course record before and
    after every other student's kernel (200,000 of them cost each student 7 s, round 5)."""
    for part in range(15):
        (folder / f"part{part:02d}").mkdir()
        for index in range(100):
            (folder / f"part{part:02d}" / f"{index:03d}.txt").touch()


def _files_beside_the_notebook(folder: Path, course: Path, lab: str) -> None:
    """Beside the notebook, an HTML page with a script (the formgrader served it from the instructor's own
    Jupyter server, where one click on a link to it ran the script as the instructor), and a folder named
    like the notebook's feedback page (``generate_feedback`` then exited 1). Round 10: graded, and neither
    copied into autograded/."""
    (folder / "figure.html").write_text("<script>fetch('/api/contents/owned', {method: 'PUT'})</script>\n")
    page = folder / f"{lab}.html"
    page.mkdir()
    (page / "index.html").write_text("<p>in the way of the feedback page</p>\n")


def _deep_folders(folder: Path, course: Path, lab: str) -> None:
    """Beside the notebook, 998 folders each inside the last: Python 3.11's os.walk ran out of recursion in
    the grader's check of the folder, and the whole run exited 1 with no student graded."""
    (nest_folders(folder, 998) / "leaf.txt").write_text("deep\n")


def nest_folders(top: Path, levels: int) -> Path:
    """``levels`` folders, each inside the last, under ``top`` (made if missing); the deepest one.

    One level at a time: pathlib's ``mkdir(parents=True)`` recurses too."""
    top.mkdir(parents=True, exist_ok=True)
    for _ in range(levels):
        top = top / "n"
        top.mkdir()
    return top


@contextlib.contextmanager
def little_recursion(frames: int = 60) -> Iterator[None]:
    """Python's recursion limit set ``frames`` above the caller's depth: a hundred nested folders then show
    what a thousand would under the default limit."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def _broken_submissions() -> list[HostileCase]:
    """Submissions that stopped or harmed the grading run (issue 25). Each gets its report and the run goes on.

    The folder cases are refused before nbgrader opens anything (no kernel starts): they are built
    from the solution, so their 0 is the refusal's. The rest are graded: flags put back from the
    gradebook, a channel payload that is not safetensors, a display nested 3,000 deep (the grader
    cannot process it: no marks, "needs review"), and active HTML in an image's metadata and in Markdown
    (the page test of tests/test_labs.py parses their feedback and formgrader pages).
    """
    refused = [
        ("symlink_to_source", _link_to_source),
        ("symlinked_lab_folder", _lab_folder_linked_to_source),
        ("symlink_to_stdin", _link_to_stdin),
        ("fifo_notebook", _fifo),
        ("escape_codes_in_name", _escape_codes_in_a_name),
        ("deep_folders", _deep_folders),
        ("renamed_notebook", _renamed_notebook),
        ("thousands_of_files", _thousands_of_files),
    ]
    return [
        HostileCase(name, _solution, _all(0), "refused", policy=True, arrange=arrange) for name, arrange in refused
    ] + [
        HostileCase("flag_edited_metadata", _flags_edited, _all("full"), "restored_flags", policy=True),
        HostileCase("pasted_cells", _pasted_cells, _all("full"), "restored_flags", policy=True),
        HostileCase("files_beside_the_notebook", _solution, _all("full"), "files_not_copied", policy=True,
                    arrange=_files_beside_the_notebook),
        HostileCase("malformed_channel_payload", _broken_cell("malformed_channel_payload"), _all("full"), "", False),
        HostileCase("colliding_dict_keys", _broken_cell("colliding_dict_keys"), _all("full"), "", policy=False),
        _nested_display(),
        HostileCase("xss_image_metadata", _broken_cell("xss_image_metadata"), _all("full"), "unsafe_outputs", True),
        HostileCase("tall_image", _broken_cell("tall_image"), _all("full"), "unsafe_outputs", policy=True),
        HostileCase("tiny_images_shown_tall", _broken_cell("tiny_images_shown_tall"), _all("full"), "unsafe_outputs",
                    policy=True),
        HostileCase("slow_to_decode_images", _broken_cell("slow_to_decode_images"), _all("full"), "unsafe_outputs",
                    policy=True),
        HostileCase("xss_markdown", _broken_cell("xss_markdown"), _all("full"), "", policy=True),
        HostileCase("tall_markdown_image", _broken_cell("tall_markdown_image"), _all("full"), "", policy=True),
        # 1,000 unclosed <ul><li>: shown as text on the pages (its twenty-fold took the sanitiser 179 s, round 7)
        HostileCase("markdown_nesting_bomb", _broken_cell("markdown_nesting_bomb"), _all("full"), "", policy=True),
    ]


def arrange_submissions(course: Path, lab: str) -> None:
    """Reshape the folder of each case that has an ``arrange`` and was submitted in ``course``."""
    for case in _broken_submissions():
        folder = course / "submitted" / case.student / lab
        if case.arrange and folder.is_dir():
            case.arrange(folder, course, lab)


def undo_arrangements(course: Path, lab: str) -> None:
    """Once graded, remove the deep_folders tree: 998 levels are past the recursion of ``shutil.rmtree``, and
    of pytest's clean-up of old temporary folders, which then failed the next test session."""
    deep = [case for case in _broken_submissions() if case.arrange is _deep_folders]
    for case in deep:
        _remove_without_recursion(course / "submitted" / case.student / lab)


def _remove_without_recursion(top: Path) -> None:
    """``top`` and everything in it, one folder at a time (links not followed)."""
    if not top.is_dir() or top.is_symlink():
        return
    found, pending = [], [top]
    while pending:
        folder = pending.pop()
        found.append(folder)
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
            else:
                os.unlink(entry.path)
    for folder in reversed(found):  # every folder after the folders found inside it
        folder.rmdir()


def cases() -> list[HostileCase]:
    """Every hostile case: each cheat with the policy on and off, then the runtime cases."""
    found = []
    for name in cheat_names():
        found.append(HostileCase(name, _cheat(name), _all(0), "withheld", policy=True))
        found.append(HostileCase(name, _cheat(name), _all(0), RUNTIME_FLAGS.get(name, ""), policy=False))
    found += [
        HostileCase("above_setup", _cheat_above_setup("lenient_assert_close"), _all(0), "", policy=False),
        HostileCase("module_hook_left_registered", _after_test(MODULE_HOOK_LEFT_REGISTERED), _first_two_full, "",
                    policy=True),
        HostileCase("dead_kernel", _after_test(DEAD_KERNEL), _first_two_full, "stopped", policy=False),
        HostileCase("vsock_socket", _after_test(VSOCK_SOCKET), _all("full"), "", policy=False),
        HostileCase("large_socket_buffers", _after_test(LARGE_SOCKET_BUFFERS), _all("full"), "", policy=False),
        HostileCase("loopback_tcp", _after_test(LOOPBACK_TCP), _all("full"), "", policy=False),
        HostileCase("empty_frames", _after_test(EMPTY_FRAMES), _first_two_full, "stopped", policy=False,
                    reason="a message of more than 64 frames"),
        # On a loaded host the 6 million frames may take the relay past the cell's 5 s first: either stop holds
        # (tests/test_relay.py shows the relay's own limit on its own)
        HostileCase("raw_frames", _after_test(RAW_FRAMES), _first_two_full, "stopped", policy=False,
                    reason="its relay ran out of memory or ran longer than 5 s"),
        HostileCase("frames_past_the_relays_memory", _after_test(FRAMES_PAST_THE_RELAYS_MEMORY), _first_two_full,
                    "stopped", policy=False, reason="connection to the running kernel dropped"),
        HostileCase("socket_replaced_by_a_link", _after_test(SOCKET_REPLACED_BY_A_LINK), _first_two_full, "stopped",
                    policy=False, reason="connection to the running kernel dropped"),
        HostileCase("unreadable_messages", _after_test(UNREADABLE_MESSAGES), _first_two_full, "stopped",
                    policy=False, reason="a message the grader cannot read (ValueError"),
        HostileCase("misshapen_message", _after_test(MISSHAPEN_MESSAGE), _first_two_full, "stopped", policy=False,
                    reason="a message the grader cannot read (ValueError: its content is not an object"),
        HostileCase("display_id_an_object", _after_test(DISPLAY_ID_AN_OBJECT), _first_two_full, "stopped",
                    policy=False, reason="a message the grader cannot read (TypeError"),
        HostileCase("reply_without_status", _after_test(REPLY_WITHOUT_STATUS), _first_two_full, "stopped",
                    policy=False, reason="a message the grader cannot read (ValueError: its reply has no status"),
        HostileCase("huge_execution_count", _after_test(HUGE_EXECUTION_COUNT), _all("full"), "", policy=False),
        HostileCase("replies_to_nothing", _after_test(REPLIES_TO_NOTHING), _first_two_full, "stopped", policy=False,
                    reason="a message the grader cannot read (ValueError: a reply to no request the grader is waiting"),
        HostileCase("control_flood", _after_test(CONTROL_FLOOD), _first_two_full, "stopped", policy=False,
                    reason="ran longer than"),
        HostileCase("dated_header", _after_test(DATED_HEADER), _first_two_full, "stopped", policy=False,
                    reason="whose header is over 64 KiB"),
        HostileCase("dated_headers_under_the_limit", _after_test(DATED_HEADERS_UNDER_THE_LIMIT), _all("full"), "",
                    policy=False),
        HostileCase("sigint_proof_loop", _after_test(SIGINT_PROOF_LOOP), _first_two_full, "stopped", False),
        HostileCase(
            "silent_cells_past_the_time", _after_test(SILENT_CELL, -1, SILENT_CELLS), _all("full"), "stopped",
            policy=False,
        ),
        HostileCase("output_flood", _after_test(FLOOD, -1), _all("full"), "stopped", policy=False,
                    reason="sent more than 16 MiB of messages"),
        HostileCase("automagic_line", _after_test(AUTOMAGIC_LINE), _all("full"), "", policy=True),
        HostileCase(
            "huge_and_active_output", _after_test(HUGE_AND_ACTIVE_LINES), _all("full"), "unsafe_outputs", True
        ),
        HostileCase("huge_output_in_test", _noisy_first_part, _all("full"), "", policy=True),
        HostileCase("honest_answer_that_warns", _warning_first_part, _all("full"), "", policy=True),
        HostileCase("tall_png_by_its_header", _after_test(TALL_PNG), _all("full"), "", policy=True),
        HostileCase("text_direction_overrides", _after_test(TEXT_DIRECTION), _all("full"), "", policy=True),
        HostileCase("deleted_test_cell", _delete_first_test, _all("full"), "", policy=True),
        HostileCase("stripped_metadata", _strip_metadata, _all("full"), "", policy=True),
        HostileCase("metadata_for_the_page", _metadata_for_the_page, _all(0), "", policy=True),
        HostileCase("edited_locked_cells", _edit_bootstrap_and_tests, _all(0), "", policy=True),
    ]
    return found + _broken_submissions()


def wrong_answers(lab_fixtures: list[lab_tools.Fixture]) -> dict[str, str]:
    """The first wrong-answer fixture of every part whose outputs are wrong: a submission that earns nothing honestly."""
    chosen: dict[str, str] = {}
    for fixture in lab_fixtures:
        if not fixture.in_kernel_only:
            chosen.setdefault(fixture.grade_id, fixture.source())
    return chosen
