"""agentrl: stateful tool-use environments for agentic RL on LLMs.

Importing this package registers every env with Gymnasium and does nothing heavier: each env's
module (SQLAlchemy, Docker, retrievers...) is imported only when `gym.make` builds it.
"""

from __future__ import annotations

from typing import Any

from agentrl.registration import ENV_IDS, register_envs

__version__ = "0.1.0"

register_envs()


def __getattr__(name: str) -> Any:
    # The clients pull in httpx; load them only when asked for.
    if name in {"RemoteEnv", "AsyncEnvClient", "EnvClient"}:
        from agentrl import client

        return getattr(client, name)
    raise AttributeError(f"module 'agentrl' has no attribute {name!r}")


__all__ = ["ENV_IDS", "__version__"]
