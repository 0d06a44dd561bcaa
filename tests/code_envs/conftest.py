"""Fixtures of the Bash-v0 / Code-v0 tests: the real Docker engine and the real sandbox image.

Envs are shared per module: `reset` hands the previous episode's container back and takes a warm
one from the pool; the slow tests also run episodes on threads (see `code_envs_helpers.run_episodes`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support import unavailable

POOL = 4


engine_missing = unavailable


@pytest.fixture(scope="session")
def docker_backend():
    """The process-wide backend the envs use (warm pool of POOL containers)."""
    from agentrl.sandbox_server import DockerUnavailable, shared_backend

    try:
        return shared_backend(None, None, POOL)
    except DockerUnavailable as exc:
        engine_missing(str(exc).splitlines()[0])


@pytest.fixture(scope="session")
def cold_backend(docker_backend):
    """A backend without a warm pool: every container it owns belongs to a live episode."""
    from agentrl.sandbox_server import shared_backend

    return shared_backend(None, None, 0)


@pytest.fixture(scope="module")
def bash_env(docker_backend) -> Iterator:
    from agentrl.code_envs.bash_env import BashEnv

    env = BashEnv(pool_size=POOL, command_timeout_s=5)
    yield env
    env.close()


@pytest.fixture(scope="module")
def code_env(docker_backend) -> Iterator:
    from agentrl.code_envs.code_env import CodeEnv

    env = CodeEnv(pool_size=POOL, command_timeout_s=5)
    yield env
    env.close()
