"""Commands and files through the in-process Docker backend: state, modes, streams, round trips."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from agentrl.sandbox_server import Sandbox
from agentrl.sandbox_server.wire.errors import InvalidRequest, SandboxNotFound

pytestmark = pytest.mark.docker


def test_is_a_sandbox(sandbox):
    assert isinstance(sandbox, Sandbox)


def test_persistent_shell_state(sandbox):
    setup = "mkdir -p proj && cd proj && export TOKEN=abc && COUNT=3 && greet() { echo hi $1; }"
    assert sandbox.exec(setup).status == "ok"
    result = sandbox.exec("echo $PWD $TOKEN $COUNT; greet you; touch made_here")
    assert result.stdout == "/workspace/proj abc 3\nhi you\n"
    assert sandbox.exec("ls /workspace/proj").stdout == "made_here\n"


def test_oneshot_does_not_share_state(sandbox):
    sandbox.exec("cd /tmp && export ONLY_SESSION=1")
    result = sandbox.exec("echo $PWD ${ONLY_SESSION:-unset}", mode="oneshot")
    assert result.stdout == "/workspace unset\n"
    assert sandbox.exec("echo $PWD").stdout == "/tmp\n"


def test_exit_codes_and_statuses(sandbox):
    assert sandbox.exec("true").status == "ok"
    failed = sandbox.exec("echo out; echo err >&2; exit_with() { return $1; }; exit_with 3")
    assert (failed.status, failed.exit_code, failed.stdout, failed.stderr) == ("error", 3, "out\n", "err\n")
    killed = sandbox.exec("sh -c 'kill -TERM $$'")
    assert (killed.status, killed.exit_code) == ("killed", 143)
    syntax = sandbox.exec("if then fi")
    assert syntax.status == "error" and "syntax error" in syntax.stderr
    oneshot = sandbox.exec("exit 4", mode="oneshot")
    assert (oneshot.status, oneshot.exit_code) == ("error", 4)


def test_exit_restarts_a_fresh_shell(sandbox):
    sandbox.exec("cd /tmp")
    result = sandbox.exec("exit 5")
    assert (result.exit_code, result.session_reset) == (5, True)
    assert sandbox.exec("pwd").stdout == "/workspace\n"


def test_stdin(sandbox):
    assert sandbox.exec("tr a-z A-Z", stdin="hello\n").stdout == "HELLO\n"
    assert sandbox.exec("wc -c", stdin=bytes(range(256)), mode="oneshot").stdout.strip() == "256"
    assert sandbox.exec("cat").stdout == ""  # no stdin: end of input at once, never a hang


def test_output_counts_and_unicode(sandbox):
    result = sandbox.exec("printf 'héllo ✓'")
    assert result.stdout == "héllo ✓"
    assert result.stdout_bytes == len("héllo ✓".encode())
    assert not result.truncated


def test_nul_in_command_is_an_error(sandbox):
    with pytest.raises(InvalidRequest):
        sandbox.exec("echo a\0b")


def test_run_code(sandbox):
    assert sandbox.run_code("print(sum(range(10)))").stdout == "45\n"
    assert sandbox.run_code("echo $((6 * 7))", language="bash").stdout == "42\n"
    assert sandbox.run_code("import sys; print(sys.stdin.read()[::-1])", stdin="abc").stdout == "cba\n"
    failing = sandbox.run_code("raise SystemExit(3)")
    assert (failing.status, failing.exit_code) == ("error", 3)
    with pytest.raises(InvalidRequest, match="unsupported language"):
        sandbox.run_code("x", language="cobol")


def test_binary_file_round_trip(sandbox):
    data = os.urandom(1 << 20) + bytes(range(256)) + b"\0\r\n\xff"
    sandbox.write_file("deep/dir/blob.bin", data)
    assert sandbox.read_file("deep/dir/blob.bin") == data
    assert sandbox.read_file("./deep//dir/blob.bin") == data
    assert (
        sandbox.exec("sha256sum deep/dir/blob.bin").stdout.split()[0]
        == __import__("hashlib").sha256(data).hexdigest()
    )
    sandbox.write_file("run.sh", "echo run\n", mode=0o755)
    assert sandbox.exec("./run.sh").stdout == "run\n"


def test_read_missing_file(sandbox):
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("nope.txt")


def test_writing_outside_workdir_through_files_api_fails(sandbox):
    with pytest.raises(InvalidRequest):
        sandbox.write_file("/etc/evil", b"x")


def test_tar_round_trip(sandbox):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, content in (("pkg/a.txt", b"A"), ("pkg/sub/b.bin", bytes(range(256)))):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    sandbox.put_archive("dest", buf.getvalue())
    assert sandbox.exec("cat dest/pkg/a.txt").stdout == "A"
    with tarfile.open(fileobj=io.BytesIO(sandbox.get_archive("dest/pkg"))) as tar:
        assert tar.extractfile("pkg/sub/b.bin").read() == bytes(range(256))
        assert tar.extractfile("pkg/a.txt").read() == b"A"


def test_create_with_env_and_files(backend):
    with backend.create(env={"GREETING": "hey"}, files={"in/data.txt": b"payload"}) as sb:
        assert sb.exec("echo $GREETING; cat in/data.txt").stdout == "hey\npayload"
        assert sb.exec("echo $GREETING", mode="oneshot").stdout == "hey\n"


def test_closed_sandbox_is_not_found(backend):
    sb = backend.create()
    sb.close()
    sb.close()  # twice is fine
    with pytest.raises(SandboxNotFound):
        sb.exec("true")
    with pytest.raises(SandboxNotFound):
        backend.get(sb.sandbox_id)
