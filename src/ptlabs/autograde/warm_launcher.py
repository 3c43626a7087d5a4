"""The process jupyter_client starts for a warm grading kernel: it asks the warm server for one.

Run as a script (``python .../warm_launcher.py SOCKET KERNEL-ARGS...``), never imported: a script
does not import the ``ptlabs`` package, so this process starts in milliseconds with the standard
library only. It hands the server its working folder, environment and standard streams, then
stands in for the kernel the server forked: a signal sent to it (an interrupt) is passed on, and
it exits with the kernel's exit status. If it is killed, the server sees its connection close and
kills the kernel.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys


def main(argv: list[str]) -> int:
    server, kernel_args = argv[0], argv[1:]
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(server)
    request = json.dumps({"op": "kernel", "argv": kernel_args, "cwd": os.getcwd(), "env": dict(os.environ)})
    socket.send_fds(connection, [request.encode() + b"\n"], [0, 1, 2])
    replies = connection.makefile("r", encoding="utf-8")
    kernel_pid = int(replies.readline())

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(kernel_pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(signum, forward)
    status = replies.readline()  # written by the server when the kernel exits
    return int(status) if status.strip() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
