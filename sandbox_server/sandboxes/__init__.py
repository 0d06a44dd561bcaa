"""Sandboxes in process: the `Sandbox` protocol, the backends that start them, the link to each agent.

`DockerBackend` starts locked-down containers, `LocalBackend` plain child processes (not isolated);
both send the in-container agent (`agentrl.sandbox_server.agent`) in as text and talk to it over
`channel.AgentLink`, so every sandbox has the same methods wherever it runs.
"""
