"""The page at /ui in real headless Chromium: play by hand, watch a script's episode, read errors, sign in."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

import gymnasium as gym
import httpx
import pytest
from ui_helpers import ECHO, FLIGHTS, TOKEN

from agentrl.core import tool_call as call
from agentrl.core.parsing import ParsedCall, parse_tool_calls
from agentrl.flights.oracle import OraclePolicy


def oracle_seed() -> int:
    """A seed whose task the oracle solves with a list argument among its calls (the richest form).

    Found by playing in-process, so the test follows whatever tasks Flights-v0 has today."""
    env = gym.make(FLIGHTS, privileged_info=True).unwrapped
    try:
        solved = []
        for seed in range(40):
            policy, (observation, info) = OraclePolicy(), env.reset(seed=seed)
            lists, reward, done = False, 0.0, False
            while not done:
                action = policy(observation, info)
                lists |= any(isinstance(v, list) for c in parse_tool_calls(action)
                             if isinstance(c, ParsedCall) for v in c.arguments.values())
                observation, reward, terminated, truncated, info = env.step(action)
                done = terminated or truncated
            if reward == 1.0:
                solved.append(seed)
                if lists:
                    return seed
        assert solved, "the oracle solves no Flights-v0 task in seeds 0..39"
        return solved[0]
    finally:
        env.close()


def fill_form(page: Any, tool: ParsedCall) -> None:
    """Fill the generated form of `tool.name` with its arguments, as a person would, and submit it."""
    form = page.locator(f'form.tool-form[data-tool="{tool.name}"]')
    form.evaluate("f => { f.closest('details').open = true; f.reset(); }")
    for name, value in tool.arguments.items():
        field = form.locator(f'[data-arg="{name}"]')
        if field.evaluate("el => el.tagName") == "SELECT":
            field.select_option(json.dumps(value))
        else:
            field.fill(", ".join(map(str, value)) if isinstance(value, list) else str(value))
    form.locator("button[type=submit]").click()


def test_play_flights_to_reward_1_through_the_tool_forms(page, base_url, shots):
    seed = oracle_seed()
    page.goto(f"{base_url}/ui")
    page.select_option("#env-id", FLIGHTS)
    page.fill("#seed", str(seed))
    page.click("#start")
    page.wait_for_url("**/play")
    episode_id = unquote(page.url.split("/")[-2])
    assert page.locator('#transcript [data-step="0"] h1', has_text="Customer request").count() == 1
    policy = OraclePolicy()
    with httpx.Client(base_url=base_url, timeout=30) as http:
        transcript = http.get(f"/v1/episodes/{episode_id}/transcript").json()
        observation, info = transcript["first"]["observation"], transcript["first"]["info"]
        assert "task" in info  # the operator's privileged info reached the episode
        for turn in range(1, 31):
            calls = parse_tool_calls(policy(observation, info))
            assert len(calls) == 1 and isinstance(calls[0], ParsedCall), calls
            fill_form(page, calls[0])
            page.locator(f'#transcript .observation[data-step="{turn}"]').wait_for()
            got = http.get(f"/v1/episodes/{episode_id}/transcript", params={"start": turn - 1}).json()
            [step] = got["steps"]
            assert parse_tool_calls(step["action"]) == calls  # the form wrote exactly the oracle's call
            result = step["result"]
            observation, info = result["observation"], result["info"]
            if turn == 2:  # mid-episode: the transcript so far and the forms to act with
                page.set_viewport_size({"width": 1280, "height": 1600})
                page.locator('#transcript .action[data-step="2"]').evaluate("el => el.scrollIntoView()")
                page.screenshot(path=shots / "play-view.png")
                page.set_viewport_size({"width": 1280, "height": 900})
            if result["terminated"] or result["truncated"]:
                break
    assert result["terminated"] and result["reward"] == 1.0
    assert "reward 1.0" in page.locator("#last-result").inner_text()
    assert page.locator("#status").inner_text() == "done"
    assert page.locator("#last-reward").inner_text() == "1.0"
    last = page.locator(f'#transcript .observation[data-step="{turn}"]')
    assert "terminated" in last.inner_text()
    assert page.locator("#controls").is_hidden()  # nothing left to do in a finished episode
    assert page.locator("#over").is_visible()
    last.scroll_into_view_if_needed()
    page.screenshot(path=shots / "play-finished.png")


def test_live_list_shows_a_scripted_episode_and_follows_it(page, base_url, shots):
    page.goto(f"{base_url}/ui")
    with httpx.Client(base_url=base_url, timeout=30) as http:
        first = http.post("/v1/episodes", json={"env_id": ECHO, "seed": 7}).json()
        episode_id = first["episode_id"]
        row = page.locator(f'#episodes tr[data-episode="{episode_id}"]')
        row.wait_for()
        assert row.locator(".status").inner_text() == "running"
        assert row.locator(".steps").inner_text() == "0"
        http.post(f"/v1/episodes/{episode_id}/step", json={"action": call("echo", text="hello")})
        page.wait_for_function(
            f"document.querySelector('tr[data-episode=\"{episode_id}\"] .steps').textContent === '1'")
        assert row.locator(".last-reward").inner_text() == "0.0"
        page.screenshot(path=shots / "live-list.png", full_page=True)

        row.locator(f'a[href="/ui/episodes/{episode_id}"]').click()  # read-only: no forms to act with
        page.wait_for_url(f"**/ui/episodes/{episode_id}")
        assert page.locator(".tool-form, #raw-form").count() == 0
        assert "hello" in page.locator('#transcript .observation[data-step="1"]').inner_text()
        http.post(f"/v1/episodes/{episode_id}/step", json={"action": call("echo", text="second step")})
        page.locator('#transcript .observation[data-step="2"]').wait_for()
        assert "second step" in page.locator('#transcript .observation[data-step="2"]').inner_text()
        http.post(f"/v1/episodes/{episode_id}/step",
                  json={"action": call("finish", answer=first["info"]["secret"])})
        page.wait_for_function("document.getElementById('status').textContent === 'done'")
        assert page.locator("#view-kind").inner_text() == "Trajectory"
        assert page.locator("#last-reward").inner_text() == "1.0"
        http.delete(f"/v1/episodes/{episode_id}")
        page.wait_for_function("document.getElementById('status').textContent === 'closed'")
    page.reload()  # a closed episode's trajectory stays readable
    assert page.locator("#transcript .observation").count() == 4


def test_bad_input_shows_the_envs_and_the_apis_explanations(page, base_url):
    page.goto(f"{base_url}/ui")
    page.select_option("#env-id", ECHO)
    page.fill("#options", "[1, 2]")
    page.click("#start")
    with httpx.Client(base_url=base_url, timeout=30) as http:
        api = http.post("/v1/episodes", json={"env_id": ECHO, "seed": None, "options": [1, 2]}).json()
    page.locator("#start-error").wait_for()
    assert api["message"] in page.locator("#start-error").inner_text()

    page.fill("#options", "")
    page.fill("#seed", "1")
    page.click("#start")
    page.wait_for_url("**/play")
    page.fill("#raw-action", '<tool_call>{"name": "echo", "arguments": {</tool_call>')
    page.click("#send-raw")
    malformed = page.locator('#transcript .observation[data-step="1"]')
    malformed.wait_for()
    assert "is not valid JSON" in malformed.inner_text()
    form = page.locator('form.tool-form[data-tool="finish"]')
    form.evaluate("f => f.closest('details').open = true")
    form.locator("button[type=submit]").click()  # a required argument left empty: the env says which
    explained = page.locator('#transcript .observation[data-step="2"]')
    explained.wait_for()
    assert "invalid arguments for 'finish'" in explained.inner_text()


@pytest.mark.parametrize("wrong", ["", "not-the-token"])
def test_with_a_token_the_page_refuses_access_without_it(page, token_url, wrong):
    page.goto(f"{token_url}/ui")
    assert "/ui/login" in page.url and page.locator("#episodes").count() == 0
    page.fill("#token", wrong)
    page.click("#sign-in")
    assert page.locator("#login-error").inner_text() == "wrong token"
    assert page.locator("#episodes").count() == 0
    page.fill("#token", TOKEN)
    page.click("#sign-in")
    page.wait_for_url(f"{token_url}/ui")
    page.select_option("#env-id", ECHO)
    page.click("#start")  # the API accepts the page's requests once signed in
    page.wait_for_url("**/play")
    assert page.locator('#transcript [data-step="0"]').count() == 1
