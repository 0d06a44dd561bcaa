"""The typed clients and `ExecOptions`: every option reaches the agent as given, binary stdin over
HTTP, the sync and async twins agree, and their methods (the cluster clients' and their sandboxes'
too) are written out in their class bodies."""

from __future__ import annotations

import ast
import asyncio
import base64
import inspect
import io
import json
import random
import tarfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_type_hints

import httpx
import pytest

from agentrl.sandbox_server.clients import client as client_module
from agentrl.sandbox_server.clients import cluster as cluster_module
from agentrl.sandbox_server.clients.client import (
    AsyncRemoteSandbox,
    AsyncSandboxClient,
    RemoteSandbox,
    SandboxClient,
)
from agentrl.sandbox_server.clients.cluster import (
    AsyncClusterSandbox,
    AsyncSandboxCluster,
    ClusterSandbox,
    SandboxCluster,
)
from agentrl.sandbox_server.sandboxes.sandbox import Sandbox
from agentrl.sandbox_server.wire.errors import InvalidRequest, SandboxError
from agentrl.sandbox_server.wire.models import (
    ExecArgs,
    ExecOptions,
    ExecRequest,
    RelayArgs,
    RelayOptions,
    RelayRequest,
    SandboxSpec,
    SpecArgs,
    exec_options,
)

EVERY_BYTE = bytes(range(256))
HEX = "od -An -v -tx1 | tr -d ' \\n'"  # stdin as hex: every byte shows, none is lost to decoding
EVERY_OPTION = ExecOptions(
    timeout_s=17.5,
    idle_timeout_s=12.0,
    stdin=EVERY_BYTE,
    mode="oneshot",
    max_output_bytes=4321,
    keep_alive=True,
)
TWINS = (
    (SandboxClient, AsyncSandboxClient),
    (RemoteSandbox, AsyncRemoteSandbox),
    (SandboxCluster, AsyncSandboxCluster),
    (ClusterSandbox, AsyncClusterSandbox),
)
CLUSTER_AND_SINGLE = ((SandboxCluster, SandboxClient), (ClusterSandbox, RemoteSandbox))  # one server's twin


# -- the options model, without a server ------------------------------------------------------------------
def test_the_package_exports_every_lazy_name_and_only_those():
    import agentrl.sandbox_server as package

    assert sorted(package.__all__) == sorted(package._EXPORTS)
    assert all(getattr(package, name) is not None for name in package.__all__)


def test_exec_options_round_trip_through_json():
    for stdin in (EVERY_BYTE, "text é\n", None):
        options = EVERY_OPTION.model_copy(update={"stdin": stdin})
        wire = options.model_dump(mode="json")
        assert ("stdin_b64" in wire) == isinstance(stdin, bytes)  # bytes travel as base64
        assert ExecOptions.model_validate_json(options.model_dump_json()) == options
        assert ExecOptions.model_validate(wire) == options


def test_bad_stdin_b64_and_both_stdins_are_refused():
    with pytest.raises(ValueError, match="not valid base64"):
        ExecOptions.model_validate({"stdin_b64": "***"})
    with pytest.raises(ValueError, match="not both"):
        ExecOptions.model_validate({"stdin": "a", "stdin_b64": "YQ=="})
    assert ExecOptions.model_validate({"stdin_b64": None}).stdin is None


def test_base64_is_checked_in_memory_linear_in_its_size():
    """4 MiB of binary stdin as base64, valid or not by its last character alone: checked holding a
    few times the body, the refusal naming the field and the reason. (A regular expression with a
    repeated group, run by Python's `re`, held about 37 times the text.)"""
    text = base64.b64encode(random.Random(0).randbytes(3 << 20)).decode()
    for stdin_b64, valid in ((text, True), (text[:-4] + "AAA!", False)):
        body = json.dumps({"command": "wc -c", "stdin_b64": stdin_b64}).encode()
        tracemalloc.start()
        try:
            if valid:
                assert len(ExecRequest.model_validate_json(body).stdin or b"") == 3 << 20
            else:
                with pytest.raises(ValueError, match="stdin_b64 is not valid base64: Only base64 data"):
                    ExecRequest.model_validate_json(body)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 6 * len(body), (valid, peak / len(body))


