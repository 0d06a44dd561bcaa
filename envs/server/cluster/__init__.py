"""More than one episode server behind one address: the env server's side of the serving kit.

`pool` (the holders' environment: tokens and one cluster secret; the address's app; a static pool of
servers run by something else), `processes` (`agentrl serve --processes N`: holders as child
processes), `ray_pool` (`agentrl serve --ray`: holders as Ray actors, with a sandbox server per Ray
node for `--ray-sandboxes`, which is the sandbox server's `agentrl.sandbox_server.cluster.ray_nodes`),
and `cli` (`agentrl cluster serve`). What every server shares is `agentrl.serving`; the clients'
side is `agentrl.client`.
"""
