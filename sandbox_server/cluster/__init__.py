"""Several sandbox servers behind one address: the map of its holders and the parent that serves it.

discovery holds the shapes of `GET /v1/cluster` and of sandbox ids, shared by the server side and
the cluster client (`clients.cluster`); processes runs `agentrl sandbox serve --processes N`, and
ray_nodes one sandbox server per Ray node (`agentrl serve --ray --ray-sandboxes`). How holders are
run and watched is the serving kit's (`agentrl.serving`).
"""
