"""The agent that runs inside every sandbox (standard library only, shipped as text).

It is started once per container and talks over its own stdin/stdout, which the host reaches
through the container's attach stream, so a command costs one round trip instead of one
`docker exec`. Messages both ways are a 4-byte big-endian length followed by UTF-8 JSON; every
reply carries the id of its request. Binary payloads are base64.

In a container the agent runs as root holding only CAP_SETUID/SETGID/KILL (and SETPCAP, used once
to empty the bounding set), non-dumpable; every command runs as the unprivileged user with its own
pipes and no other descriptor. Code in the sandbox therefore cannot signal, trace, read the memory
of, or open the descriptors of the agent. Python scripts start in a fork of a pristine "zygote"
forked before any request, so they skip interpreter start-up without inheriting what the agent has
seen. A reader thread takes frames off stdin while commands run: end of input (the host died) ends
the agent at once, and so does a host that has been silent for longer than the watchdog.

After each command every process of the user it left behind is killed, unless the command asked to
keep them (`keep_alive`); `reset` kills every process of the user.
"""

import base64
import contextlib
import ctypes
import io
import json
import os
import queue
import secrets
import select
import selectors
import shlex
import shutil
import signal
import site  # with -S this does not touch sys.path; Python scripts call site.main()
import socket
import struct
import subprocess
import sys
import tarfile
import threading
import time
import traceback
import types

HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20  # the host sends files in chunks; anything bigger is a broken host
STATUS_FD, COMMAND_FD = 61, 60
ISOLATED = os.environ.get("AGENTRL_AGENT_ISOLATED", "1") == "1"
WORKDIR = os.environ.get("AGENTRL_AGENT_WORKDIR", "/workspace")
STATE_DIR = os.environ.get("AGENTRL_AGENT_STATE", "/run/agentrl")
WATCHDOG_S = float(os.environ.get("AGENTRL_AGENT_WATCHDOG_S", "0"))
UID = GID = int(os.environ.get("AGENTRL_AGENT_UID", "1000"))
SWITCH = ISOLATED and os.getuid() == 0  # commands run as UID, the agent stays out of their reach
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BASE_ENV = {
    "PATH": DEFAULT_PATH if ISOLATED else os.environ.get("PATH", DEFAULT_PATH),
    "HOME": WORKDIR,
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}
# the persistent shell's loop: read "<nonce>\0<stdin path>\0<command>\0" on fd 60, eval the command
# in the shell itself (cd/export/functions persist) without fds 60/61, answer "<nonce> $?" on fd 61
SHELL_LOOP = (
    "while builtin read -r -d '' __agentrl_n <&60 && builtin read -r -d '' __agentrl_in <&60 "
    "&& builtin read -r -d '' __agentrl_cmd <&60; do "
    'builtin eval "$__agentrl_cmd" <"$__agentrl_in" 60<&- 61>&-; '
    'builtin printf "%s %d\\n" "$__agentrl_n" "$?" >&61; done'
)
LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE, PR_CAPBSET_DROP = 4, 24
OUT = sys.stdout.buffer
OUT_LOCK = threading.Lock()
OWN_PIDS = {os.getpid()}  # the agent and its zygote: never a stray, whatever uid they run as
GROUPS = set()  # process groups of commands, killed if the agent must end (unisolated backend)


def send(message):
    data = json.dumps(message, ensure_ascii=False).encode()
    with OUT_LOCK:
        OUT.write(HEADER.pack(len(data)) + data)
        OUT.flush()


def harden():
    """Non-dumpable, and an empty capability bounding set for everything started from here."""
    LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if SWITCH:
        for cap in range(64):
            LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)


def become_user():
    """In a child about to run user code: lowest OOM priority, then the user's uid and nothing else."""
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")  # commands, not the agent, are the OOM killer's victims
    if SWITCH:
        os.setgroups([])
        os.setgid(GID)
        os.setuid(UID)


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