def test_keyword_options_are_checked_like_the_model():
    assert exec_options(None, {}) == ExecOptions()
    base = ExecOptions(timeout_s=3.0)
    assert exec_options(base, {"mode": "oneshot"}) == ExecOptions(timeout_s=3.0, mode="oneshot")
    with pytest.raises(InvalidRequest, match="timeout_s"):
        exec_options(None, {"timeout_s": -1.0})
    with pytest.raises(InvalidRequest, match="bogus"):
        exec_options(None, {"bogus": 1})  # type: ignore[typeddict-unknown-key]  # the point of the test


def test_the_keyword_forms_match_the_models():
    """`ExecArgs`, `RelayArgs` and `SpecArgs` (keyword arguments for editors) name exactly the models'
    fields."""
    assert set(get_type_hints(ExecArgs)) == set(ExecOptions.model_fields)
    assert set(get_type_hints(RelayArgs)) == set(RelayOptions.model_fields)
    assert set(RelayOptions.model_fields) <= set(RelayRequest.model_fields)
    assert set(get_type_hints(SpecArgs)) | {"image"} == set(SandboxSpec.model_fields)
    assert set(ExecOptions.model_fields) <= set(ExecRequest.model_fields)  # the HTTP body carries them all
    assert "stdin_b64" in ExecRequest.model_json_schema()["properties"]  # documented in the OpenAPI schema


def test_errors_come_back_as_their_class():
    for kind, cls in SandboxError._by_kind.items():
        assert SandboxError.of_kind(kind) is cls and cls.kind == kind
    assert SandboxError.of_kind("no such kind") is SandboxError


# -- the client classes, without a server -----------------------------------------------------------------
def _public_methods(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") or name in ("__enter__", "__exit__", "__aenter__", "__aexit__")
    }


@pytest.mark.parametrize("cls", [cls for pair in TWINS for cls in pair], ids=lambda c: c.__name__)
def test_every_public_method_is_written_in_the_class_body(cls):
    """No method is added from outside (`setattr`, assignment): each public one is defined in the
    body of the class itself, where editors and type checkers see it."""
    methods = _public_methods(cls)
    assert methods
    for name, method in methods.items():
        assert name in vars(cls), f"{cls.__name__}.{name} is not defined in the class body"
        assert method.__qualname__ == f"{cls.__name__}.{name}", f"{cls.__name__}.{name} comes from elsewhere"


@pytest.mark.parametrize("module", [client_module, cluster_module], ids=lambda m: m.__name__)
def test_the_client_modules_grow_no_methods(module):
    tree = ast.parse(Path(module.__file__).read_text())
    calls = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert "setattr" not in calls
    for node in ast.walk(tree):  # no `Class.method = ...` after the class
        if isinstance(node, ast.Assign) and isinstance(node, ast.stmt):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    assert target.value.id not in {c.__name__ for pair in TWINS for c in pair}


@pytest.mark.parametrize(("sync", "async_"), TWINS, ids=lambda c: c.__name__)
def test_the_async_twin_has_the_same_methods_as_coroutines(sync, async_):
    renamed = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__"}
    sync_methods, async_methods = _public_methods(sync), _public_methods(async_)
    assert {renamed.get(name, name) for name in sync_methods} == set(async_methods)
    for name, method in sync_methods.items():
        twin = async_methods[renamed.get(name, name)]
        assert inspect.iscoroutinefunction(twin), f"{async_.__name__}.{twin.__name__} is not async"
        assert list(inspect.signature(method).parameters) == list(inspect.signature(twin).parameters)


def test_a_remote_sandbox_has_the_sandbox_methods():
    wanted = {name for name in vars(Sandbox) if not name.startswith("_") and callable(vars(Sandbox)[name])}
    assert wanted <= set(_public_methods(RemoteSandbox))
    for name in wanted:
        local = inspect.signature(vars(Sandbox)[name]).parameters
        assert list(inspect.signature(getattr(RemoteSandbox, name)).parameters) == list(local)


