"""The cluster kit: holders behind one discovery address, as the env server and the sandbox server run them.

A cluster is N copies of one unchanged server, each a *holder* with its own URL that puts its name at
the head of every id it makes (`<holder>.<rest>`). The address a user is given serves only the map of
the holders (`GET /v1/cluster`); clients send every call straight to the holder an id names and
replay a lost holder's work elsewhere. What both servers share lives here, and knows neither of them
nor any env:

- `agentrl.cluster.children`: child processes that die with their parent, free ports, stopping one.
- `agentrl.cluster.holders`: the holder table, its states (`HolderState`), the health watcher that
  moves a holder between them, and the map entries both servers serve.
- `agentrl.cluster.supervisor`: holders as supervised child processes (`ProcessHolders`), restarted
  when they exit.
- `agentrl.cluster.flows`: what the clients' routing shares: an id's holder, and the drivers that
  carry out the requests of an I/O-free routing flow, blocking or awaiting.
- `agentrl.cluster.serving`: the uvicorn config every agentrl server runs under, one server or many
  (the retrievers' server too): idle connections kept longer than any client keeps them.
"""
