"""The HTTP API on a real server on loopback: both clients, auth, limits, SandboxFusion's client."""

from __future__ import annotations

import asyncio
import base64
import io
import tarfile
import time

import httpx
import pytest

from agentrl.sandbox_server import AsyncSandboxClient, Sandbox, SandboxClient
from agentrl.sandbox_server.wire.errors import InvalidRequest, SandboxError, SandboxNotFound

pytestmark = pytest.mark.docker


@pytest.fixture
def client(server):
    with SandboxClient(server.url, token=server.token) as c:
        yield c


def test_remote_sandbox_has_the_same_interface(client):
    with client.create(env={"A": "1"}, files={"x.txt": b"\x00\xff"}) as sb:
        assert isinstance(sb, Sandbox)
        assert sb.exec("cd /tmp; echo $A").stdout == "1\n"
        assert sb.exec("pwd").stdout == "/tmp\n"
        assert sb.exec("pwd", mode="oneshot").stdout == "/workspace\n"
        assert sb.read_file("x.txt") == b"\x00\xff"
        data = bytes(range(256)) * 1000
        sb.write_file("dir/blob", data)
        assert sb.read_file("dir/blob") == data
        assert sb.run_code("print(6 * 7)").stdout == "42\n"
        assert sb.exec("cat", stdin="piped").stdout == "piped"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("t/f.txt")
            info.size = 2
            tar.addfile(info, io.BytesIO(b"ok"))
        sb.put_archive("unpacked", buf.getvalue())
        with tarfile.open(fileobj=io.BytesIO(sb.get_archive("unpacked/t"))) as tar:
            assert tar.extractfile("t/f.txt").read() == b"ok"
        timeout = sb.exec("echo partial; sleep 10", timeout_s=0.5)
        assert (timeout.status, timeout.stdout) == ("timeout", "partial\n")
        assert sb.sandbox_id in {info.sandbox_id for info in client.list()}
        assert client.get(sb.sandbox_id).info.sandbox_id == sb.sandbox_id
        with pytest.raises(FileNotFoundError):
            sb.read_file("missing")
        with pytest.raises(InvalidRequest):
            sb.run_code("x", language="cobol")
    with pytest.raises(SandboxNotFound):
        sb.exec("true")
    sb.close()  # closing twice is fine


def test_async_client(server):
    async def main() -> list[str]:
        async with AsyncSandboxClient(server.url, token=server.token) as client:
            sandboxes = await asyncio.gather(*(client.create() for _ in range(3)))
            try:
                for i, sb in enumerate(sandboxes):
                    await sb.write_file("n.txt", str(i))
                results = await asyncio.gather(*(sb.exec("cat n.txt") for sb in sandboxes))
                assert await sandboxes[0].read_file("n.txt") == b"0"
                assert (await sandboxes[1].run_code("print('hi')")).stdout == "hi\n"
                return [r.stdout for r in results]
            finally:
                await asyncio.gather(*(sb.aclose() for sb in sandboxes))

    assert asyncio.run(main()) == ["0", "1", "2"]