def user_processes():
    """{pid: (ppid, sid)} of the live processes of the user (containers only)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in OWN_PIDS:
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != UID:
                continue
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in (b"Z", b"X"):
            found[int(name)] = (int(fields[1]), int(fields[3]))
    return found


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
            if key.fd == done_fd:
                return "done"
            try:
                data = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not data:
                sel.unregister(key.fd)
                continue
            last = time.monotonic()
            (out if key.data == "out" else err).add(data)


def drain(fds, out, err):
    for fd, cap in zip(fds, (out, err), strict=True):
        for _ in range(1024):
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                break
            if not data:
                break
            cap.add(data)


def as_user(fn, *args):
    """Run `fn(*args)` in a forked child with the user's rights; returns the bytes it yields."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            become_user()
            payload = b"K" + fn(*args)
        except BaseException as exc:
            payload = b"E" + json.dumps([type(exc).__name__, str(exc), error_kind(exc)]).encode()
            code = 1
        try:
            with open(w, "wb") as f:
                f.write(payload)
        finally:
            os._exit(code)
    os.close(w)
    with open(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    if data[:1] == b"K":
        return data[1:]
    name, message, kind = json.loads(data[1:]) if data[:1] == b"E" else ("Error", "helper died", "internal")
    error = {"not_found": FileNotFoundError, "invalid": ValueError}.get(kind, RuntimeError)
    raise error(f"{name}: {message}")


class Zygote:
    """A pristine fork of the agent, made before any request, that forks Python scripts on demand."""

    def __init__(self):
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            self.sock.close()
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            try:
                serve_zygote(child)
            finally:
                os._exit(0)
        child.close()
        OWN_PIDS.add(self.pid)

    def spawn(self, request, out_w, err_w):
        socket.send_fds(self.sock, [json.dumps(request).encode()], [out_w, err_w])
        return int(self.sock.recv(64))

    def status(self):
        return int(self.sock.recv(64))


def serve_zygote(sock):
    site.main()  # once here, not in every script: site-packages are on the path of every fork
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
        if not msg:
            return
        request = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                stdin_fd = os.open(request["stdin"], os.O_RDONLY)
                for fd, target in ((stdin_fd, 0), (fds[0], 1), (fds[1], 2)):
                    os.dup2(fd, target)
                os.closerange(3, 65536)
                become_user()
                LIBC.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
                run_script(request["script"], request["env"])
            finally:
                os._exit(70)
        for fd in fds:
            os.close(fd)
        sock.sendall(b"%d" % pid)
        _, status = os.waitpid(pid, 0)
        sock.sendall(b"%d" % os.waitstatus_to_exitcode(status))


class Agent:
    def __init__(self, zygote):
        self.zygote = zygote
        self.env = dict(BASE_ENV)
        self.shell = None
        self.kept = set()

    # -- processes -------------------------------------------------------------------------------
    def kill_strays(self):
        """Kill every process of the user but the shell, kept processes and their descendants."""
        if not ISOLATED:
            return
        for _ in range(100):
            procs = user_processes()
            self.kept &= set(procs)  # a dead kept process's pid may come back as a stray's
            kept = self.kept
            sids = {p for p in kept if procs[p][1] == p}  # kept session leaders keep their sessions
            shell = self.shell["proc"].pid if self.shell else None
            victims = [p for p in procs if p != shell and not self.survives(p, procs, kept, sids)]
            if not victims:
                return
            for pid in victims:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)

    @staticmethod
    def survives(pid, procs, keep, sids):
        for _ in range(64):
            if pid in keep or procs[pid][1] in sids:
                return True
            pid = procs[pid][0]
            if pid not in procs:
                return False
        return False

    def keep_running(self):
        if ISOLATED:
            shell = self.shell["proc"].pid if self.shell else None
            self.kept = {p for p in user_processes() if p != shell}

    def op_reset(self, req):
        self.stop_shell()
        if SWITCH:
            as_user(kill_everything)
            if user_processes():
                raise RuntimeError("processes of the user survived the reset")
        else:
            for pid in self.kept:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            self.kept = set()
            self.kill_strays()
        self.kept = set()
        return {}

    def op_wipe(self, req):
        """Back to a new sandbox: no process, file or IPC object of the user left (run_code runners)."""
        if not SWITCH:
            raise RuntimeError("wiping needs the agent to run commands as another user")
        self.stop_shell()
        as_user(lambda: kill_everything() + wipe_files())
        self.kept = set()
        left = [d for d in WIPED if os.path.isdir(d) and os.listdir(d)]
        for name in os.listdir(STATE_DIR):
            os.unlink(os.path.join(STATE_DIR, name))
        if left or user_processes() or any(sysv_objects()):
            raise RuntimeError(f"the wipe left something behind: {left or 'IPC objects or processes'}")
        self.env = dict(BASE_ENV)
        return {}

    # -- persistent shell ------------------------------------------------------------------------
    def start_shell(self):
        cmd_r, cmd_w = os.pipe()
        st_r, st_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        os.dup2(cmd_r, COMMAND_FD)
        os.dup2(st_w, STATUS_FD)
        proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-c", SHELL_LOOP],
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            cwd=WORKDIR,
            env=self.env,
            preexec_fn=become_user,
            start_new_session=True,
            pass_fds=(COMMAND_FD, STATUS_FD),
        )
        for fd in (cmd_r, st_w, out_w, err_w, COMMAND_FD, STATUS_FD):
            os.close(fd)
        for fd in (st_r, out_r, err_r):
            os.set_blocking(fd, False)
        GROUPS.add(proc.pid)
        self.shell = {"proc": proc, "cmd": cmd_w, "status": st_r, "out": out_r, "err": err_r, "buf": b""}

    def stop_shell(self):
        shell, self.shell = self.shell, None
        if shell is None:
            return
        with contextlib.suppress(OSError):
            os.killpg(shell["proc"].pid, signal.SIGKILL)
        shell["proc"].wait()
        GROUPS.discard(shell["proc"].pid)
        for fd in (shell["cmd"], shell["status"], shell["out"], shell["err"]):
            os.close(fd)

    def run_session(self, command, stdin_path, timeout_s, idle_timeout_s, cap, keep_alive):
        if self.shell is None:
            self.start_shell()
        shell = self.shell
        out, err = Capture(cap), Capture(cap)
        nonce = secrets.token_hex(8)
        os.write(shell["cmd"], b"\0".join((nonce.encode(), stdin_path.encode(), command.encode(), b"")))
        sel = selectors.DefaultSelector()
        sel.register(shell["out"], selectors.EVENT_READ, "out")
        sel.register(shell["err"], selectors.EVENT_READ, "err")
        sel.register(shell["status"], selectors.EVENT_READ, "status")
        reason = pump(sel, out, err, shell["status"], timeout_s, idle_timeout_s)
        if reason != "timeout":
            status = self.read_status(shell, nonce, None)
        elif ISOLATED:
            # the shell answers as soon as the command's processes are dead, unless the shell
            # itself was busy (a builtin loop): then it is restarted
            self.kill_strays()
            status = self.read_status(shell, nonce, 1.0)
        else:
            status = None
        exit_code = status if isinstance(status, int) else None
        if status == "eof":  # the command ended the shell (`exit`)
            exit_code = shell["proc"].wait()
        if not isinstance(status, int):
            self.stop_shell()
        if keep_alive and reason != "timeout":
            self.keep_running()
        self.kill_strays()
        drain((shell["out"], shell["err"]), out, err)
        sel.close()
        return reason, (None if reason == "timeout" else exit_code), out, err, not isinstance(status, int)

    def read_status(self, shell, nonce, wait_s):
        """This command's exit status from the shell, "eof" if it died, None if `wait_s` passed."""
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while True:
            while b"\n" in shell["buf"]:
                line, shell["buf"] = shell["buf"].split(b"\n", 1)
                got, _, code = line.decode(errors="replace").partition(" ")
                if got == nonce:
                    return int(code)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            with selectors.DefaultSelector() as sel:
                sel.register(shell["status"], selectors.EVENT_READ)
                if not sel.select(remaining):
                    return None
            try:
                data = os.read(shell["status"], 256)
            except BlockingIOError:
                continue
            if not data:
                return "eof"
            shell["buf"] = (shell["buf"] + data)[-4096:]

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
                preexec_fn=become_user,
            )
        out_fd, err_fd = os.dup(proc.stdout.fileno()), os.dup(proc.stderr.fileno())
        proc.stdout.close()
        proc.stderr.close()
        proc.returncode = 0  # reaped below with waitpid, not by Popen
        done = os.pidfd_open(proc.pid)
        return proc.pid, out_fd, err_fd, done, lambda: os.waitstatus_to_exitcode(os.waitpid(proc.pid, 0)[1])

    def spawn_python(self, script_path, stdin_path):
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = self.zygote.spawn({"script": script_path, "stdin": stdin_path, "env": self.env}, out_w, err_w)
        os.close(out_w)
        os.close(err_w)
        return pid, out_r, err_r, self.zygote.sock.fileno(), self.zygote.status

    def run_oneshot(self, command, stdin_path, timeout_s, idle_timeout_s, cap, keep_alive, python_script):
        out, err = Capture(cap), Capture(cap)
        spawn = self.spawn_python if python_script else self.spawn_bash
        pid, out_fd, err_fd, done, reap = spawn(python_script or command, stdin_path)
        GROUPS.add(pid)
        for fd in (out_fd, err_fd):
            os.set_blocking(fd, False)
        sel = selectors.DefaultSelector()
        sel.register(out_fd, selectors.EVENT_READ, "out")
        sel.register(err_fd, selectors.EVENT_READ, "err")
        sel.register(done, selectors.EVENT_READ, "done")
        reason = pump(sel, out, err, done, timeout_s, idle_timeout_s)
        if reason == "timeout" or not keep_alive:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        code = reap()
        GROUPS.discard(pid)
        if keep_alive and reason != "timeout":
            self.keep_running()
        self.kill_strays()
        drain((out_fd, err_fd), out, err)
        sel.close()
        for fd in (out_fd, err_fd) if python_script else (done, out_fd, err_fd):
            os.close(fd)
        return reason, code, out, err, False

    # -- requests --------------------------------------------------------------------------------
    def op_exec(self, req):
        command = req["command"]
        if "\0" in command:
            raise ValueError("the command contains a NUL character")
        token = secrets.token_hex(12)
        stdin_path, script_path = "/dev/null", None
        if req.get("stdin") is not None:
            stdin_path = state_file(f"{token}.in", base64.b64decode(req["stdin"]))
        if req.get("script") is not None:
            name = token + req["script"].get("suffix", "")
            script_path = state_file(name, req["script"]["data"].encode())
            command = command.replace("{script}", shlex.quote(script_path))
        cap = int(req.get("max_output_bytes") or 65536)
        args = (stdin_path, float(req.get("timeout_s") or 30.0), req.get("idle_timeout_s"), cap)
        keep_alive = bool(req.get("keep_alive"))
        before = oom_kills()
        start = time.monotonic()
        try:
            if req.get("mode", "session") == "session":
                result = self.run_session(command, *args, keep_alive)
            else:
                fork = script_path if req.get("fork_python") else None
                result = self.run_oneshot(command, *args, keep_alive, fork)
        finally:
            for path in (stdin_path, script_path):
                if path and path != "/dev/null":
                    os.unlink(path)
        reason, code, out, err, reset = result
        duration_ms = (time.monotonic() - start) * 1000.0
        # a negative code is a signal seen directly (one-shot); 128+N is how a shell reports one
        signum = -code if code is not None and code < 0 else None
        if signum:
            code = 128 + signum
        if reason == "timeout":
            status, code, signum = "timeout", None, None
        elif before >= 0 and oom_kills() > before:
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
            "signal": signum,
            "stdout": stdout,
            "stderr": stderr,
            "stdout_bytes": out.total,
            "stderr_bytes": err.total,
            "truncated": trunc_out or trunc_err,
            "duration_ms": duration_ms,
            "session_reset": reset,
        }

    def op_configure(self, req):
        self.env = {**BASE_ENV, **(req.get("env") or {})}
        self.stop_shell()
        return {}

    def op_write(self, req):
        data = base64.b64decode(req["data"])
        as_user(write_file, resolve(req["path"]), data, int(req.get("mode", 0o644)), bool(req.get("append")))
        return {}

    def op_read(self, req):
        data = as_user(read_file, resolve(req["path"]), int(req.get("max_bytes", 1 << 30)))
        return {"data": base64.b64encode(data).decode()}

    def op_stage(self, req):
        """Append a chunk to a staging file of the agent's own (an archive on its way in)."""
        path = os.path.join(STATE_DIR, "stage-" + req["name"].replace("/", "_"))
        with open(path, "ab" if req.get("append") else "wb") as f:
            f.write(base64.b64decode(req["data"]))
        return {}

    def op_put_tar(self, req):
        path = os.path.join(STATE_DIR, "stage-" + req["name"].replace("/", "_"))
        try:
            with open(path, "rb") as archive:
                as_user(extract, archive, resolve(req["path"]))
        finally:
            os.unlink(path)
        return {}

    def op_get_tar(self, req):
        data = as_user(pack, resolve(req["path"]), int(req.get("max_bytes", 1 << 30)))
        return {"data": base64.b64encode(data).decode()}

    def op_hello(self, req):
        return {"pid": os.getpid(), "isolated": ISOLATED, "switched": SWITCH, "workdir": WORKDIR}

    def handle(self, req):
        try:
            reply = getattr(self, "op_" + req["op"])(req)
            reply["ok"] = True
        except Exception as exc:  # every failure is an answer; the agent must keep serving
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "kind": error_kind(exc)}
        reply["id"] = req.get("id")
        send(reply)


