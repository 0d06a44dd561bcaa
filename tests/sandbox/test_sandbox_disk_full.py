"""A full disk under a sandbox (docs/cluster.md, "What is promised under each fault"): a write that
finds no room is a clear `DiskFull` (507, `disk_full`), the server and every other sandbox go on, and
the full sandbox takes writes again once files are removed.

The full disk is real and needs no privilege: a sandbox's /workspace is a tmpfs of `disk_mb` MiB, and
the directory the agent stages uploads in one of the backend's `tmp_mb`, so a sandbox asked with 1 MiB
fills with a 2 MiB write."""

from __future__ import annotations

import io
import random
import tarfile
from collections.abc import Iterator

import httpx
import pytest
from support import AppServer

from agentrl.sandbox_server import DiskFull, SandboxClient

pytestmark = pytest.mark.slow
TWO_MIB = b"x" * (2 << 20)


def tar_of(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        member = tarfile.TarInfo(name)
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def client(server) -> Iterator[SandboxClient]:
    with SandboxClient(server.url, token=server.token) as made:
        yield made


def test_a_full_workspace_fails_writes_clearly_and_nothing_else(server, client):
    with client.create(disk_mb=1) as full, client.create() as other:
        with pytest.raises(DiskFull) as raised:  # staged in chunks, then put in place: over 1 MiB
            full.write_file("big.bin", TWO_MIB)
        assert "No space left on device" in str(raised.value) and "disk_mb" in str(raised.value)
        with pytest.raises(DiskFull):
            full.put_archive(".", tar_of("big.bin", TWO_MIB))
        # a command meets the full disk as it would anywhere: its own error, its exit code
        filled = full.exec("head -c 2000000 /dev/zero > fill; echo $?")
        assert "No space left on device" in filled.stderr and filled.stdout.strip() != "0"
        # the workspace now full: a small write (in one call, not staged) fails the same way, over HTTP
        # as 507 with its kind
        reply = httpx.put(f"{server.url}/v1/sandboxes/{full.sandbox_id}/files", params={"path": "a.txt"},
                          content=b"hi", headers={"Authorization": f"Bearer {server.token}"})
        assert reply.status_code == 507 and reply.json()["kind"] == "disk_full", reply.text
        # the server and another sandbox are untouched
        other.write_file("big.bin", TWO_MIB)
        assert other.read_file("big.bin") == TWO_MIB
        assert other.exec("wc -c < big.bin").stdout.strip() == str(len(TWO_MIB))
        assert httpx.get(f"{server.url}/health").json()["status"] == "healthy"
        # the full sandbox itself goes on: removing files makes room again
        assert full.exec("rm -f fill big.bin && echo removed").stdout == "removed\n"
        full.write_file("small.txt", b"hi")
        assert full.read_file("small.txt") == b"hi"


def test_files_given_at_create_that_do_not_fit_refuse_the_create_and_leave_nothing(server, client):
    before = len(server.app.state.backend.list())
    with pytest.raises(DiskFull):
        client.create(disk_mb=1, files={"big.bin": TWO_MIB})
    assert len(server.app.state.backend.list()) == before


def test_a_full_staging_directory_fails_the_upload_and_frees_what_it_staged():
    """The agent stages an upload in its own tmpfs (`tmp_mb`) before putting it in place: an upload
    bigger than it fails as `DiskFull`, and what was staged is removed, so the next upload fits."""
    from agentrl.sandbox_server.api.app import create_app
    from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

    backend = DockerBackend(pool_size=0, tmp_mb=2)
    try:
        with AppServer(create_app(backend)) as srv, SandboxClient(srv.url) as client, \
                client.create() as sandbox:
            with pytest.raises(DiskFull):
                sandbox.write_file("big.bin", b"x" * (3 << 20))
            for i in range(3):  # each fills most of the staging space: none would fit after a leak
                sandbox.write_file(f"fits-{i}.bin", b"y" * (3 << 19))
            assert sandbox.exec("cat fits-*.bin | wc -c").stdout.strip() == str(3 * (3 << 19))
    finally:
        backend.close()


def listing(sandbox) -> str:
    """Every entry of the workspace, hidden ones (a temporary file left behind) included."""
    return sandbox.exec("cd /workspace && find . -mindepth 1 | sort").stdout


def test_a_refused_write_leaves_the_old_file_whole_or_no_file(client):
    """Writes are atomic: a new file's bytes go to a temporary file beside it, renamed over the old one
    only once all of them are written, so a write that finds no room changes nothing."""
    old = random.Random(0).randbytes(14_000)
    with client.create(disk_mb=1) as full:
        full.write_file("keep.bin", old)
        before = listing(full)
        with pytest.raises(DiskFull):  # staged in chunks, then put in place
            full.write_file("keep.bin", TWO_MIB)
        with pytest.raises(DiskFull):
            full.write_file("new/dir/new.bin", TWO_MIB)
        # the workspace nearly full: a write of one call (not staged) finds no room either
        full.exec("head -c 1000000 /dev/zero > fill")
        with pytest.raises(DiskFull):
            full.write_file("keep.bin", b"y" * 100_000)
        with pytest.raises(DiskFull):
            full.write_file("new.bin", b"y" * 100_000)
        assert full.read_file("keep.bin") == old
        assert before == "./keep.bin\n" and listing(full) == "./fill\n./keep.bin\n"
        # and a write that fits replaces the file whole
        full.exec("rm fill")
        full.write_file("keep.bin", b"short")
        assert full.read_file("keep.bin") == b"short"


def test_a_refused_archive_leaves_nothing(client):
    """An archive unpacks all or nothing: no folder, no member, no file it would have replaced."""
    old = random.Random(1).randbytes(14_000)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("small.txt", b"fits"), ("keep.bin", b"new"), ("deep/big.bin", TWO_MIB)):
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    with client.create(disk_mb=1) as full:
        full.write_file("keep.bin", old)
        before = listing(full)
        for target in ("unpacked", "."):
            with pytest.raises(DiskFull):
                full.put_archive(target, buf.getvalue())
            assert listing(full) == before
        assert full.read_file("keep.bin") == old
        full.put_archive("unpacked", tar_of("keep.bin", b"new"))  # one that fits lands whole
        assert full.read_file("unpacked/keep.bin") == b"new"
