"""The token rule the id-level adapters share (`agentrl.integrations.tokens`): generated ids kept as
sampled, observations rendered by the template and masked, and a loud error when the template stops
extending the ids already given to the model."""

from __future__ import annotations

import asyncio

import gymnasium as gym
import pytest
from framework_helpers import END, SYSTEM, tiny_tokenizer
from integrations_helpers import FLIGHTS, solved_seed

from agentrl.agent_train.transcript import Transcript
from agentrl.integrations.episode import EnvSource
from agentrl.integrations.tokens import TokenDriftError, TokenEpisode, TokenTranscript


def test_an_in_process_episode_gives_agent_train_ids_and_mask():
    seed, actions = solved_seed("train")
    tokenizer = tiny_tokenizer([*actions, "travel agent"])

    async def play() -> TokenEpisode:
        episode = TokenEpisode(EnvSource(FLIGHTS), tokenizer)
        try:
            await episode.open({"seed": seed, "split": "train"}, SYSTEM)
            for action in actions:
                await episode.act(tokenizer.encode(action + END, add_special_tokens=False), None)
        finally:
            await episode.close()
        return episode

    episode = asyncio.run(play())
    assert episode.done and episode.reward == 1.0 and episode.turns == len(actions)
    # agent-train's transcript of the same episode, played on a fresh in-process env
    env = gym.make(FLIGHTS)
    observation, _ = env.reset(seed=seed, options={"split": "train"})
    expected = Transcript(tokenizer)
    expected.start([*SYSTEM, {"role": "user", "content": observation}])
    for action in actions:
        ids = tokenizer.encode(action + END, add_special_tokens=False)
        expected.add_generation(ids, [0.0] * len(ids), version=0)
        observation, _, terminated, truncated, _ = env.step(action)
        if not (terminated or truncated):
            assert expected.add_env_message(observation)
    assert (episode.ids, episode.mask) == (expected.ids, expected.mask)
    assert episode.prompt_ids + episode.response_ids == episode.ids
    assert episode.prompt_ids == expected.ids[: expected.mask.index(1)]
    assert episode.response_logprobs == [0.0] * len(episode.response_ids)


def test_a_template_that_rewrites_history_fails_loudly():
    tokenizer = tiny_tokenizer(["hello"])
    # renders only the last message: the ids given to the model stop being a prefix of the rendering
    tokenizer.chat_template = ("{% for m in messages[-1:] %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                               "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                               "{% endif %}")
    tokens = TokenTranscript(tokenizer)
    tokens.start("the task")
    assert tokens.add_generation(tokenizer.encode("hi" + END, add_special_tokens=False)) == "hi"
    with pytest.raises(TokenDriftError, match="does not extend"):
        tokens.add_observation("an observation")
