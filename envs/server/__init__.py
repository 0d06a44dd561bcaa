"""Serving agentrl envs over HTTP, one env instance per episode.

    agentrl serve --host 127.0.0.1 --port 8000

API (JSON, versioned under /v1; errors are `{"error": code, "message": ...}` with a 4xx status):
`GET /v1/envs`, `POST /v1/episodes`, `POST /v1/episodes/{id}/step`, `POST /v1/episodes/{id}/reset`,
`GET|DELETE /v1/episodes/{id}`, `GET /v1/episodes/{id}/render`, batched `POST /v1/step`, steps
over one persistent WebSocket at `/v1/ws` (what the clients use), `GET /health`, `GET /metrics`
(Prometheus), and OpenEnv's WebSocket protocol at `/ws` and `/openenv/{env_id}/ws`. Clients:
`agentrl.client` (`RemoteEnv`, `EnvClient`, `AsyncEnvClient`).
From Python, `agentrl.server.local.serve_in_thread()` runs a server on a free loopback port.
Past one process, `agentrl serve --processes N` (`processes.py`) or `--ray` (`ray_pool.py`) runs a
cluster of such servers behind one discovery address (`pool.py`, `GET /v1/cluster`).

This package imports nothing heavy: FastAPI and uvicorn load in `app`/`local` only.
"""
