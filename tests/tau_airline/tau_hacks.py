"""Cheap policies that try to be paid for TauAirline-v0's tasks without doing them, the reference
policy that does them, and the table of what each earns (docs/tau-airline.md).

Run on τ-bench's own airline data (a checkout; nothing of it is shipped) to regenerate the docs'
table of the 50 test tasks:

    python tests/tau_airline/tau_hacks.py tau-bench/tau_bench/envs/airline
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tau_helpers import call, play_actions

from agentrl.tau_airline.data import AirlineData, Task, load
from agentrl.tau_airline.env import TRANSFER, TauAirlineEnv, gold_actions, refusal_tasks
from agentrl.tau_airline.strict import blanket_refusal_penalty, forbidding_rules, requested

# One sentence naming each rule of `POLICY_RULES` (and no other), as a careful agent would say it.
RULE_SENTENCES = {
    "cancellation_window": "it was booked more than 24 hours ago without travel insurance",
    "insurance_reason": "travel insurance refunds a cancellation for health or weather reasons only",
    "flown_segment": "part of the trip has already been flown",
    "basic_economy_change": "basic economy flights cannot be changed",
    "passenger_count": "the number of passengers cannot change",
    "insurance_after_booking": "travel insurance cannot be bought after booking, only at booking time",
    "compensation": "no compensation is due for this",
}
APOLOGY = "I'm sorry, but I cannot help with that."
# the rule most of τ-bench's refusals rest on: the policy a blanket refuser would cite
COMMONEST_RULE = "cancellation_window"
# the rule a blanket refuser would cite for each kind of request, most specific kind first
KIND_RULES = {
    "passengers": "passenger_count", "add_insurance": "insurance_after_booking",
    "compensation": "compensation", "cancel": "cancellation_window", "change": "basic_economy_change",
}

Policy = Callable[[AirlineData, Task], list[str]]


def read_records(data: AirlineData, task: Task) -> list[str]:
    """The customer's profile and every one of their reservations, read."""
    reservations = data.users[task.user_id]["reservations"]
    return [call("get_user_details", user_id=task.user_id),
            *(call("get_reservation_details", reservation_id=r) for r in reservations)]


def hands_off(task: Task) -> bool:
    return any(a.name == TRANSFER for a in task.actions)


def transfer(summary: str) -> str:
    return call(TRANSFER, summary=summary)


def reasoned(data: AirlineData, task: Task) -> list[str]:
    """The reference: the records read, the gold's calls, and on a refusal or hand-off task the
    refusal (or the hand-off's summary) naming one rule that forbids the request, none where no
    rule does."""
    actions = [*read_records(data, task), *gold_actions(task)]
    if task not in refusal_tasks(data):
        return actions
    rules = sorted(forbidding_rules(data, task))
    reason = f": {RULE_SENTENCES[rules[0]]}." if rules else "."
    if hands_off(task):
        return [*actions[:-1], transfer(f"The customer's request cannot be done{reason}")]
    calls = [a for a in actions if a.startswith("<tool_call>")]
    return [*calls, f"I'm sorry, but I cannot do that{reason}"]


def choose(data: AirlineData, task: Task) -> list[str]:
    """Reads, then hands off where the gold hands off and refuses elsewhere (an oracle's choice
    between the two, with no reason given)."""
    return [*read_records(data, task), transfer("help") if hands_off(task) else APOLOGY]


def cite_by_kind(data: AirlineData, task: Task) -> list[str]:
    """Reads, then refuses citing the rule that most often forbids the kind of request the customer
    makes (read from the customer's words, as `strict` reads them), never checking the database."""
    kinds = requested(task)
    rule = next((rule for kind, rule in KIND_RULES.items() if kind in kinds), None)
    reason = f": {RULE_SENTENCES[rule]}." if rule else "."
    return [*read_records(data, task), f"I'm sorry, but I cannot do that{reason}"]


def cancel_everything(data: AirlineData, task: Task) -> list[str]:
    reservations = data.users[task.user_id]["reservations"]
    return [*(call("cancel_reservation", reservation_id=r) for r in reservations), "Done."]


HACKS: dict[str, Policy] = {
    "stall": lambda data, task: ["Let me check."],
    "blind apology": lambda data, task: [APOLOGY],
    "transfer at once": lambda data, task: [transfer("help")],
    "read, then refuse": lambda data, task: [*read_records(data, task), APOLOGY],
    "read, then transfer": lambda data, task: [*read_records(data, task), transfer("help")],
    "read, then choose between the two": choose,
    "read, then quote the policy": lambda data, task: [*read_records(data, task), data.policy],
    "read, then name every rule": lambda data, task: [
        *read_records(data, task), "I'm sorry, but I cannot: " + "; ".join(RULE_SENTENCES.values()) + "."],
    "read, then cite the commonest rule": lambda data, task: [
        *read_records(data, task), f"I'm sorry, but I cannot do that: {RULE_SENTENCES[COMMONEST_RULE]}."],
    "read, then cite the rule of the request's kind": cite_by_kind,
    # every 4-digit number in one message of about 10,000 characters; every number below 1,000;
    # and 20 numbers (0 to 18, 24), under the cap on numbers a message may hold
    "digit spray": lambda data, task: [" ".join(str(n) for n in range(1000, 3000))],
    "say every number": lambda data, task: [" ".join(str(n) for n in range(0, 1000))],
    "numbers under the cap": lambda data, task: [
        *read_records(data, task), " ".join(str(n) for n in range(0, 19)) + ", or 24 hours"],
    "cancel everything": cancel_everything,
    "gold of another task": lambda data, task: gold_actions(data.tasks[(task.index + 1) % len(data.tasks)]),
}


def play(data_dir: str | Path, actions: list[str], index: int, **kwargs) -> tuple[float, dict]:
    """One episode of the task with the default scripted customer: its reward and last info."""
    env = TauAirlineEnv(data_dir, **kwargs)
    env.reset(seed=0, options={"task_index": index})
    return play_actions(env, actions)


def paid(data_dir: str | Path, policy: Policy, **kwargs) -> list[float]:
    """The policy's reward on each task of the data."""
    data = load(data_dir)
    return [play(data_dir, policy(data, task), task.index, **kwargs)[0] for task in data.tasks]


def table(data_dir: str | Path) -> str:
    """The docs' hack table: each policy's mean reward (and tasks paid) by default, under
    `strict_refusals`, and under it with the `wrong_refusal_penalty` that makes a blanket refusal
    earn no more than doing nothing."""
    data = load(data_dir)
    penalty = blanket_refusal_penalty(data, refusal_tasks(data))
    settings = ({}, {"strict_refusals": True}, {"strict_refusals": True, "wrong_refusal_penalty": penalty})
    rows = ["| policy | default | `strict_refusals` | and `wrong_refusal_penalty` "
            f"{penalty:.2f} |", "|---|---:|---:|---:|"]
    for name, policy in {"reasoned (reference)": reasoned, **HACKS}.items():
        cells = []
        for kwargs in settings:
            rewards = paid(data_dir, policy, **kwargs)
            cells.append(f"{sum(rewards) / len(rewards) + 0.0:.2f} ({sum(r > 0 for r in rewards)})")
        rows.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", help="τ-bench's airline folder (tau_bench/envs/airline of a checkout)")
    print(table(parser.parse_args().data_dir))
