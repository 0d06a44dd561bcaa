"""Bash-v0 and Code-v0: a shell and an interpreter in a container per episode.

    import gymnasium as gym, agentrl
    env = gym.make("agentrl/Bash-v0")                       # in-process Docker backend, warm pool
    env = gym.make("agentrl/Code-v0", sandbox_url="http://127.0.0.1:8090")  # via `agentrl sandbox serve`
    obs, info = env.reset(seed=7, options={"family": "fix_bug", "split": "test"})

Each episode gets its own sandbox and a task generated from (family, split, seed) (`bash_tasks`,
`bash_ops`, `code_tasks`); after `finish` the agent's processes are killed and the verdict is computed
on the host (`judge`).
"""
