"""A persistent Python interpreter inside the sandbox, for Code-v0's `run_python`.

A small server process keeps one namespace. It is started by an exec with `keep_alive=True`, so the
sandbox records it (on its side, not in a file the agent could edit) and spares it when it cleans up
after later commands; grading kills it with everything else (`reset_processes`). Each cell is sent
to it over a unix socket by a tiny client run through an ordinary one-shot exec, so timeouts and
output capping stay the sandbox's job. The interpreter runs with a fixed `PYTHONHASHSEED`, so set
iteration order is the same in every run of a seed (and in the grader).
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

from agentrl.core import ToolError

if TYPE_CHECKING:
    from agentrl.sandbox_server import ExecResult, Sandbox

HOME = "/tmp/.agentrl-repl"
SOCKET = f"{HOME}/repl.sock"
NOT_RUNNING = 75  # the client's exit code when no interpreter answers
START_TIMEOUT_S = 20.0

# Runs a cell like a notebook does: statements are executed, the value of a trailing expression is
# printed; a traceback (cell frames only) goes to stderr and the client exits 1. A request carries
# the earlier successful cells too: a fresh interpreter (first start, or one that did not survive
# the previous command) replays them silently first, so state persists either way.
SERVER = r"""# agentrl-repl-server
import ast, contextlib, io, json, os, socket, sys, traceback
namespace = {"__name__": "__main__"}
fresh = True
def run(source, out, err):
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            tree = ast.parse(source, "<cell>")
            tail = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                tail = ast.Expression(tree.body.pop().value)
            exec(compile(tree, "<cell>", "exec"), namespace)
            if tail is not None:
                value = eval(compile(tail, "<cell>", "eval"), namespace)
                if value is not None:
                    print(repr(value))
            return True
        except BaseException as exc:
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != "<cell>":
                tb = tb.tb_next
            traceback.print_exception(type(exc), exc, tb)
            return False
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1] + ".tmp")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
server.listen(1)
while True:
    conn, _ = server.accept()
    with conn:
        chunks = []
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        request = json.loads(b"".join(chunks))
        if fresh:
            for cell in request["history"]:
                run(cell, io.StringIO(), io.StringIO())
        fresh = False
        out, err = io.StringIO(), io.StringIO()
        ok = run(request["code"], out, err)
        reply = json.dumps({"stdout": out.getvalue(), "stderr": err.getvalue(), "ok": ok})
        try:
            conn.sendall(reply.encode())
        except OSError:
            pass
"""

# Sends one request (read from stdin) to the interpreter and prints its reply.
CLIENT = r"""
import json, socket, sys
request = sys.stdin.buffer.read()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(SOCKET)
except OSError:
    sys.exit(NOT_RUNNING)
s.sendall(request)
s.shutdown(socket.SHUT_WR)
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
reply = json.loads(data)
sys.stdout.write(reply["stdout"])
sys.stderr.write(reply["stderr"])
sys.exit(0 if reply["ok"] else 1)
""".replace("NOT_RUNNING", str(NOT_RUNNING)).replace("SOCKET", repr(SOCKET))


def start(sandbox: Sandbox) -> None:
    """Start the interpreter and wait for its socket; `keep_alive` makes it outlive the exec.
    Its code travels on the command line, so there is no script file for anyone to edit."""
    q = shlex.quote
    out = sandbox.exec(
        f"mkdir -p {q(HOME)} && rm -f {q(SOCKET)} {q(SOCKET)}.tmp && PYTHONHASHSEED=0 setsid python3 -u "
        f"-c {q(SERVER)} {q(SOCKET)} </dev/null >/dev/null 2>&1 & "
        f"until [ -S {q(SOCKET)} ]; do sleep 0.005; done",
        timeout_s=START_TIMEOUT_S,
        mode="oneshot",
        keep_alive=True,
    )
    if out.status != "ok":
        raise ToolError(f"the interpreter did not start ({out.status}): {out.stderr[-300:]}")


def run_cell(
    sandbox: Sandbox, code: str, history: list[str], *, timeout_s: float, max_output_bytes: int
) -> ExecResult:
    """Run one cell; the interpreter is (re)started first when it is not running."""
    request = json.dumps({"history": history, "code": code})
    for attempt in range(2):
        # run_code forks the sandbox's already started Python: no interpreter start-up per cell
        out = sandbox.run_code(CLIENT, stdin=request, timeout_s=timeout_s, max_output_bytes=max_output_bytes)
        if out.exit_code != NOT_RUNNING or attempt:
            return out
        start(sandbox)
    raise AssertionError("unreachable")


def restart(sandbox: Sandbox) -> None:
    """Kill a stuck interpreter; the next cell starts a fresh one (and replays the history)."""
    q = shlex.quote
    sandbox.exec(f"pkill -9 -f '[a]gentrl-repl-server'; rm -f {q(SOCKET)}", timeout_s=10, mode="oneshot")
