"""More than one episode server behind one address: the env server's side of the cluster kit.

`pool` (the holders' environment: tokens and one task-id key; the address's app; a static pool of
servers run by something else), `processes` (`agentrl serve --processes N`: holders as child
processes), `ray_pool` (`agentrl serve --ray`: holders as Ray actors) with `ray_sandboxes` (a sandbox
server per Ray node), and `cli` (`agentrl cluster serve`). What both servers share is
`agentrl.cluster`; the clients' side is `agentrl.client`.
"""
