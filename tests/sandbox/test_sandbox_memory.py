"""The server's memory is bounded by its settings, whatever requests carry: the largest allowed
stdin (text, and bytes through every base64 field), output and downloads on several sandboxes at
once, against a real server process."""

from __future__ import annotations

import base64
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

pytestmark = pytest.mark.docker

# the documented bound (docs/sandbox-security.md) for the settings below: peak RSS over the idle
# server's, under SANDBOXES sandboxes each running all of LOAD at once
BOUND_MB = 160
SANDBOXES = 4
MAX_JSON_MB = MAX_OUTPUT_MB = 4
MAX_REQUEST_MB = 24
FILE_BYTES = 24_000_000  # under --max-request-mb: the largest download
FLOOD_BYTES = 40_000_000  # ten times the output cap, each byte 6 bytes as JSON
# the most bytes whose base64 fits in the body limit beside a few fields: every byte value, so the
# text is the base64 of binary data, not of text
BINARY = random.Random(0).randbytes(((MAX_JSON_MB << 20) - 1000) // 4 * 3)
BINARY_B64 = base64.b64encode(BINARY).decode()


def status_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def serve(port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "agentrl", "sandbox", "serve", "--port", str(port), "--pool-size", "4"]
    cmd += ["--max-json-mb", str(MAX_JSON_MB), "--max-output-mb", str(MAX_OUTPUT_MB), "--heavy-calls", "2"]
    cmd += ["--max-request-mb", str(MAX_REQUEST_MB), "--tenant", "mem=tok:16"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_server_memory_stays_bounded_under_the_largest_requests(port):
    url = f"http://127.0.0.1:{port}"
    auth = {"Authorization": "Bearer tok"}
    server = serve(port)
    http = httpx.Client(base_url=url, headers=auth, timeout=300)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read().decode()
            try:
                if http.get("/v1/ping").text == "pong":
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        sids = [http.post("/v1/sandboxes", json={}).json()["sandbox_id"] for _ in range(SANDBOXES)]
        for sid in sids:
            made = http.post(
                f"/v1/sandboxes/{sid}/exec",
                json={"command": f"head -c {FILE_BYTES} /dev/urandom > big && mkdir tree && cp big tree/"},
            )
            assert made.json()["status"] == "ok", made.text
            http.get(f"/v1/sandboxes/{sid}/files", params={"path": "tree", "archive": True})  # warm
        baseline_kb = status_kb(server.pid, "VmRSS")
        stdin = "x" * ((MAX_JSON_MB << 20) - 200)  # the largest stdin the body limit allows

        def feed(sid: str) -> None:
            reply = http.post(f"/v1/sandboxes/{sid}/exec", json={"command": "wc -c", "stdin": stdin})
            assert reply.json()["stdout"] == f"{len(stdin)}\n", reply.text[:200]

        def feed_bytes(sid: str) -> None:
            reply = http.post(f"/v1/sandboxes/{sid}/exec", json={"command": "wc -c", "stdin_b64": BINARY_B64})
            assert reply.json()["stdout"] == f"{len(BINARY)}\n", reply.text[:200]

        def feed_bad_at_the_end(sid: str) -> None:
            """The largest stdin_b64 that is not base64 by its last character: a clear 422."""
            body = {"command": "wc -c", "stdin_b64": BINARY_B64[:-4] + "AAA!"}
            reply = http.post(f"/v1/sandboxes/{sid}/exec", json=body)
            assert reply.status_code == 422, reply.text[:300]
            assert "stdin_b64 is not valid base64" in reply.text, reply.text[:300]

        def create_with_bytes() -> None:
            made = http.post("/v1/sandboxes", json={"files": {"blob": BINARY_B64}})
            assert made.status_code == 200, made.text[:300]
            sid = made.json()["sandbox_id"]
            size = http.post(f"/v1/sandboxes/{sid}/exec", json={"command": "wc -c < blob"}).json()
            assert size["stdout"] == f"{len(BINARY)}\n"
            http.delete(f"/v1/sandboxes/{sid}")

        def run_code_with_bytes() -> None:
            body = {"code": "import os; print(os.path.getsize('blob'))", "files": {"blob": BINARY_B64}}
            reply = http.post("/run_code", json=body).json()
            assert reply["status"] == "Success" and reply["run_result"]["stdout"] == f"{len(BINARY)}\n", reply

        def flood(sid: str) -> None:
            flood = f"head -c {FLOOD_BYTES} /dev/zero | tr '\\0' '\\1'"
            body = {"command": flood, "max_output_bytes": MAX_OUTPUT_MB << 20, "mode": "oneshot"}
            reply = http.post(f"/v1/sandboxes/{sid}/exec", json=body)
            assert reply.status_code == 200 and reply.json()["stdout_bytes"] == FLOOD_BYTES
            assert len(reply.content) <= 2 * (MAX_OUTPUT_MB << 20) + (64 << 10)

        def download(sid: str, archive: bool) -> None:
            params = {"path": "tree" if archive else "big", "archive": archive}
            with http.stream("GET", f"/v1/sandboxes/{sid}/files", params=params) as reply:
                assert reply.status_code == 200
                size = sum(len(chunk) for chunk in reply.iter_bytes())
            assert size > FILE_BYTES if archive else size == FILE_BYTES

        jobs: list[tuple] = [(feed, sid) for sid in sids for _ in range(2)]
        jobs += [(feed_bytes, sid) for sid in sids] + [(feed_bad_at_the_end, sid) for sid in sids]
        jobs += [(create_with_bytes,), (create_with_bytes,), (run_code_with_bytes,), (run_code_with_bytes,)]
        jobs += [(flood, sid) for sid in sids for _ in range(2)]
        jobs += [(download, sid, archive) for sid in sids for archive in (False, True)]
        with ThreadPoolExecutor(len(jobs)) as pool:
            for done in [pool.submit(*job) for job in jobs]:
                done.result()
        peak_mb = (status_kb(server.pid, "VmHWM") - baseline_kb) / 1024
        print(f"\nserver RSS: {baseline_kb / 1024:.0f} MB idle, peak {peak_mb:+.0f} MB, {len(jobs)} calls")
        assert peak_mb < BOUND_MB
    finally:
        http.close()
        server.terminate()
        server.wait(timeout=60)
