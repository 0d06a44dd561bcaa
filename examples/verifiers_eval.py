"""One verifiers v1 rollout of Flights-v0: the `agentrl-verifiers` taskset, its env playing the user,
any OpenAI-compatible model (vLLM, llama.cpp, an API) answering. `pip install -e '.[verifiers]'`.

    agentrl serve --port 8000 &
    python examples/verifiers_eval.py --env-url http://127.0.0.1:8000 \
        --model-url http://127.0.0.1:8001/v1 --model Qwen/Qwen3-8B --seed 3

The same taskset runs under verifiers' own CLI and prime-rl:
    vf-eval agentrl-verifiers --env.taskset.env-id agentrl/Flights-v0 \
        --env.taskset.base-url http://127.0.0.1:8000 --model ... --client.base-url ...
"""

from __future__ import annotations

import argparse
import asyncio

import verifiers.v1 as vf


async def rollout(args: argparse.Namespace) -> vf.Episode:
    config = vf.resolve_env_config({"taskset": {
        "id": "agentrl-verifiers", "env_id": args.env, "base_url": args.env_url, "split": args.split,
        "first_seed": args.seed, "num_tasks": 1}})
    env = vf.load_environment(config)
    ctx = vf.ModelContext(model=args.model, client=vf.EvalClientConfig(base_url=args.model_url,
                                                                        api_key_var=args.api_key_var))
    async with env.serving():
        [task] = list(env.taskset)
        [slot] = env.slots(task, 1)
        return await env.run_slot(slot, ctx)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="agentrl/Flights-v0")
    parser.add_argument("--env-url", default=None, help="an `agentrl serve` server; default: in-process")
    parser.add_argument("--model-url", required=True, help="OpenAI-compatible base URL, ending in /v1")
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key-var", default="OPENAI_API_KEY")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", default="train", choices=["train", "test"])
    args = parser.parse_args()
    episode = asyncio.run(rollout(args))
    for trace in episode.traces:
        print(f"turns {trace.num_turns}, reward {trace.reward}, rewards {trace.rewards}")
    if episode.errors:
        print("errors:", episode.errors)


if __name__ == "__main__":
    main()
