"""The agent that runs inside every sandbox (standard library only, shipped as text).

It is started once per container and talks over its own stdin/stdout, which the host reaches
through the container's attach stream, so a command costs one round trip instead of one
`docker exec` (a new process, a new API call and a new stream each time). Messages both ways are a
4-byte big-endian length followed by UTF-8 JSON; binary payloads are base64.

Commands run either in one persistent bash per sandbox (state survives between calls) or in a
fresh `bash -c`. Output is read while the command runs, so a chatty program never blocks on a full
pipe, and only a head and a tail are kept, with the total byte counts. After each command, and on
a time-out, every process the command left behind is killed: inside a container that is simply
every process but init, this agent and the shell.
"""

import atexit
import base64
import contextlib
import io
import json
import os
import runpy
import selectors
import shlex
import signal
import site  # with -S this does not touch sys.path; forked Python scripts call site.main()
import struct
import subprocess
import sys
import tarfile
import threading
import time
import traceback

HEADER = struct.Struct(">I")
STATUS_FD, COMMAND_FD = 61, 60
ISOLATED = os.environ.get("AGENTRL_AGENT_ISOLATED", "1") == "1"
WORKDIR = os.environ.get("AGENTRL_AGENT_WORKDIR", "/workspace")
STATE_DIR = os.environ.get("AGENTRL_AGENT_STATE", "/tmp/.agentrl")
KEEP_FILE = "/tmp/.agentrl-keep"
# the loop the persistent shell runs: read "<stdin path>\0<command>\0" on fd 60, eval the command in
# the shell itself (so cd/export/functions persist), report $? on fd 61
SHELL_LOOP = (
    "while IFS= read -r -d '' __agentrl_in <&60 && IFS= read -r -d '' __agentrl_cmd <&60; do "
    'eval "$__agentrl_cmd" <"$__agentrl_in"; printf "%d\\n" "$?" >&61; done'
)


def read_exact(stream, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = stream.read(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def send(message):
    data = json.dumps(message, ensure_ascii=False).encode()
    sys.stdout.buffer.write(HEADER.pack(len(data)) + data)
    sys.stdout.buffer.flush()


class Capture:
    """Keeps the first and last `cap // 2` bytes of a stream and counts all of it."""

    def __init__(self, cap):
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data):
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self):
        if len(self.tail) > self.half:
            del self.tail[: len(self.tail) - self.half]
        omitted = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if omitted > 0:
            return head + f"\n...[{omitted} bytes omitted]...\n" + tail, True
        return head + tail, False


