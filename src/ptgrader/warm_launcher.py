"""The process jupyter_client starts for a warm grading kernel: it asks the warm server for one.

Run as a script (``python -I -S .../warm_launcher.py SOCKET SPEC.json KERNEL-ARGS...``), never
imported: it loads the standard library only, so it starts in milliseconds. It hands the server
the jail's spec, the kernel's arguments and its standard streams, then stands in for the keeper
the server forked: a signal sent to it (an interrupt) is passed on, and it exits with the
keeper's exit status. If it is killed, the server sees its connection close and kills the keeper,
and with it the jailed kernel. A server that does not answer within the deadline fails this start
only: the grader then starts the kernel cold.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

#: How long the server may take to fork a keeper (seconds).
ANSWER_DEADLINE_S = 30


def main(argv: list[str]) -> int:
    server, spec, kernel_args = argv[0], argv[1], argv[2:]
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(ANSWER_DEADLINE_S)
    try:
        connection.connect(server)
        request = json.dumps({"op": "kernel", "argv": kernel_args, "spec": spec})
        socket.send_fds(connection, [request.encode() + b"\n"], [0, 1, 2])
        replies = connection.makefile("r", encoding="utf-8")
        keeper = int(replies.readline())
    except (OSError, ValueError) as problem:
        print(f"ptgrader warm launcher: the warm server did not start a kernel: {problem}", file=sys.stderr)
        return 1
    connection.settimeout(None)

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(keeper, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(signum, forward)
    try:
        status = replies.readline()  # written by the server when the keeper exits
    except OSError:
        return 1
    return int(status) if status.strip().lstrip("-").isdigit() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
