"""Clients of `agentrl serve`, in one room: what a caller imports is here.

- `remote`: `EnvClient` (sync), `AsyncEnvClient` and `RemoteEnv` (a Gymnasium env over HTTP), typed
  twins over one core;
- `wire`: that core, each endpoint as a `Call`, the retry policy, the reading of an answer;
- `steps`: the persistent WebSocket an episode's create, reset, steps and close travel on;
- `cluster`, `cluster_routes`, `recipe`: a cluster's client (a discovery URL given as `base_url`):
  the router that sends each call to its episode's holder and replays a lost holder's episodes from
  their recipes, checking every answer.

The wire format and the typed errors are `agentrl.protocol`'s; nothing here imports the server.
"""

from agentrl.client.cluster import ClusterUnreachableError, EpisodeLostError
from agentrl.client.remote import (
    AsyncEnvClient,
    CapacityError,
    EnvClient,
    EpisodeEndedError,
    EpisodeOverError,
    InvalidRequestError,
    RemoteEnv,
    RemoteEnvError,
    RetryPolicy,
    ServerError,
    ShuttingDownError,
    StepResult,
    UnauthorizedError,
    UnknownEnvError,
    UnknownEpisodeError,
    error_from,
)

__all__ = [
    "AsyncEnvClient", "CapacityError", "ClusterUnreachableError", "EnvClient", "EpisodeEndedError",
    "EpisodeLostError", "EpisodeOverError", "InvalidRequestError", "RemoteEnv", "RemoteEnvError",
    "RetryPolicy", "ServerError", "ShuttingDownError", "StepResult", "UnauthorizedError", "UnknownEnvError",
    "UnknownEpisodeError", "error_from",
]