def oom_kills():
    """The memory cgroup's OOM-kill counter (cgroup v2 or v1), or -1 when not readable."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            continue
    return -1


def kept_pids():
    """Pids a command asked to outlive it, one a line in KEEP_FILE (e.g. a long-lived helper server)."""
    try:
        with open(KEEP_FILE) as f:
            return {int(line) for line in f if line.strip().isdigit()}
    except OSError:
        return set()


def kill_strays(keep):
    """Kill every live process but init, this agent, `keep` and those in KEEP_FILE (containers only)."""
    if not ISOLATED:
        return
    keep = {1, os.getpid(), *keep, *kept_pids()}
    for _ in range(100):
        victims = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in keep:
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in (b"Z", b"X"):
                victims.append(int(name))
        if not victims:
            return
        for pid in victims:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


def set_nonblocking(fd):
    os.set_blocking(fd, False)


def pump(sel, out, err, done_fd, timeout_s, idle_timeout_s):
    """Read output until `done_fd` is readable or a deadline passes; returns the reason."""
    start = time.monotonic()
    last = start
    while True:
        now = time.monotonic()
        wait = start + timeout_s - now
        if idle_timeout_s:
            wait = min(wait, last + idle_timeout_s - now)
        if wait <= 0:
            return "timeout"
        for key, _ in sel.select(wait):
            fd = key.fd
            if fd == done_fd:
                return "done"
            try:
                data = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not data:
                sel.unregister(fd)
                continue
            last = time.monotonic()
            (out if key.data == "out" else err).add(data)


def drain(fds, out, err):
    for fd, cap in zip(fds, (out, err), strict=False):
        for _ in range(1024):
            try:
                data = os.read(fd, 1 << 16)
            except (BlockingIOError, OSError):
                break
            if not data:
                break
            cap.add(data)


class Agent:
    def __init__(self):
        os.makedirs(STATE_DIR, mode=0o700, exist_ok=True)
        self.env = dict(os.environ)
        for key in list(self.env):
            if key.startswith("AGENTRL_AGENT_"):
                del self.env[key]
        self.shell = None
        self.counter = 0

    # -- persistent shell ------------------------------------------------------------------------
    def start_shell(self):
        cmd_r, cmd_w = os.pipe()
        st_r, st_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()

        # the shell finds its command and status pipes at fixed numbers, out of the way of scripts
        os.dup2(cmd_r, COMMAND_FD)
        os.dup2(st_w, STATUS_FD)
        proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-c", SHELL_LOOP],
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            cwd=WORKDIR,
            env=self.env,
            preexec_fn=raise_oom_score,
            start_new_session=True,
            pass_fds=(COMMAND_FD, STATUS_FD),
        )
        for fd in (cmd_r, st_w, out_w, err_w, COMMAND_FD, STATUS_FD):
            os.close(fd)
        for fd in (st_r, out_r, err_r):
            set_nonblocking(fd)
        self.shell = {"proc": proc, "cmd": cmd_w, "status": st_r, "out": out_r, "err": err_r, "buf": b""}

    def stop_shell(self):
        shell, self.shell = self.shell, None
        if shell is None:
            return
        with contextlib.suppress(OSError):
            os.killpg(shell["proc"].pid, signal.SIGKILL)
        shell["proc"].wait()
        for fd in (shell["cmd"], shell["status"], shell["out"], shell["err"]):
            os.close(fd)

    def run_session(self, command, stdin_path, timeout_s, idle_timeout_s, cap):
        if self.shell is None:
            self.start_shell()
        shell = self.shell
        out, err = Capture(cap), Capture(cap)
        os.write(shell["cmd"], stdin_path.encode() + b"\0" + command.encode() + b"\0")
        sel = selectors.DefaultSelector()
        sel.register(shell["out"], selectors.EVENT_READ, "out")
        sel.register(shell["err"], selectors.EVENT_READ, "err")
        sel.register(shell["status"], selectors.EVENT_READ, "status")
        reason = pump(sel, out, err, shell["status"], timeout_s, idle_timeout_s)
        shell_pid = shell["proc"].pid
        if reason != "timeout":
            status = self.read_status(shell, None)
        elif ISOLATED:
            # the shell answers with $? as soon as the command's processes are dead, unless the
            # shell itself was busy (a builtin loop): then it is restarted
            kill_strays({shell_pid})
            status = self.read_status(shell, 1.0)
        else:
            status = None
        exit_code = status if isinstance(status, int) else None
        if status == "eof":  # the command ended the shell (`exit`)
            code = shell["proc"].wait()
            exit_code = 128 - code if code < 0 else code
        kill_strays({shell_pid} if isinstance(status, int) else set())
        drain((shell["out"], shell["err"]), out, err)
        sel.close()
        reset = not isinstance(status, int)
        if reset:
            self.stop_shell()
        return reason, (None if reason == "timeout" else exit_code), out, err, reset

    def read_status(self, shell, wait_s):
        """The next exit status from the shell, "eof" if it died, None if `wait_s` passed."""
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while b"\n" not in shell["buf"]:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            sel = selectors.DefaultSelector()
            sel.register(shell["status"], selectors.EVENT_READ)
            ready = sel.select(remaining)
            sel.close()
            if not ready:
                return None
            try:
                data = os.read(shell["status"], 64)
            except BlockingIOError:
                continue
            if not data:
                return "eof"
            shell["buf"] += data
        line, shell["buf"] = shell["buf"].split(b"\n", 1)
        return int(line)

    # -- one-shot --------------------------------------------------------------------------------
    def spawn_bash(self, command, stdin_path):
        with open(stdin_path, "rb") as stdin:
            proc = subprocess.Popen(
                ["bash", "--noprofile", "--norc", "-c", command],
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=WORKDIR,
                env=self.env,
                start_new_session=True,
                preexec_fn=raise_oom_score,
            )
        out_fd, err_fd = os.dup(proc.stdout.fileno()), os.dup(proc.stderr.fileno())
        proc.stdout.close()
        proc.stderr.close()
        proc.returncode = 0  # reaped below with waitpid, not by Popen
        return proc.pid, out_fd, err_fd

    def spawn_python(self, script_path, stdin_path):
        """Run a Python script in a fork of this already started interpreter: no interpreter start-up."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns
            try:
                os.setsid()
                stdin_fd = os.open(stdin_path, os.O_RDONLY)
                for fd, target in ((stdin_fd, 0), (out_w, 1), (err_w, 2)):
                    os.dup2(fd, target)
                os.closerange(3, 65536)
                run_script(script_path, self.env)
            finally:
                os._exit(70)
        os.close(out_w)
        os.close(err_w)
        return pid, out_r, err_r

    def run_oneshot(self, command, stdin_path, timeout_s, idle_timeout_s, cap, python_script=None):
        out, err = Capture(cap), Capture(cap)
        if python_script is not None:
            pid, out_fd, err_fd = self.spawn_python(python_script, stdin_path)
        else:
            pid, out_fd, err_fd = self.spawn_bash(command, stdin_path)
        fds = (out_fd, err_fd)
        for fd in fds:
            set_nonblocking(fd)
        done = os.pidfd_open(pid)
        sel = selectors.DefaultSelector()
        sel.register(fds[0], selectors.EVENT_READ, "out")
        sel.register(fds[1], selectors.EVENT_READ, "err")
        sel.register(done, selectors.EVENT_READ, "done")
        reason = pump(sel, out, err, done, timeout_s, idle_timeout_s)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        kill_strays({self.shell["proc"].pid} if self.shell else set())
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        drain(fds, out, err)
        sel.close()
        for fd in (done, *fds):
            os.close(fd)
        return reason, (128 - code if code < 0 else code), out, err, False

    # -- requests --------------------------------------------------------------------------------
    def op_exec(self, req):
        self.counter += 1
        os.makedirs(STATE_DIR, mode=0o700, exist_ok=True)  # a scrub may have removed it
        stdin_path = "/dev/null"
        if req.get("stdin") is not None:
            stdin_path = os.path.join(STATE_DIR, f"stdin-{self.counter}")
            with open(stdin_path, "wb") as f:
                f.write(base64.b64decode(req["stdin"]))
        command = req["command"]
        if "\0" in command:
            raise ValueError("the command contains a NUL character")
        script_path = None
        if req.get("script") is not None:
            script_path = os.path.join(
                STATE_DIR, "script-{}{}".format(self.counter, req["script"].get("suffix", ""))
            )
            with open(script_path, "w") as f:
                f.write(req["script"]["data"])
            command = command.replace("{script}", shlex.quote(script_path))
        args = (
            command,
            stdin_path,
            float(req.get("timeout_s") or 30.0),
            req.get("idle_timeout_s"),
            int(req.get("max_output_bytes") or 65536),
        )
        before = oom_kills()
        start = time.monotonic()
        try:
            if req.get("mode", "session") == "session":
                reason, code, out, err, reset = self.run_session(*args)
            else:
                fork = script_path if req.get("fork_python") else None
                reason, code, out, err, reset = self.run_oneshot(*args, python_script=fork)
        finally:
            for path in (stdin_path, script_path):
                if path and path != "/dev/null":
                    os.unlink(path)
        duration_ms = (time.monotonic() - start) * 1000.0
        oom = before >= 0 and oom_kills() > before
        if reason == "timeout":
            status, code = "timeout", None
        elif oom:
            status = "oom"
        elif code == 0:
            status = "ok"
        elif code is not None and 128 < code <= 128 + 64:
            status = "killed"
        else:
            status = "error"
        stdout, trunc_out = out.text()
        stderr, trunc_err = err.text()
        return {
            "status": status,
            "exit_code": code,
            "stdout": stdout,
            "stderr": stderr,
            "stdout_bytes": out.total,
            "stderr_bytes": err.total,
            "truncated": trunc_out or trunc_err,
            "duration_ms": duration_ms,
            "session_reset": reset,
        }

    def op_configure(self, req):
        self.env.update(req.get("env") or {})
        self.stop_shell()
        return {}

    def op_write(self, req):
        path = resolve(req["path"])
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(req["data"]))
        os.chmod(path, int(req.get("mode", 0o644)))
        return {}

    def op_read(self, req):
        path = resolve(req["path"])
        size = os.path.getsize(path)
        if size > int(req.get("max_bytes", 1 << 62)):
            raise ValueError(f"{req['path']} is {size} bytes, over the limit of {req['max_bytes']}")
        with open(path, "rb") as f:
            return {"data": base64.b64encode(f.read()).decode()}

    def op_put_tar(self, req):
        path = resolve(req["path"])
        os.makedirs(path, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(req["data"]))) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(path, filter="data")
            else:
                tar.extractall(path)
        return {}

    def op_get_tar(self, req):
        path = resolve(req["path"])
        if not os.path.exists(path):
            raise FileNotFoundError(2, "No such file or directory", req["path"])
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(path, arcname=os.path.basename(path.rstrip("/")) or ".")
        if buf.tell() > int(req.get("max_bytes", 1 << 62)):
            raise ValueError(f"archive of {req['path']} is over the limit of {req['max_bytes']} bytes")
        return {"data": base64.b64encode(buf.getvalue()).decode()}

    def op_hello(self, req):
        return {"pid": os.getpid(), "isolated": ISOLATED, "workdir": WORKDIR}

    def serve(self):
        stdin = sys.stdin.buffer
        while True:
            try:
                (size,) = HEADER.unpack(read_exact(stdin, 4))
                req = json.loads(read_exact(stdin, size))
            except EOFError:
                self.stop_shell()
                return
            try:
                reply = getattr(self, "op_" + req["op"])(req)
                reply["ok"] = True
            except Exception as exc:  # every failure is an answer; the agent must keep serving
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "kind": error_kind(exc)}
            reply["id"] = req.get("id")
            send(reply)


def error_kind(exc):
    if isinstance(exc, FileNotFoundError):
        return "not_found"
    if isinstance(exc, (OSError, ValueError, tarfile.TarError)):
        return "invalid"
    return "internal"


def resolve(path):
    return os.path.join(WORKDIR, path)


def run_script(path, env):
    """Be `python3 path` in this forked child: fresh std streams, environment, argv, site and exit code."""
    os.chdir(WORKDIR)
    raise_oom_score()
    os.environ.clear()
    os.environ.update(env)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115
    sys.argv = [path]
    sys.path.insert(0, os.path.dirname(path))
    site.main()  # the agent runs without site; the script gets site-packages like `python3` would
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        threading._shutdown()
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(code & 0xFF)


def raise_oom_score():
    # make commands (not the agent) the OOM killer's victims; raising needs no privilege
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    Agent().serve()
