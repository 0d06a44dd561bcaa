"""How the in-sandbox agent runs commands (standard library only, shipped as text with main.py).

The host sends this file's text along with the agent's and the agent imports it as
`agentrl_agent_commands`. `Commands` holds what a command needs and leaves behind: the persistent
shell (session mode), one-shot processes (bash, or a Python script forked from the zygote), the
processes of the user kept alive or killed after each command, and the requests that run, reset or
wipe them. The agent (main.py) adds the file transfers and the loop that serves requests.
"""

import base64
import contextlib
import os
import secrets
import selectors
import shlex
import signal
import subprocess
import time

from agentrl_agent_lib import (  # pyright: ignore[reportMissingImports]  # a module only in the sandbox: agent/__init__.py
    BASE_ENV,
    COMMAND_FD,
    GROUPS,
    ISOLATED,
    SHELL_LOOP,
    STATE_DIR,
    STATUS_FD,
    SWITCH,
    WORKDIR,
    Capture,
    as_user,
    become_user,
    drain,
    kill_everything,
    oom_kills,
    pump,
    state_file,
    user_processes,
)
from agentrl_agent_wipe import (  # pyright: ignore[reportMissingImports]  # as above, sent along with this file
    fix_tops,
    leftovers,
    wipe_files,
)


class Commands:
    """The agent's commands and the processes they leave: one instance, since every request shares
    its shell, its zygote and the state of its processes."""

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

    # -- requests that run commands ------------------------------------------------------------
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
