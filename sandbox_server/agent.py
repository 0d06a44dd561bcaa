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
seen; the zygote forks each script's process ahead of its request (a root "spare"), so a call does
not wait on a fork either. A reader thread takes frames off stdin while commands run: end of input
(the host died) ends the agent at once, and so does a host that has been silent for longer than
the watchdog.

After each command every process of the user it left behind is killed, unless the command asked to
keep them (`keep_alive`); `reset` kills every process of the user.

One class, `Agent`, holds every operation, since they share its shell, its zygote and the state of
its processes; what they are built from is in agent_lib.py, agent_files.py and agent_wipe.py.
"""

import base64
import contextlib
import json
import os
import queue
import secrets
import select
import selectors
import shlex
import signal
import subprocess
import sys
import threading
import time

from agentrl_agent_files import (  # pyright: ignore[reportMissingImports]  # a module only in the sandbox: channel.py
    copy_file,
    extract,
    pack,
    read_file,
    write_file,
)
from agentrl_agent_lib import (  # pyright: ignore[reportMissingImports]  # as above, sent along with this file
    BASE_ENV,
    COMMAND_FD,
    GROUPS,
    HEADER,
    ISOLATED,
    MAX_FRAME,
    SHELL_LOOP,
    STATE_DIR,
    STATUS_FD,
    SWITCH,
    WATCHDOG_S,
    WORKDIR,
    Capture,
    Zygote,
    as_user,
    as_user_to,
    become_user,
    drain,
    error_kind,
    harden,
    kill_everything,
    oom_kills,
    pump,
    state_file,
    user_processes,
)
from agentrl_agent_wipe import (  # pyright: ignore[reportMissingImports]  # as above, sent along with this file
    fix_tops,
    leftovers,
    record_fixed,
    wipe_files,
)

OUT = sys.stdout.buffer
OUT_LOCK = threading.Lock()


def send(message):
    data = json.dumps(message, ensure_ascii=False).encode()
    with OUT_LOCK:
        OUT.write(HEADER.pack(len(data)) + data)
        OUT.flush()


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
        """Back to a new sandbox: no process, file or IPC object of the user left (run_code runners).

        Most calls leave nothing behind (their processes were killed when they ended): then no
        helper is forked to wipe as the user, the check alone is done."""
        if not SWITCH:
            raise RuntimeError("wiping needs the agent to run commands as another user")
        self.stop_shell()
        self.kept = set()
        for name in os.listdir(STATE_DIR):
            os.unlink(os.path.join(STATE_DIR, name))
        left = leftovers()
        if left:
            as_user(lambda: kill_everything() + fix_tops() + wipe_files() + fix_tops())
            fix_tops()  # the directories the agent owns (/tmp, /dev/shm)
            left = leftovers()
        if left:
            raise RuntimeError(f"the wipe left something behind: {', '.join(left)}")
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
        return self.shell

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
        shell = self.shell if self.shell is not None else self.start_shell()
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
        stdout, stderr = proc.stdout, proc.stderr
        assert stdout is not None and stderr is not None  # both PIPE
        out_fd, err_fd = os.dup(stdout.fileno()), os.dup(stderr.fileno())
        stdout.close()
        stderr.close()
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
        # the host's ExecOptions, flat as in the HTTP body (models.py); the host sends every field
        token = secrets.token_hex(12)
        stdin_path, script_path = "/dev/null", None
        if req.get("stdin_b64") is not None:
            stdin_path = state_file(f"{token}.in", base64.b64decode(req["stdin_b64"]))
        elif req.get("stdin") is not None:
            stdin_path = state_file(f"{token}.in", req["stdin"].encode())
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
        as_user(write_file, req["path"], data, int(req.get("mode", 0o644)), bool(req.get("append")))
        return {}

    def op_download(self, req):
        """A file (or a tar archive of a path) read as the user into a file of the agent's own, fetched
        by the host a chunk at a time; a small one comes back at once."""
        path = os.path.join(STATE_DIR, "out-" + req["name"].replace("/", "_"))
        max_bytes = int(req["max_bytes"])
        try:
            with open(path, "wb") as out:
                if req.get("archive"):
                    size = as_user_to(out, max_bytes, pack, req["path"], max_bytes)
                else:
                    size = as_user_to(out, max_bytes, read_file, req["path"], max_bytes)
            if size <= int(req["inline_bytes"]):
                with open(path, "rb") as f:
                    data = f.read()
                os.unlink(path)
                return {"size": size, "data": base64.b64encode(data).decode()}
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            raise
        return {"size": size}

    def op_fetch(self, req):
        path = os.path.join(STATE_DIR, "out-" + req["name"].replace("/", "_"))
        with open(path, "rb") as f:
            f.seek(int(req["offset"]))
            data = f.read(int(req["size"]))
        return {"data": base64.b64encode(data).decode()}

    def op_drop(self, req):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(STATE_DIR, "out-" + req["name"].replace("/", "_")))
        return {}

    def op_stage(self, req):
        """Append a chunk to a staging file of the agent's own (an archive on its way in)."""
        path = os.path.join(STATE_DIR, "stage-" + req["name"].replace("/", "_"))
        try:
            with open(path, "ab" if req.get("append") else "wb") as f:
                f.write(base64.b64decode(req["data"]))
        except BaseException:  # a half-staged file would keep the space for good (full disk)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            raise
        return {}

    def op_put_file(self, req):
        """Put a staged file in place, written by the user (the staged copy is the agent's own)."""
        path = os.path.join(STATE_DIR, "stage-" + req["name"].replace("/", "_"))
        try:
            with open(path, "rb") as staged:
                as_user(copy_file, staged, req["path"], int(req.get("mode", 0o644)))
        finally:
            os.unlink(path)
        return {}

    def op_put_tar(self, req):
        path = os.path.join(STATE_DIR, "stage-" + req["name"].replace("/", "_"))
        try:
            with open(path, "rb") as archive:
                as_user(extract, archive, req["path"])
        finally:
            os.unlink(path)
        return {}

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
    if SWITCH:  # the wiped directories start in the state every wipe puts back
        as_user(fix_tops)
        fix_tops()
        record_fixed()
    agent = Agent(Zygote())
    requests = queue.SimpleQueue()
    threading.Thread(target=read_frames, args=(requests,), daemon=True).start()
    while True:
        agent.handle(requests.get())


if __name__ == "__main__":
    main()
