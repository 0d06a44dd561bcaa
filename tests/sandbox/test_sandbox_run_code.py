"""SandboxFusion's /run_code: what its users see (parity) and that no call ever sees another's."""

from __future__ import annotations

import base64
import time

import pytest

pytestmark = pytest.mark.docker

CONTAINER_START = "cut -d' ' -f22 /proc/1/stat"  # tells containers apart


@pytest.fixture
def fusion(server):
    from sandbox_fusion import RunCodeRequest, run_code, set_endpoint

    set_endpoint(server.url.replace("http://", f"http://user:{server.token}@"))

    def call(code: str, language: str = "python", **kwargs):
        kwargs = {"run_timeout": 60, "compile_timeout": 60, **kwargs}  # generous: CI machines are busy
        return run_code(RunCodeRequest(code=code, language=language, **kwargs))

    return call


def wait_idle(server) -> None:
    service = server.app.state.run_code
    deadline = time.monotonic() + 30
    while not service._idle and time.monotonic() < deadline:
        time.sleep(0.02)


def test_signal_exits_as_sandbox_fusion_reports_them(fusion):
    killed = fusion("import os, signal\nprint('x', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)")
    assert killed.status == "Failed"
    assert (killed.run_result.status, killed.run_result.return_code) == ("Finished", -9)
    assert killed.run_result.stdout == "x\n"
    segv = fusion("kill -SEGV $$", language="bash")
    assert segv.run_result.return_code == -11


def test_tracebacks_show_user_frames_only(fusion):
    reply = fusion("def f():\n    return 1 / 0\n\nf()\n")
    lines = reply.run_result.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    frames = [line for line in lines if line.startswith("  File ")]
    assert len(frames) == 2, lines
    assert len({f.split(",")[0] for f in frames}) == 1  # both in the script itself
    # no frame of runpy or of the agent (its modules compiled as agent/*.py, its main as <string>)
    assert not [part for part in ("runpy", "agent/", "<string>") if part in reply.run_result.stderr], lines
    assert lines[-1] == "ZeroDivisionError: division by zero"
    syntax = fusion("x = (1,\n")
    assert "SyntaxError" in syntax.run_result.stderr and "Traceback" not in syntax.run_result.stderr


def test_scripts_run_from_the_working_directory(fusion):
    files = {
        "helper.py": base64.b64encode(b"X = 41\n").decode(),
        "data/in.txt": base64.b64encode(b"1").decode(),
    }
    code = "import os, helper\nprint(os.getcwd(), helper.X + int(open('data/in.txt').read()))"
    reply = fusion(code, files=files)
    assert reply.run_result.stdout == "/workspace 42\n", reply


def test_cpp_and_nodejs(fusion):
    cpp = "#include <iostream>\nint main() { int n; std::cin >> n; std::cout << n * 2 << std::endl; }\n"
    reply = fusion(cpp, language="cpp", stdin="21\n")
    assert reply.status == "Success", reply
    assert reply.compile_result.return_code == 0 and reply.run_result.stdout == "42\n"
    broken = fusion("int main() { return x; }", language="cpp")
    assert broken.status == "Failed" and broken.run_result is None
    assert broken.compile_result.return_code != 0 and "error" in broken.compile_result.stderr
    node = fusion(
        "const s = require('fs').readFileSync(0, 'utf8'); console.log(s.trim().length)", "nodejs", stdin="abc"
    )
    assert node.status == "Success" and node.run_result.stdout == "3\n", node


def test_no_state_crosses_callers(server, fusion):
    """An attacker's call tries every way to outlive it or to reach the next callers; none works."""
    server.app.state.run_code.close()  # start from no runner: all calls below share one
    attack = (
        r"""
cat > /tmp/spy.sh <<'EOS'
while :; do echo $$ > /tmp/.agentrl-keep; cat /workspace/* /run/agentrl/* >> /dev/shm/loot 2>/dev/null; done
EOS
setsid nohup bash /tmp/spy.sh </dev/null >/dev/null 2>&1 &
echo x > /workspace/leak; echo x > /tmp/leak; ipcmk -M 4096 >/dev/null; ipcmk -Q >/dev/null
python3 -c "import ctypes; ctypes.CDLL('librt.so.1').mq_open(b'/leak', 0o102, 0o666, None)"
agent=$(ps -eo user=,pid=,args= | awk '$1 == "root" && $3 ~ /python3/ {print $2; exit}')
printf '\x00\x00\x00\x40{"op":"configure","env":{"BASH_FUNC_cat%%%%":"() { echo PWNED; }"}}' \
    > /proc/$agent/fd/0
echo '{"ok":true,"status":"ok","stdout":"FORGED"}' > /proc/$agent/fd/1
"""
        + CONTAINER_START
    )
    first = fusion(attack, "bash")
    wait_idle(server)
    secret = fusion("import sys; print(sys.stdin.read()[::-1])", stdin="1MITCIV-FO-TERCES")
    assert secret.status == "Success" and secret.run_result.stdout == "SECRET-OF-VICTIM1\n"
    wait_idle(server)
    look = (
        "for d in /workspace /tmp /dev/shm /dev/mqueue; do ls -A $d | wc -l; done; ipcs -m -q | grep -c 0x; "
        "pgrep -c -f spy.sh; echo hi | cat; "
        "grep -rlE 'VICTIM1|1MITCIV' /workspace /tmp /dev/shm /dev/mqueue /run 2>/dev/null | head -3; "
        + CONTAINER_START
    )
    after = fusion(look, "bash", run_timeout=60)
    lines = after.run_result.stdout.split("\n")
    assert lines[-2] == first.run_result.stdout.strip().split("\n")[-1], "the runner was not reused"
    assert "leak" not in after.run_result.stdout and "loot" not in after.run_result.stdout
    assert lines[:-2] == ["0", "0", "0", "0", "0", "0", "hi"], lines  # nothing left, `cat` is cat
    assert "FORGED" not in str(after) and "PWNED" not in str(after)


@pytest.mark.parametrize(
    "trace",
    [
        "echo x > /workspace/left",
        "echo x > /tmp/left",
        "echo x > /dev/shm/left",
        "python3 -c \"import ctypes; ctypes.CDLL('librt.so.1').mq_open(b'/left', 0o102, 0o666, None)\"",
        "ipcmk -Q >/dev/null",
    ],
)
def test_a_lone_trace_is_wiped(server, fusion, trace):
    """A call that leaves one thing and no process behind: the wipe's first look, which spares the
    helper when nothing is left, must see it."""
    server.app.state.run_code.close()  # start from no runner: both calls share one
    first = fusion(f"{trace}; {CONTAINER_START}", "bash")
    wait_idle(server)
    look = (
        "ls -A /workspace /tmp /dev/shm /dev/mqueue | grep -c left; "
        + f"ipcs -q | grep -c 0x; {CONTAINER_START}"
    )
    lines = fusion(look, "bash").run_result.stdout.split("\n")
    assert lines[-2] == first.run_result.stdout.strip(), "the runner was not reused"
    assert lines[:2] == ["0", "0"], lines