@pytest.mark.parametrize(("cluster", "single"), CLUSTER_AND_SINGLE, ids=lambda c: c.__name__)
def test_a_cluster_client_has_the_methods_of_a_single_servers(cluster, single):
    """Code moves between one sandbox server and several by changing the client's class alone: the
    same methods, with the same parameters and the same return types."""
    methods, theirs = _public_methods(cluster), _public_methods(single)
    assert set(methods) == set(theirs)
    for name, method in methods.items():
        ours, other = inspect.signature(method), inspect.signature(theirs[name])
        assert ours.parameters == other.parameters, f"{cluster.__name__}.{name}{ours} != {other}"
        if name not in ("create", "get", "__enter__"):  # these return the cluster's own classes
            assert ours.return_annotation == other.return_annotation, f"{cluster.__name__}.{name}"


# -- against the real server ------------------------------------------------------------------------------
@pytest.fixture
def client(server) -> Iterator[SandboxClient]:
    with SandboxClient(server.url, token=server.token) as c:
        yield c


@pytest.fixture
def agent_requests(server, monkeypatch) -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    """`spy(sandbox_id)`: from then on, the fields of every `exec` sent to that sandbox's agent."""
    seen: list[dict[str, Any]] = []

    def spy(sandbox_id: str) -> None:
        link = server.app.state.backend.get(sandbox_id).link
        call, acall = link.call, link.acall  # in a thread (in process), on the event loop (the server)

        def recording(op: str, **fields: Any) -> dict[str, Any]:
            if op == "exec":
                seen.append(fields)
            return call(op, **fields)

        async def arecording(op: str, **fields: Any) -> dict[str, Any]:
            if op == "exec":
                seen.append(fields)
            return await acall(op, **fields)

        monkeypatch.setattr(link, "call", recording)
        monkeypatch.setattr(link, "acall", arecording)

    yield spy, seen


def _as_options(fields: dict[str, Any]) -> ExecOptions:
    names = {*ExecOptions.model_fields, "stdin_b64"}
    return ExecOptions.model_validate({k: v for k, v in fields.items() if k in names})


@pytest.mark.docker
def test_every_exec_option_reaches_the_agent_as_the_client_gave_it(client, agent_requests):
    spy, seen = agent_requests
    with client.create() as sb:
        spy(sb.sandbox_id)
        result = sb.exec(HEX, EVERY_OPTION)
        assert result.stdout == EVERY_BYTE.hex()
        text = sb.exec("cat", stdin="é\n", timeout_s=9.0, mode="session", max_output_bytes=100)
        assert text.stdout == "é\n"
        code = sb.run_code("import sys; print(sys.stdin.buffer.read().hex())", "python", EVERY_OPTION)
        assert code.stdout == EVERY_BYTE.hex() + "\n"
    assert _as_options(seen[0]) == EVERY_OPTION
    assert {*ExecOptions.model_fields} - {"stdin"} <= set(seen[0])  # every field travels, none defaulted
    assert _as_options(seen[1]) == ExecOptions(stdin="é\n", timeout_s=9.0, max_output_bytes=100)
    assert "stdin_b64" not in seen[1]
    assert _as_options(seen[2]) == EVERY_OPTION  # run_code: the same options (always one-shot)


@pytest.mark.docker
def test_the_agent_gets_the_same_request_in_process_and_over_http(server, client, agent_requests):
    spy, seen = agent_requests
    backend = server.app.state.backend
    with client.create() as remote:
        local = backend.get(remote.sandbox_id)
        spy(remote.sandbox_id)
        remote.exec(HEX, EVERY_OPTION)
        local.exec(HEX, EVERY_OPTION)
        remote.exec("true", timeout_s=5.0, stdin=b"\x00")
        local.exec("true", timeout_s=5.0, stdin=b"\x00")
    assert seen[0] == seen[1] and seen[2] == seen[3]