def kill_everything():
    """As the user: SIGKILL every other process of the user until none is left."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        # kill(-1) succeeds while any process is left in the namespace, signalled or not: look
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        if not [pid for pid in user_processes() if pid != os.getpid()]:
            break
        time.sleep(0.001)
    return b""


WIPED = (WORKDIR, "/tmp", "/dev/shm", "/dev/mqueue")


def sysv_objects():
    """The SysV IPC objects (shared memory, queues, semaphores) that exist: (kind, id) pairs."""
    found = []
    for kind in ("shm", "msg", "sem"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}") as f:
            found += [(kind, int(line.split()[1])) for line in list(f)[1:] if line.strip()]
    return found


def wipe_files():
    """As the user, after every process of the user is gone: empty its writable places and IPC."""
    for top in WIPED:
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(top):
                path = os.path.join(top, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
    flag = {"shm": "-m", "msg": "-q", "sem": "-s"}
    for kind, ident in sysv_objects():
        subprocess.run(["ipcrm", flag[kind], str(ident)], check=True, capture_output=True)
    return b""


def state_file(name, data):
    os.makedirs(STATE_DIR, mode=0o711, exist_ok=True)
    path = os.path.join(STATE_DIR, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    with open(fd, "wb") as f:
        f.write(data)
    return path


def write_file(path, data, mode, append):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "ab" if append else "wb") as f:
        f.write(data)
    os.chmod(path, mode)
    return b""


def read_file(path, max_bytes):
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise ValueError(f"the file is {size} bytes, over the limit of {max_bytes}")
        return f.read(max_bytes + 1)[:max_bytes]


def extract(archive, path):
    os.makedirs(path, exist_ok=True)
    with tarfile.open(fileobj=archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(path, filter="data")
        else:  # members were already checked by the host
            tar.extractall(path)
    return b""


def pack(path, max_bytes):
    if not os.path.lexists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(path, arcname=os.path.basename(path.rstrip("/")) or ".")
    if buf.tell() > max_bytes:
        raise ValueError(f"the archive is over the limit of {max_bytes} bytes")
    return buf.getvalue()


def error_kind(exc):
    if isinstance(exc, FileNotFoundError):
        return "not_found"
    if isinstance(exc, (OSError, ValueError, tarfile.TarError)):
        return "invalid"
    return "internal"


def resolve(path):
    return os.path.join(WORKDIR, path)


def run_script(path, env):
    """Be `python3 path` in this forked child: fresh streams, environment, argv, site and exit code.

    The working directory comes first on sys.path (files sent beside a script import), and a
    traceback shows the script's frames only, as `python3 script.py` would.
    """
    os.chdir(WORKDIR)
    os.environ.clear()
    os.environ.update(env)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115
    sys.argv = [path]
    sys.path.insert(0, WORKDIR)
    main = types.ModuleType("__main__")
    main.__file__ = path
    sys.modules["__main__"] = main
    code = 0
    try:
        with open(path, "rb") as f:
            source = f.read()
        exec(compile(source, path, "exec"), main.__dict__)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb)
        code = 1
    with contextlib.suppress(BaseException):
        threading._shutdown()
        import atexit

        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(code & 0xFF)


def read_frames(requests):
    """The reader thread: frames from the host into `requests`; end of input or silence ends the agent."""
    fd = sys.stdin.fileno()
    buf = bytearray()
    while True:
        ready = WATCHDOG_S <= 0 or bool(select.select([fd], [], [], WATCHDOG_S)[0])
        chunk = os.read(fd, 1 << 20) if ready else b""
        if not chunk:
            die("the host went away" if ready else f"no word from the host for {WATCHDOG_S:g} s")
        buf += chunk
        while len(buf) >= 4:
            (size,) = HEADER.unpack(buf[:4])
            if size > MAX_FRAME:
                die(f"a frame of {size} bytes from the host")
            if len(buf) < 4 + size:
                break
            req = json.loads(bytes(buf[4 : 4 + size]))
            del buf[: 4 + size]
            if req.get("op") != "beat":
                requests.put(req)


def die(why):
    """End the agent and with it the container (its init exits with its only child)."""
    print(f"agentrl agent: {why}", file=sys.stderr, flush=True)
    for group in list(GROUPS):
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)
    os._exit(0)


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    harden()
    os.makedirs(STATE_DIR, mode=0o711, exist_ok=True)
    agent = Agent(Zygote())
    requests = queue.SimpleQueue()
    threading.Thread(target=read_frames, args=(requests,), daemon=True).start()
    while True:
        agent.handle(requests.get())


if __name__ == "__main__":
    main()
