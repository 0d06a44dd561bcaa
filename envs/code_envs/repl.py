"""A persistent Python interpreter inside the sandbox, for Code-v0's `run_python`.

A small server process (started once per sandbox, in its own session so it outlives the exec
that started it) keeps one namespace; each cell is sent to it over a unix socket by a tiny
client run through an ordinary exec, so timeouts and output capping stay the sandbox's job.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrl.sandbox_server import ExecResult, Sandbox

HOME = "/tmp/.agentrl-repl"
SOCKET = f"{HOME}/repl.sock"
# The sandbox kills processes left behind by a command except those listed here.
KEEP_FILE = "/tmp/.agentrl-keep"

# Runs a cell like a notebook does: statements are executed, the value of a trailing expression is
# printed; a traceback (cell frames only) goes to stderr and the client exits 1. A request carries
# the earlier successful cells too: a fresh interpreter (first start, or one that did not survive
# the previous command) replays them silently first, so state persists either way.
SERVER = r"""
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
with open(sys.argv[2], "a") as f:
    f.write("%d\n" % os.getpid())
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

# Connects to the interpreter, starting it first when nobody answers; the request comes on stdin.
CLIENT = r"""
import json, os, socket, subprocess, sys, time
path, home = sys.argv[1], os.path.dirname(sys.argv[1])
request = sys.stdin.buffer.read()
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s
try:
    s = connect()
except OSError:
    for stale in (path, path + ".tmp"):
        if os.path.exists(stale):
            os.unlink(stale)
    subprocess.Popen([sys.executable, "-u", home + "/server.py", path, sys.argv[2]], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(path):
        time.sleep(0.002)
    s = connect()
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
"""


def install(sandbox: Sandbox) -> None:
    """Put the interpreter's two scripts into a new sandbox."""
    sandbox.write_file(f"{HOME}/server.py", SERVER.encode())
    sandbox.write_file(f"{HOME}/client.py", CLIENT.encode())


def run_cell(
    sandbox: Sandbox, code: str, history: list[str], *, timeout_s: float, max_output_bytes: int
) -> ExecResult:
    """Run one cell; the interpreter is (re)started when it is not running."""
    q = shlex.quote
    return sandbox.exec(
        f"python3 {q(HOME)}/client.py {q(SOCKET)} {q(KEEP_FILE)}",
        stdin=json.dumps({"history": history, "code": code}),
        timeout_s=timeout_s,
        mode="oneshot",
        max_output_bytes=max_output_bytes,
    )


def restart(sandbox: Sandbox) -> None:
    """Kill a stuck interpreter; the next cell starts a fresh one (and replays the history)."""
    q = shlex.quote
    sandbox.exec(
        f"pkill -9 -f {q(HOME)}/server.py; rm -f {q(SOCKET)}",
        timeout_s=10,
        mode="oneshot",
    )
