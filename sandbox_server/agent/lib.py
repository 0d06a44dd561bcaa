"""What the in-sandbox agent is built from (standard library only, shipped as text with main.py).

The host sends this file's text along with the agent's and the agent imports it as
`agentrl_agent_lib`: the rights a command runs with, output capture, the process table, the zygote
that starts Python scripts (file operations: files.py; the wipe back to a new sandbox's state: wipe.py;
how commands run: commands.py).
"""

import contextlib
import ctypes
import errno
import io
import json
import os
import signal
import site  # with -S this does not touch sys.path; Python scripts call site.main()
import socket
import struct
import sys
import tarfile
import threading
import time
import traceback
import types

HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 28  # 64 MiB of stdin is the most a request carries (base64); bigger: a broken host
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
# in the shell itself (cd/export/functions persist) without fds 60/61, answer "<nonce> $?" on fd 61.
# `jobs` first, to nowhere: bash reports a background job killed by a signal ("Killed") at its next
# chance, which would be inside the next command; the agent kills a command's leftovers after it
# ends, so that report belongs to no command
SHELL_LOOP = (
    "while builtin read -r -d '' __agentrl_n <&60 && builtin read -r -d '' __agentrl_in <&60 "
    "&& builtin read -r -d '' __agentrl_cmd <&60; do builtin jobs >/dev/null 2>&1; "
    'builtin eval "$__agentrl_cmd" <"$__agentrl_in" 60<&- 61>&-; '
    'builtin printf "%s %d\\n" "$__agentrl_n" "$?" >&61; done'
)
LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE, PR_CAPBSET_DROP = 4, 24
OWN_PIDS = {os.getpid()}  # the agent and its zygote: never a stray, whatever uid they run as
GROUPS = set()  # process groups of commands, killed if the agent must end (unisolated backend)


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
        self.cap = cap
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
        """The kept output as text, and whether some was left out. All of it, the marker of what was
        left out included, takes at most `cap` bytes *as JSON*, escapes included (a control byte is
        6 bytes there), so a reply is bounded by the cap as the host receives it, and the text has
        at most `cap` characters. A cap too small to spare the marker half of it keeps the head and
        tail without one (`truncated` and the byte count still say what was left out)."""
        if len(self.tail) > self.half:
            del self.tail[: len(self.tail) - self.half]
        whole = bytes(self.head + self.tail)
        if len(whole) == self.total and json_size(whole) <= self.cap:
            return decode(whole), False  # all of it fits: no split between head and tail
        # sized with the whole count's digits: the real count is never longer
        room = self.cap - json_size(omitted_marker(self.total).encode())
        if room < self.cap // 2:
            room = self.cap
        head = fit_json(self.head, room // 2, keep_end=False)
        tail = fit_json(self.tail, room - json_size(head), keep_end=True)
        omitted = self.total - len(head) - len(tail)
        marker = omitted_marker(omitted) if room < self.cap else ""
        return decode(head) + marker + decode(tail), True


def omitted_marker(omitted):
    return f"\n...[{omitted} bytes omitted]...\n"


def decode(data):
    return bytes(data).decode("utf-8", "replace")


JSON_SIX = bytes(b for b in range(32) if b not in b"\b\t\n\f\r")  # written as \u00XX
JSON_TWO = b"\b\t\n\f\r\"\\"  # written as \n, \", ...
NOT_SIX = bytes(b for b in range(256) if b not in JSON_SIX)
NOT_TWO = bytes(b for b in range(256) if b not in JSON_TWO)


def json_size(data):
    """An upper bound of the size of `data`'s text as JSON: 6 bytes per escaped control byte, 2 per short
    escape, up to 3 per replacement character; C-speed passes only, no JSON written."""
    replaced = decode(data).count("\ufffd")
    six = len(data.translate(None, NOT_SIX))
    two = len(data.translate(None, NOT_TWO))
    return len(data) + 5 * six + two + 2 * replaced


def fit_json(data, budget, keep_end):
    """The longest start (or end, `keep_end`) of `data` whose text takes at most `budget` bytes as
    JSON. Each cut is in proportion to the excess, so a few passes suffice; no byte takes more than
    6 bytes as JSON."""
    data = bytes(data)
    for _ in range(8):
        size = json_size(data)
        if size <= budget:
            return data
        keep = max(min(len(data) * budget // size, len(data) - 1), 0)
        data = data[len(data) - keep :] if keep_end else data[:keep]
    keep = budget // 6
    return data[len(data) - keep :] if keep_end else data[:keep]


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
            # /proc/<pid> itself always shows the effective uid, dumpable or not (unlike its files)
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
    """Run `fn(*args)` in a forked child with the user's rights; returns the bytes it returns."""
    sink = io.BytesIO()
    as_user_to(sink, 1 << 62, lambda out, *a: out.write(fn(*a) or b""), *args)
    return sink.getvalue()


def as_user_to(sink, max_bytes, fn, *args):
    """Run `fn(out, *args)` in a forked child with the user's rights, copying what it writes to `out`
    into `sink` a chunk at a time (never all of it in memory); over `max_bytes` is an error.
    Returns the number of bytes copied."""
    r, w = os.pipe()
    er, ew = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            os.close(er)
            become_user()
            with open(w, "wb", buffering=1 << 16) as out:
                fn(out, *args)
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                os.write(ew, json.dumps([type(exc).__name__, str(exc), error_kind(exc)]).encode()[:60000])
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    os.close(ew)
    copied = 0
    over = False
    with open(r, "rb") as source:
        while chunk := source.read(1 << 20):
            copied += len(chunk)
            if copied > max_bytes:
                over = True
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                break
            sink.write(chunk)
    with open(er, "rb") as f:
        error = f.read()
    _, status = os.waitpid(pid, 0)
    if over:
        raise ValueError(f"over the limit of {max_bytes} bytes")
    if status == 0:
        return copied
    name, message, kind = json.loads(error) if error else ("Error", "helper died", "internal")
    if kind == "disk_full":  # raised again as what it was, so that its kind travels on
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
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
        return self._number("pid")

    def status(self):
        return self._number("exit status")

    def _number(self, what):
        got = self.sock.recv(64)
        if not got:
            raise RuntimeError(f"the Python launcher (zygote) is gone: no {what} for the script")
        return int(got)


def serve_zygote(sock):
    """The zygote's loop: each script goes to a spare forked ahead of time, so no call waits on a
    fork; the next spare is forked once the script's status is sent (off the call's path)."""
    site.main()  # once here, not in every script: site-packages are on the path of every fork
    spare = Spare()
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
        if not msg:
            return
        pid = spare.start(msg, fds, lambda pid: sock.sendall(b"%d" % pid))
        _, status = os.waitpid(pid, 0)
        sock.sendall(b"%d" % os.waitstatus_to_exitcode(status))
        spare = Spare()


class Spare:
    """A child of the zygote, forked before its request: it waits as root (out of the user's reach),
    and becomes the user only once its script and descriptors arrive."""

    def __init__(self):
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            try:
                self.sock.close()
                os.setsid()
                warm_up()
                msg, fds, _, _ = socket.recv_fds(child, 1 << 20, 2)
                if msg:  # else the zygote is gone
                    run_child(json.loads(msg), fds)
            finally:
                os._exit(70)
        child.close()

    def start(self, msg, fds, announce):
        """Hand a request to this spare (or, if it died, to a fresh one), after `announce(pid)`: the
        agent knows the pid before the script can run. Returns the pid."""
        if os.waitpid(self.pid, os.WNOHANG)[0]:  # it died waiting (killed by the OOM killer)
            self.sock.close()
            fresh = Spare()
            self.sock, self.pid = fresh.sock, fresh.pid
        announce(self.pid)
        try:
            socket.send_fds(self.sock, [msg], fds)
        except (BrokenPipeError, ConnectionResetError):
            # the agent killed it between the announcement and the hand-off (its deadline had passed
            # at once): its exit status, sent next, says so; the zygote must live on for later scripts
            pass
        finally:
            for fd in fds:
                os.close(fd)
            self.sock.close()
        return self.pid


def warm_up():
    """Compile and run a fixed one-line script, in the spare before its request: a fork's first
    writes to memory fault page by page, and doing them here, off the call's path, made the
    first `print(1)` of a fork ten times faster (2 ms to 0.2 ms, measured in a sandbox)."""
    stdout, sys.stdout = sys.stdout, io.StringIO()
    try:
        exec(compile("print(1)\n", "<warm-up>", "exec"), {"__name__": "__warm_up__"})
    finally:
        sys.stdout = stdout


def run_child(request, fds):
    """In a spare: take the script's stdin and output pipes, drop every other descriptor and root."""
    stdin_fd = os.open(request["stdin"], os.O_RDONLY)
    for fd, target in ((stdin_fd, 0), (fds[0], 1), (fds[1], 2)):
        os.dup2(fd, target)
    os.closerange(3, 65536)
    become_user()
    LIBC.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    run_script(request["script"], request["env"])


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


def state_file(name, data):
    os.makedirs(STATE_DIR, mode=0o711, exist_ok=True)
    path = os.path.join(STATE_DIR, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    with open(fd, "wb") as f:
        f.write(data)
    return path


def error_kind(exc):
    if isinstance(exc, FileNotFoundError):
        return "not_found"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "disk_full"
    if isinstance(exc, (OSError, ValueError, tarfile.TarError)):
        return "invalid"
    return "internal"


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
        threading._shutdown()  # pyright: ignore[reportAttributeAccessIssue]  # private: typeshed leaves it out
        import atexit

        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(code & 0xFF)
