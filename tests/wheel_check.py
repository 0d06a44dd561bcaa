"""The installed wheel at work, run by tests/wheel_check.sh with the fresh virtualenv's python.

Run from a folder outside the checkout, so `agentrl` can only come from the wheel. Checks, in order:
where `agentrl` comes from; that the environment meets every requirement the wheel declares (the
extras it does not meet are listed); the demo; `agentrl serve`'s page (its templates rendered, its
static files served byte for byte as in the checkout); `agentrl sandbox serve` running a command in
a sandbox (the agent's files, read as text and sent into the container); every module imported.
Servers listen on 127.0.0.1 only; every wait is bounded.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

DIST = "agentrl-gym"
# modules that are program text for elsewhere, not imports of this process
NOT_IMPORTED = {
    "agentrl.sandbox_server.agent.main": "the in-container agent, run by check_sandbox",
    "agentrl.sandbox_server.agent.commands": "the in-container agent's commands, sent along with it",
    "agentrl.sandbox_server.agent.files": "the in-container agent's file operations, sent along with it",
    "agentrl.sandbox_server.agent.wipe": "the in-container agent's wipe, sent along with it",
}
# import names that differ from their distribution's name (a missing one is matched to its extra by this)
DISTRIBUTION_OF = {"gem": "gem-llm"}
START_TIMEOUT_S = 120.0


def log(message: str) -> None:
    print(f"[wheel_check] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_origin(venv: Path, checkout: Path) -> None:
    """`agentrl` and its metadata come from the new virtualenv, and nothing of the checkout is on the path."""
    import agentrl_verifiers

    import agentrl

    for module in (agentrl, agentrl_verifiers):
        assert Path(module.__file__).resolve().is_relative_to(venv.resolve()), module.__file__
    located = Path(importlib.metadata.distribution(DIST).locate_file("")).resolve()
    assert located.is_relative_to(venv.resolve()), f"{DIST}'s metadata comes from {located}"
    sources = [checkout / folder for folder in ("", "envs", "sandbox_server", "retrievers", "agent_train")]
    for entry in sys.path:
        assert Path(entry or ".").resolve() not in sources, f"the checkout is on sys.path: {entry!r}"
    import gymnasium as gym

    env = gym.make("agentrl:agentrl/Echo-v0")  # the `module:id` form imports agentrl to register
    env.reset(seed=0)
    env.close()
    log(f"agentrl from {Path(agentrl.__file__).parent}")


def unmet(requirement: Requirement) -> str | None:
    """Why the environment does not meet `requirement`, or None when it does."""
    try:
        installed = importlib.metadata.version(requirement.name)
    except importlib.metadata.PackageNotFoundError:
        return f"{requirement.name} is not installed"
    if requirement.specifier and not requirement.specifier.contains(installed, prereleases=True):
        return f"{requirement.name} {installed} does not satisfy {requirement}"
    return None


def check_requirements() -> dict[str, list[str]]:
    """The base requirements must all be met; returns, per extra, the requirements it lacks here."""
    metadata = importlib.metadata.metadata(DIST)
    extras = metadata.get_all("Provides-Extra") or []
    base: list[str] = []
    lacking: dict[str, list[str]] = {extra: [] for extra in extras}
    for line in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is not None and "extra" in str(marker):
            wanted_by = [extra for extra in extras if marker.evaluate({"extra": extra})]
        elif marker is None or marker.evaluate({"extra": ""}):
            wanted_by = []  # a requirement of the base
        else:
            continue  # not for this platform or Python
        reason = unmet(requirement)
        if reason is None:
            continue
        if not wanted_by:
            base.append(reason)
        for extra in wanted_by:
            lacking[extra].append(reason)
    assert not base, f"the wheel's own requirements are not met: {base}"
    met = [extra for extra, reasons in lacking.items() if not reasons]
    log(f"requirements met: the base and the extras {', '.join(met)}")
    for extra, reasons in lacking.items():
        if reasons:
            log(f"extra [{extra}] not met here ({'; '.join(reasons)}): its modules may fail to import")
    return {extra: reasons for extra, reasons in lacking.items() if reasons}


def check_demo() -> None:
    """`python -m agentrl demo`: a server on a free loopback port, oracle and random agents over HTTP."""
    out = subprocess.run(
        [sys.executable, "-m", "agentrl", "demo", "--episodes", "6"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, f"the demo failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    assert re.search(r"all\s*│\s*1\.00", out.stdout), f"the oracle did not solve every task:\n{out.stdout}"
    log("the demo ran: the oracle solved every episode")


@contextmanager
def serving(command: list[str], url: str, ready_path: str, token: str) -> Iterator[httpx.Client]:
    """Start a server command and wait (bounded) until `ready_path` answers; stop it on exit."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60.0)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                output = process.stdout.read() if process.stdout else ""
                raise AssertionError(f"{command[:3]} exited with {process.returncode}:\n{output}")
            try:
                if client.get(ready_path).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{command[:3]} did not answer {ready_path} within {START_TIMEOUT_S} s")
            time.sleep(0.2)
        yield client
    finally:
        client.close()
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def check_page(checkout: Path) -> None:
    """`agentrl serve` with a token: the sign-in form, the episode list, an episode's pages, static files."""
    port, token = free_port(), secrets.token_hex(16)
    url = f"http://127.0.0.1:{port}"
    command = ["agentrl", "serve", "--host", "127.0.0.1", "--port", str(port), "--token", token]
    with serving(command, url, "/health", token) as api, httpx.Client(base_url=url, timeout=60.0) as browser:
        first = browser.get("/ui")
        assert first.status_code == 303 and first.headers["location"].startswith("/ui/login"), first
        form = browser.get(first.headers["location"])
        assert form.status_code == 200 and 'name="token"' in form.text, form.text[:500]
        signed_in = browser.post("/ui/login", data={"token": token, "next": "/ui"}, follow_redirects=True)
        assert signed_in.status_code == 200 and "agentrl/Echo-v0" in signed_in.text, signed_in.text[:500]
        created = api.post("/v1/episodes", json={"env_id": "agentrl/Echo-v0", "seed": 0})
        assert created.status_code == 201, created.text
        episode_id = created.json()["episode_id"]
        for path in (f"/ui/episodes/{episode_id}", f"/ui/episodes/{episode_id}/play"):
            shown = browser.get(path)
            assert shown.status_code == 200 and episode_id in shown.text, (path, shown.text[:500])
        static = sorted(set(re.findall(r'(?:src|href)="(/ui/static/[^"]+)"', signed_in.text)))
        assert {Path(p).suffix for p in static} >= {".js", ".css"}, static
        for path in static:
            served = browser.get(path)
            source = checkout / "envs/server/ui/web/static" / Path(path).name
            assert served.status_code == 200, (path, served.status_code)
            assert served.content == source.read_bytes(), f"{path} differs from {source}"
    log(f"agentrl serve: /ui, sign-in, an episode's pages and {', '.join(static)} served from the wheel")


