"""Bash-v0 and Code-v0: a shell and an interpreter in a container per episode.

    import gymnasium as gym, agentrl
    env = gym.make("agentrl/Bash-v0")                       # in-process Docker backend, warm pool
    env = gym.make("agentrl/Code-v0", sandbox_url="http://127.0.0.1:8090")  # via `agentrl sandbox serve`
    obs, info = env.reset(seed=0)                           # or options={"task_id": "fix_bug/3"}

Each episode gets its own sandbox, a workspace generated from its task (`bash_tasks`,
`code_tasks`) and a hidden check run in the same container after `finish`.
"""
