"""The opt-in, unisolated local backend: same interface, no Docker (runs only trusted test commands)."""

from __future__ import annotations

import pytest

from agentrl.sandbox_server import LocalBackend, Sandbox
from agentrl.sandbox_server.wire.errors import SandboxNotFound


@pytest.fixture(scope="module")
def local():
    with pytest.warns(UserWarning, match="WITHOUT ANY ISOLATION"):
        backend = LocalBackend(reap_interval_s=0.2)
    yield backend
    backend.close()


def test_local_backend_speaks_the_same_interface(local):
    with local.create(env={"V": "1"}, files={"f.txt": b"data"}) as sb:
        assert isinstance(sb, Sandbox)
        assert sb.exec("cat f.txt; echo $V").stdout == "data1\n"
        sb.exec("mkdir d && cd d && export W=2")
        assert sb.exec("basename $PWD; echo $W").stdout == "d\n2\n"
        assert sb.exec("basename $PWD", mode="oneshot").stdout == "workspace\n"
        assert sb.run_code("print(2 ** 10)").stdout == "1024\n"
        sb.write_file("b.bin", bytes(range(256)))
        assert sb.read_file("b.bin") == bytes(range(256))
        timeout = sb.exec("echo a; sleep 20", timeout_s=0.5)
        assert (timeout.status, timeout.stdout, timeout.session_reset) == ("timeout", "a\n", True)
        assert sb.exec("echo after").stdout == "after\n"


def test_local_idle_ttl(local):
    sb = local.create(idle_ttl_s=0.3)
    with pytest.raises(SandboxNotFound):
        for _ in range(100):
            __import__("time").sleep(0.1)
            local.get(sb.sandbox_id)