def docker_available() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def check_sandbox() -> None:
    """`agentrl sandbox serve`: a sandbox made and a command run in it, through the agent the wheel ships."""
    if not docker_available():
        if os.environ.get("CI") == "true":
            raise AssertionError("required under CI=true but unavailable: a Docker engine")
        log("SKIPPED agentrl sandbox serve: no Docker engine here (bash docker/engine.sh)")
        return
    port, token = free_port(), secrets.token_hex(16)
    url = f"http://127.0.0.1:{port}"
    command = ["agentrl", "sandbox", "serve", "--port", str(port), "--token", token, "--pool-size", "0"]
    with serving(command, url, "/health", token) as sandboxes:
        made = sandboxes.post("/v1/sandboxes", json={})
        assert made.status_code == 200, made.text
        sandbox_id = made.json()["sandbox_id"]
        try:
            ran = sandboxes.post(f"/v1/sandboxes/{sandbox_id}/exec", json={"command": "echo from-the-wheel"})
            assert ran.status_code == 200 and ran.json()["stdout"] == "from-the-wheel\n", ran.text
        finally:
            assert sandboxes.delete(f"/v1/sandboxes/{sandbox_id}").status_code == 204
    log("agentrl sandbox serve: a command ran in a sandbox")


def installed_modules() -> list[str]:
    """Every module the wheel installed, by its RECORD (`__main__` modules run a command: left out)."""
    names = []
    for file in importlib.metadata.files(DIST) or []:
        parts = file.parts
        if file.suffix != ".py" or ".dist-info" in parts[0] or parts[-1] == "__main__.py":
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__.py" else (*parts[:-1], file.stem)))
    return sorted(names)


def check_imports(lacking: dict[str, list[str]]) -> None:
    """Import every module; one may fail only for a missing package of an extra not installed here."""
    missing_ok = {canonicalize_name(reason.split()[0]) for reasons in lacking.values() for reason in reasons}
    names = [name for name in installed_modules() if name not in NOT_IMPORTED]
    failed, allowed = [], []
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            top_module = (exc.name or "").split(".")[0]
            top = canonicalize_name(DISTRIBUTION_OF.get(top_module, top_module))
            (allowed if top in missing_ok else failed).append(f"{name}: {exc}")
        except Exception as exc:
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    assert not failed, "modules that do not import from the wheel:\n  " + "\n  ".join(failed)
    for line in allowed:
        log(f"not imported (its extra is not installed): {line}")
    log(f"imported {len(names) - len(allowed)} modules; not here: {NOT_IMPORTED}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--wheel", type=Path, required=True)
    parser.add_argument("--checkout", type=Path, required=True)
    args = parser.parse_args()
    started = time.monotonic()
    check_origin(args.venv, args.checkout)
    lacking = check_requirements()
    check_demo()
    check_page(args.checkout)
    check_sandbox()
    check_imports(lacking)
    log(f"{args.wheel.name}: every check passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
