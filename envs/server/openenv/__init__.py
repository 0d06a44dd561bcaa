"""OpenEnv compatibility: OpenEnv's own client drives agentrl envs over OpenEnv's protocol.

`session` speaks OpenEnv's stateful WebSocket protocol (one connection, one episode of the shared
registry); `routes` mounts it at `/ws` and `/openenv/{env_id}/ws`, beside OpenEnv's `/schema` and
`/metadata`. Nothing else of the server depends on this package.
"""
