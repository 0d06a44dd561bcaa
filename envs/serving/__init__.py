"""The serving kit: how every agentrl server runs, alone or as holders behind one discovery address.

It belongs to no server: the env server, the sandbox server and the retrievers' server all run on
it, and it knows none of them nor any env (an import rule, `serving-kit` in pyproject.toml). Each
server's own parts (its map entries, its address's app, its command line) stay in its own folder.

A cluster is N copies of one unchanged server, each a *holder* with its own URL that puts its name at
the head of every id it makes (`<holder>.<rest>`). The address a user is given serves only the map of
the holders (`GET /v1/cluster`); clients send every call straight to the holder an id names and
replay a lost holder's work elsewhere. What the servers share:

- `agentrl.serving.children`: child processes that die with their parent, free ports, stopping one.
- `agentrl.serving.holders`: the holder table, its states (`HolderState`), the health watcher that
  moves a holder between them, and the map entries both servers serve.
- `agentrl.serving.supervisor`: holders as supervised child processes (`ProcessHolders`), restarted
  when they exit.
- `agentrl.serving.roll`: a rolling restart, every holder replaced one at a time through the
  address's add and drain calls; `agentrl.serving.commands`: an operator's `show`, `add`, `drain`
  and `roll` on either server's command line.
- `agentrl.serving.flows`: what the clients' routing shares: an id's holder, and the drivers that
  carry out the requests of an I/O-free routing flow, blocking or awaiting.
- `agentrl.serving.runner`: the uvicorn config every agentrl server runs under, one server or many
  (the retrievers' server too): idle connections kept longer than any client keeps them, the
  bounds on what an unauthenticated caller can make it do (`agentrl.serving.http_limits`); a server
  run in the foreground (`run_server`) or in a thread (`ServerThread`).
- `agentrl.serving.ray_actor`: the one Ray actor that serves an app on a port of its node (the env
  server's holders under `--ray`, the sandbox servers of `--ray-sandboxes`).
- `agentrl.serving.names`: what a map and its ids say (`CLUSTER_PATH`, `HolderState`, `holder_of`).
- `agentrl.serving.apps`: what every server's app is made of: its Prometheus registry of its own
  (`ServerMetrics`) and the FastAPI app around the server's routes, errors, middleware and lifespan
  (`server_app`).
- `agentrl.serving.openapi`: what keeps every server's OpenAPI document true: integers as JSON Schema
  has them (`WholeNumber`, free of any web framework: the protocol uses it) and the `Allow` of a 405
  (`allowed_methods`).
"""
