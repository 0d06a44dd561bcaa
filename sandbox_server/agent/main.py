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

One object, `Agent`, holds every operation, since they share its shell, its zygote and the state of
its processes: how commands run is in commands.py, what they are built from in lib.py, files.py and
wipe.py (the package's `__init__.py` sends them all as one program).
"""

import base64
import contextlib
import json
import os
import queue
import select
import signal
import socket
import sys
import threading
import time

from agentrl_agent_commands import Commands  # pyright: ignore[reportMissingImports]  # a module only in the sandbox: agent/__init__.py
from agentrl_agent_files import (  # pyright: ignore[reportMissingImports]  # as above, sent along with this file
    extract,
    pack,
    read_file,
    write_file,
)
from agentrl_agent_lib import (  # pyright: ignore[reportMissingImports]  # as above, sent along with this file
    GROUPS,
    HEADER,
    ISOLATED,
    MAX_FRAME,
    STATE_DIR,
    SWITCH,
    WATCHDOG_S,
    WORKDIR,
    Zygote,
    as_user,
    as_user_to,
    error_kind,
    harden,
)
from agentrl_agent_wipe import (  # pyright: ignore[reportMissingImports]  # as above, sent along with this file
    fix_tops,
    record_fixed,
)

OUT = sys.stdout.buffer
OUT_LOCK = threading.Lock()


def send(message):
    data = json.dumps(message, ensure_ascii=False).encode()
    with OUT_LOCK:
        OUT.write(HEADER.pack(len(data)) + data)
        OUT.flush()


class Agent(Commands):
    """Every operation of the agent: the commands (`Commands`), the file transfers and `handle`."""

    # -- requests --------------------------------------------------------------------------------
    def op_write(self, req):
        data = base64.b64decode(req["data"])
        as_user(write_file, req["path"], data, int(req.get("mode", 0o644)))
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
                as_user(write_file, req["path"], staged, int(req.get("mode", 0o644)))
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

    def __init__(self, zygote):
        super().__init__(zygote)
        self.relays = {}  # port -> the connection kept by the last relay to it that asked ("line")

    def op_reset(self, req):
        self.drop_relays()
        return super().op_reset(req)

    def op_wipe(self, req):
        self.drop_relays()
        return super().op_wipe(req)

    def drop_relays(self):
        """Close every kept connection: the processes that listened are going."""
        for conn in self.relays.values():
            conn.close()
        self.relays.clear()

    def op_relay(self, req):
        """Send text to a port on the sandbox's own loopback and read its answer: the agent's own
        socket, no shell and no process, so a request to a server in the sandbox costs a round trip,
        not a command. The answer ends where the port closes the connection, or (`reply_ends` "line")
        at its first newline, and then the connection is kept for the next relay to the port, which
        then costs no connect and no accept. Bounded: `max_output_bytes` kept (then the connection
        is closed), `timeout_s` for the whole exchange. The agent connects as root, which gives the
        listening process nothing: a TCP connection carries bytes, not rights."""
        start = time.monotonic()
        deadline = start + float(req["timeout_s"])
        port, line = int(req["port"]), req.get("reply_ends") == "line"
        answer = bytearray()
        status, truncated, keep = "ok", False, False
        conn = self.kept_relay(port) if line else None
        try:
            if conn is None:
                conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                conn.settimeout(max(deadline - time.monotonic(), 0.001))
                try:
                    conn.connect(("127.0.0.1", port))
                except TimeoutError:
                    raise
                except OSError:  # nothing listens (a listener just gone may answer a reset, not a refusal)
                    status = "refused"
            if status == "ok":
                conn.settimeout(max(deadline - time.monotonic(), 0.001))
                conn.sendall(req["data"].encode(), socket.MSG_NOSIGNAL)  # a closed peer: a reset, not SIGPIPE
                truncated, keep = read_answer(conn, answer, int(req["max_output_bytes"]), deadline, line)
        except TimeoutError:
            status = "timeout"
        except OSError:  # reset by the peer, or any other way the connection broke
            status = "reset"
        finally:
            if keep:
                self.relays[port] = conn
            elif conn is not None:
                conn.close()
        return {
            "status": status,
            "data_b64": base64.b64encode(answer).decode(),
            "truncated": truncated,
            "duration_ms": (time.monotonic() - start) * 1000.0,
        }

    def kept_relay(self, port):
        """The connection kept for `port`, unless the port closed it (or sent something unasked)
        since: an idle connection with anything to read is no longer one answer per request."""
        conn = self.relays.pop(port, None)
        if conn is not None and select.select([conn], [], [], 0)[0]:
            conn.close()
            return None
        return conn

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


def read_answer(conn, answer, cap, deadline, line):
    """Read a relay's answer into `answer`: until the port closes the connection or, with `line`, through
    the first newline; at most `cap` bytes kept. Returns (truncated, whether the connection may be kept:
    a line ended the answer with nothing after it)."""
    while True:
        conn.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = conn.recv(min(1 << 20, cap + 1 - len(answer)))
        if not chunk:
            return False, False
        seen = len(answer)
        answer += chunk
        end = answer.find(b"\n", seen) if line else -1
        if 0 <= end < cap:
            extra = len(answer) > end + 1
            del answer[end + 1 :]
            return False, not extra
        if len(answer) > cap:
            del answer[cap:]
            return True, False


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
