"""A persistent Python interpreter inside the sandbox, for Code-v0's `run_python`.

A small server process keeps one namespace. It is started from the session shell by an exec with
`keep_alive=True`, so the sandbox records it (on its side, not in a file the agent could edit) and
spares it when it cleans up after later commands; grading kills it with everything else
(`reset_processes`). It runs with a clean, fixed environment in the workspace and a fixed
`PYTHONHASHSEED`, so set iteration order is the same in every run of a seed (and in the grader).

A cell costs what a shell command costs. It is an ordinary exec in the session shell (its timeout
and output cap are the sandbox's), whose command is a relay of bash builtins only: no interpreter or
other program starts. The relay, a subshell, connects to the server over the container's own
loopback (bash's `/dev/tcp`; sandboxes have no network, but they have `lo`) and sends its pid. The
server reads the request (JSON) from the relay's stdin, `/proc/<pid>/fd/0`, and writes the cell's
output to its own stdout and stderr, which it inherited from the session shell: they are the pipes
the sandbox captures the exec's output from. Then it answers the exit status, and the relay exits
with it. A server whose pipes are no longer the relay's (the shell was restarted since) answers
`NOT_RUNNING`, and a fresh one takes its place.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

from agentrl.core import ToolError
from agentrl.sandbox_server.wire.models import WORKDIR

if TYPE_CHECKING:
    from agentrl.sandbox_server import ExecResult, Sandbox

HOME = "/tmp/.agentrl-repl"
READY = f"{HOME}/ready"
PORT = 47219  # on the container's own loopback, which nothing outside the container reaches
NOT_RUNNING = 75  # the relay's exit code when no usable interpreter answers
START_TIMEOUT_S = 20.0
CONTROL_TIMEOUT_S = 10.0
# The sandbox's one-shot environment, so nothing the agent exported reaches the interpreter.
ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": WORKDIR,
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
}

# Runs a cell like a notebook does: statements are executed, the value of a trailing expression is
# printed; a traceback (cell frames only) goes to stderr and the relay exits 1. The first request
# to a fresh interpreter (first start, or one that did not survive an earlier cell) carries the
# earlier successful cells too, replayed silently first, so state persists either way.
# Between cells fds 1 and 2 are /dev/null (what subprocesses inherit, as before); a cell writes to
# its own copies of the shell's pipes, closed when it ends, so a thread it leaves behind cannot
# write into later commands' output.
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
def same(path, fd):
    a, b = os.stat(path), os.fstat(fd)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
def serve(conn):
    global fresh
    with conn.makefile("rb") as lines:
        fds = "/proc/%d/fd/" % int(lines.readline(32))
    if not same(fds + "2", pipes[1]):  # (its fd 1 is the socket while it sends the pid)
        conn.sendall(b"NOT_RUNNING\n")
        return
    with open(fds + "0", "rb") as stdin:
        request = json.loads(stdin.read())
    if fresh:
        for cell in request.get("history", ()):
            run(cell, io.StringIO(), io.StringIO())
        fresh = False
    with open(os.dup(pipes[0]), "w", encoding="utf-8") as out, open(
        os.dup(pipes[1]), "w", encoding="utf-8", errors="backslashreplace"
    ) as err:
        ok = run(request["code"], out, err)
    conn.sendall(b"0\n" if ok else b"1\n")
os.setsid()
pipes = os.dup(1), os.dup(2)
server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen(8)
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
os.dup2(null, 2)
open(sys.argv[2], "x").close()
while True:
    conn, _ = server.accept()
    with conn:
        try:
            serve(conn)
        except Exception as exc:  # said where the exec's stderr is read, and the cell fails
            with contextlib.suppress(OSError):
                os.write(pipes[1], ("[the interpreter failed: %r]\n" % exc).encode())
                conn.sendall(b"1\n")
""".replace("NOT_RUNNING", str(NOT_RUNNING))

# The cell's command: a subshell, so a timeout kills it and leaves the shell as it was, and nothing
# it sets reaches the shell; builtins only, whatever the agent made of the shell's options and IFS
# (`exec` stays bare: only then does its redirection last). Its stdin is the request. The shell's
# stderr is /dev/null around it, so a subshell killed at the timeout is not reported there.
RELAY = (
    "{ ( { builtin set +eux; } 2>/dev/null; exec 2>&4 4>&-; "
    f"exec 3<>/dev/tcp/127.0.0.1/{PORT} || builtin exit {NOT_RUNNING}; "
    "builtin printf '%s\\n' \"$BASHPID\" >&3; "
    'IFS= builtin read -r -u 3 __agentrl_status && builtin exit "$__agentrl_status"; '
    "builtin printf '%s\\n' '[the interpreter ended during the cell]' >&2; builtin exit 1 ); "
    "} 4>&2 2>/dev/null"
)


def start(sandbox: Sandbox) -> None:
    """Stop any interpreter, start one from the session shell (whose output pipes it keeps) in a
    clean environment, and wait until it listens; `keep_alive` makes it outlive the exec. Its code
    travels on the command line, so there is no script file for anyone to edit."""
    stop(sandbox)
    q = shlex.quote
    env = " ".join(f"{k}={q(v)}" for k, v in ENV.items())
    out = sandbox.exec(
        f"( mkdir -p {q(HOME)} && rm -f {q(READY)} || exit 1; "
        f"( cd {q(WORKDIR)} && umask 022 && exec env -i {env} python3 -c {q(SERVER)} {PORT} {q(READY)} ) "
        "</dev/null & "
        f"until [ -e {q(READY)} ]; do kill -0 $! 2>/dev/null || exit 1; sleep 0.005; done )",
        timeout_s=START_TIMEOUT_S,
        mode="session",
        keep_alive=True,
    )
    if out.status != "ok":
        raise ToolError(f"the interpreter did not start ({out.status}): {out.stderr[-300:]}")


def run_cell(
    sandbox: Sandbox, code: str, history: list[str], *, timeout_s: float, max_output_bytes: int
) -> ExecResult:
    """Run one cell; when no usable interpreter answers, a fresh one is started first and given
    the earlier successful cells to replay."""
    request: dict[str, object] = {"code": code}
    for attempt in range(2):
        out = sandbox.exec(
            RELAY,
            stdin=json.dumps(request),
            timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
            mode="session",
        )
        if out.exit_code != NOT_RUNNING or attempt:
            return out
        start(sandbox)
        request["history"] = history
    raise AssertionError("unreachable")


def stop(sandbox: Sandbox) -> None:
    """Kill the interpreter (a stuck one too, and any fork of it) and wait until it is gone; the next
    cell starts a fresh one, which replays the history. Then a no-op in the session shell reads what
    it wrote into the shell's pipes before it died, so none of that reaches the next command."""
    sandbox.exec(
        "while pkill -9 -f '[a]gentrl-repl-server'; do sleep 0.005; done",
        timeout_s=CONTROL_TIMEOUT_S,
        mode="oneshot",
    )
    sandbox.exec("builtin :", timeout_s=CONTROL_TIMEOUT_S, mode="session")