@pytest.mark.docker
def test_binary_stdin_over_http(server, client):
    with client.create() as sb:
        assert sb.exec(HEX, stdin=EVERY_BYTE).stdout == EVERY_BYTE.hex()
        assert sb.exec(HEX, stdin=EVERY_BYTE, mode="oneshot").stdout == EVERY_BYTE.hex()
        assert sb.exec("wc -c", stdin=b"\xff" * 100_000).stdout.strip() == "100000"
        # more than the attach socket takes at once: the server's frame goes out in parts
        assert sb.exec("wc -c", stdin=b"\xff" * (4 << 20)).stdout.strip() == str(4 << 20)
        reversed_ = sb.run_code(
            "import sys; sys.stdout.write(sys.stdin.buffer.read()[::-1].hex())", stdin=b"\x00\xfe"
        )
        assert reversed_.stdout == "fe00"
        url = f"{server.url}/v1/sandboxes/{sb.sandbox_id}/exec"
        headers = {"Authorization": f"Bearer {server.token}"}
        raw = {"command": HEX, "stdin_b64": base64.b64encode(EVERY_BYTE).decode()}
        assert httpx.post(url, json=raw, headers=headers, timeout=60).json()["stdout"] == EVERY_BYTE.hex()
        both = httpx.post(url, json={**raw, "stdin": "x"}, headers=headers, timeout=60)
        assert both.status_code == 422 and "not both" in both.text
        bad = httpx.post(url, json={"command": "cat", "stdin_b64": "@@"}, headers=headers, timeout=60)
        assert bad.status_code == 422 and "base64" in bad.text

    async def main() -> str:
        async with (
            AsyncSandboxClient(server.url, token=server.token) as aclient,
            await aclient.create() as asb,
        ):
            return (await asb.exec(HEX, stdin=EVERY_BYTE)).stdout

    assert asyncio.run(main()) == EVERY_BYTE.hex()


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _untar(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _outcome(result: Any) -> Any:
    """What a call gave, comparable across the twins (times left out, archives unpacked)."""
    if isinstance(result, BaseException):
        return type(result).__name__
    if isinstance(result, bytes) and result[257:262] == b"ustar":
        return _untar(result)
    return result.model_dump(exclude={"duration_ms"}) if hasattr(result, "duration_ms") else result


SCRIPT: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("exec", ("echo $A; cd /tmp",), {}),
    ("exec", ("pwd",), {}),
    ("exec", ("pwd",), {"mode": "oneshot"}),
    ("exec", (HEX,), {"stdin": EVERY_BYTE}),
    ("exec", ("echo partial; exec sleep 10",), {"timeout_s": 0.5, "mode": "oneshot"}),  # no job report
    ("exec", ("seq 1 100000",), {"max_output_bytes": 300}),
    ("run_code", ("print(6 * 7)",), {}),
    ("run_code", ("console.log(1 + 1)", "nodejs"), {}),
    ("write_file", ("d/blob", EVERY_BYTE * 10), {}),
    ("read_file", ("d/blob",), {}),
    ("put_archive", ("unpacked", _tar({"t/f.txt": b"ok"})), {}),
    ("get_archive", ("unpacked/t",), {}),
    ("reset_processes", (), {}),
    ("read_file", ("missing",), {}),
    ("run_code", ("x", "cobol"), {}),
    ("exec", ("true",), {"timeout_s": -1}),
]


@pytest.mark.docker
def test_sync_and_async_clients_give_the_same_results(server):
    sync: list[Any] = []
    with SandboxClient(server.url, token=server.token) as client, client.create(env={"A": "1"}) as sb:
        for op, args, kwargs in SCRIPT:
            try:
                sync.append(_outcome(getattr(sb, op)(*args, **kwargs)))
            except (SandboxError, FileNotFoundError) as exc:
                sync.append(_outcome(exc))
        sync.append([info.sandbox_id for info in client.list()].count(sb.sandbox_id))
        sync.append(client.get(sb.sandbox_id).sandbox_id == sb.sandbox_id)

    async def main() -> list[Any]:
        results: list[Any] = []
        async with (
            AsyncSandboxClient(server.url, token=server.token) as aclient,
            await aclient.create(env={"A": "1"}) as asb,
        ):
            for op, args, kwargs in SCRIPT:
                try:
                    results.append(_outcome(await getattr(asb, op)(*args, **kwargs)))
                except (SandboxError, FileNotFoundError) as exc:
                    results.append(_outcome(exc))
            results.append([info.sandbox_id for info in await aclient.list()].count(asb.sandbox_id))
            results.append((await aclient.get(asb.sandbox_id)).sandbox_id == asb.sandbox_id)
        return results

    assert asyncio.run(main()) == sync
    assert sync[3]["stdout"] == EVERY_BYTE.hex() and sync[4]["status"] == "timeout"
    assert sync[-5:] == ["FileNotFoundError", "InvalidRequest", "InvalidRequest", 1, True]