def test_auth_is_required(server):
    assert httpx.get(server.url + "/v1/ping").text == "pong"  # liveness stays open
    assert httpx.get(server.url + "/v1/sandboxes").status_code == 401
    bad = httpx.get(server.url + "/v1/sandboxes", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and bad.json()["kind"] == "unauthorized"
    with SandboxClient(server.url, token="wrong") as wrong, pytest.raises(SandboxError, match="401"):
        wrong.create()
    assert httpx.get(server.url + "/v1/sandboxes", auth=("any", server.token)).status_code == 200


def test_errors_are_clear_json(server, client):
    headers = {"Authorization": f"Bearer {server.token}"}
    missing = httpx.post(server.url + "/v1/sandboxes/nope/exec", json={"command": "true"}, headers=headers)
    assert missing.status_code == 404 and missing.json()["kind"] == "sandbox_not_found"
    with client.create() as sb:
        url = f"{server.url}/v1/sandboxes/{sb.sandbox_id}/exec"
        for body in ({}, {"command": "a", "code": "b"}, {"command": 3}, {"command": "x", "timeout_s": -1}):
            reply = httpx.post(url, json=body, headers=headers)
            assert reply.status_code == 422, body
        assert httpx.post(url, content=b"{not json", headers=headers).status_code == 422
        bad_files = httpx.post(server.url + "/v1/sandboxes", json={"files": {"a": "%%%"}}, headers=headers)
        assert bad_files.status_code == 400 and "base64" in bad_files.json()["detail"]
        assert (
            httpx.post(server.url + "/v1/sandboxes", json={"memory_mb": 1}, headers=headers).status_code
            == 422
        )


def test_request_size_is_bounded(server, client):
    with client.create() as sb:
        with pytest.raises(SandboxError, match="413"):
            sb.write_file("big", b"x" * (9 << 20))
        sb.write_file("small", b"x" * (1 << 20))
        assert sb.exec("stat -c %s small").stdout == f"{1 << 20}\n"


def test_run_code_with_the_sandbox_fusion_client(server):
    from sandbox_fusion import RunCodeRequest, RunStatus, run_code, set_endpoint

    # its client takes only a URL: the token travels as the basic-auth password
    set_endpoint(server.url.replace("http://", f"http://user:{server.token}@"))
    ok = run_code(RunCodeRequest(code="print(1)", language="python"))
    assert ok.status == RunStatus.Success
    assert ok.run_result.stdout == "1\n" and ok.run_result.return_code == 0

    files = {"input.txt": base64.b64encode(b"from a file").decode()}
    code = "print(open('input.txt').read()); open('out.bin', 'wb').write(bytes(range(4)))"
    with_files = run_code(
        RunCodeRequest(code=code, language="python", files=files, fetch_files=["out.bin", "x"])
    )
    assert with_files.run_result.stdout == "from a file\n"
    assert base64.b64decode(with_files.files["out.bin"]) == bytes(range(4))
    assert "x" not in with_files.files

    failed = run_code(
        RunCodeRequest(code="import sys; print('no', file=sys.stderr); sys.exit(2)", language="python")
    )
    assert failed.status == RunStatus.Failed
    assert (failed.run_result.return_code, failed.run_result.stderr) == (2, "no\n")

    slow = run_code(
        RunCodeRequest(
            code="import time\nprint('x', flush=True)\ntime.sleep(30)", run_timeout=1, language="python"
        )
    )
    assert slow.status == RunStatus.Failed
    assert slow.run_result.status == "TimeLimitExceeded" and slow.run_result.stdout == "x\n"

    # a big print is answered, cut, long before the time-out
    big = run_code(RunCodeRequest(code="print('y' * 50_000_000)", language="python", run_timeout=60))
    assert big.status == RunStatus.Success and big.run_result.execution_time < 30
    assert "bytes omitted" in big.run_result.stdout

    stdin = run_code(RunCodeRequest(code="print(input()[::-1])", stdin="abc\n", language="python"))
    assert stdin.run_result.stdout == "cba\n"
    shell = run_code(RunCodeRequest(code="echo $((2 + 3))", language="bash"))
    assert shell.run_result.stdout == "5\n"


def test_run_code_runners_are_scrubbed_between_calls(server):
    from sandbox_fusion import RunCodeRequest, run_code, set_endpoint

    set_endpoint(server.url.replace("http://", f"http://user:{server.token}@"))
    service = server.app.state.run_code
    service.close()  # no runners left from earlier tests: the next call's runner is the one reused
    container_start = "cut -d' ' -f22 /proc/1/stat"  # tells containers apart
    leave_traces = (
        "echo x > /workspace/leak; echo x > /tmp/leak; echo x > /dev/shm/leak; ipcmk -M 4096 >/dev/null; "
        "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! >> /tmp/.agentrl-keep; " + container_start
    )
    look = (
        "ls -A /workspace /tmp /dev/shm; ipcs -m | grep -c 0x; ps -eo args | grep -c '^sleep 300$'; "
        + container_start
    )
    first = run_code(RunCodeRequest(code=leave_traces, language="bash"))
    deadline = time.monotonic() + 30
    while not service._idle and time.monotonic() < deadline:
        time.sleep(0.05)
    second = run_code(RunCodeRequest(code=look, language="bash")).run_result.stdout.split("\n")
    assert second[-2] == first.run_result.stdout.strip(), "the runner was not reused"
    assert "leak" not in "\n".join(second)
    assert second[-4:-2] == ["0", "0"], second  # no shared memory segment, no process left


def test_run_code_unsupported_language_is_422(server):
    reply = httpx.post(
        server.url + "/run_code", json={"code": "x", "language": "cobol"}, auth=("u", server.token)
    )
    assert reply.status_code == 422
    assert "cobol" in str(reply.json()["detail"]) and "python" in str(reply.json()["detail"])


def test_32_concurrent_sandboxes_100_execs_each(server):
    async def worker(client: AsyncSandboxClient, n: int) -> int:
        sb = await client.create()
        try:
            ok = 0
            for i in range(100):
                result = await sb.exec(f"echo {n}-{i}")
                ok += result.status == "ok" and result.stdout == f"{n}-{i}\n"
            return ok
        finally:
            await sb.aclose()

    async def main() -> list[int]:
        limits = httpx.Limits(max_connections=64)
        async with AsyncSandboxClient(server.url, token=server.token) as client:
            client.http._transport = httpx.AsyncHTTPTransport(limits=limits)
            return await asyncio.gather(*(worker(client, n) for n in range(32)))

    assert asyncio.run(main()) == [100] * 32
