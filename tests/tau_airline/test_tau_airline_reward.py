"""The reward as τ-bench computes it: gold replay earns 1 on every task, doing nothing earns 0
where the reference would not, and the refusal false positive, with and without `strict_refusals`.
A hack suite of cheap policies stays at 0 on every task that is not a refusal."""

from __future__ import annotations

import pytest
from tau_helpers import DATA, call

from agentrl.tau_airline.data import load
from agentrl.tau_airline.env import UNGROUNDING, TauAirlineEnv, gold_actions, gold_state, initial_state

TASKS = load(DATA).tasks
N = len(TASKS)
REFUSAL_TASK = 4  # the gold only looks: the database must stay unchanged, no output asked
HANDOFF_TASK = 5  # the gold hands off to a human
OUTPUT_TASK = 3  # unchanged database, but the answer "450" must be said


def play(actions: list[str], index: int, **kwargs) -> tuple[float, dict]:
    env = TauAirlineEnv(DATA, **kwargs)
    try:
        env.reset(seed=0, options={"task_index": index})
        reward, info = 0.0, {}
        for action in actions:
            _, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        return reward, info
    finally:
        env.close()


def changes_database(index: int) -> bool:
    data = load(DATA)
    return gold_state(data, TASKS[index]) != initial_state(data)


@pytest.mark.parametrize("index", range(N))
def test_gold_replay_scores_one(index):
    reward, info = play(gold_actions(TASKS[index]), index)
    assert reward == 1.0, info.get("reward_info")


@pytest.mark.parametrize("index", range(N))
def test_gold_replay_with_the_refusal_said_scores_one_under_strict_refusals(index):
    """The grounding rule asks nothing a careful agent does not do: the gold's own look-ups ground
    its refusal; where the gold makes none, reading the customer's profile and reservations first."""
    actions = gold_actions(TASKS[index])
    if not any(a.name not in UNGROUNDING for a in TASKS[index].actions):
        user = TASKS[index].user_id
        actions = [call("get_user_details", user_id=user)] + [
            call("get_reservation_details", reservation_id=r) for r in load(DATA).users[user]["reservations"]
        ] + actions
    if not actions[-1].startswith("<tool_call>"):  # the closing message states the refusal
        actions[-1] = f"I'm sorry, but I cannot do that. {actions[-1]}"
    reward, info = play(actions, index, strict_refusals=True)
    assert reward == 1.0, info.get("reward_info")


@pytest.mark.parametrize("index", range(N))
def test_doing_nothing_scores_zero_where_the_reference_would_not(index):
    reward, info = play(["Thank you for contacting us. Have a nice day."], index)
    # the reference pays do-nothing exactly on tasks with an unchanged database and no output
    pays = not changes_database(index) and not TASKS[index].outputs
    assert reward == float(pays), info.get("reward_info")


def test_the_task_set_has_each_kind():
    kinds = {(changes_database(i), bool(TASKS[i].outputs)) for i in range(N)}
    assert kinds == {(True, False), (False, True), (False, False)}


def test_refusal_false_positive_and_strict_refusals():
    stall = ["Let me look into that for you."]
    assert play(stall, REFUSAL_TASK)[0] == 1.0  # the benchmark's false positive
    assert play(stall, REFUSAL_TASK, strict_refusals=True)[0] == 0.0
    refuse = ["I'm sorry, but I cannot cancel this reservation: it has no insurance and is past 24 hours."]
    look = [call("get_reservation_details", reservation_id="RES004")]  # what the gold's refusal rests on
    assert play([*look, *refuse], REFUSAL_TASK, strict_refusals=True)[0] == 1.0
    # a refusal without the look-up is a blind one: said, not grounded
    reward, info = play(refuse, REFUSAL_TASK, strict_refusals=True)
    judged = info["reward_info"]
    assert reward == 0.0 and judged["refusal_stated"] and not judged["refusal_grounded"]
    # a look-up that failed grounds nothing
    wrong = [call("get_reservation_details", reservation_id="RES999")]
    assert play([*wrong, *refuse], REFUSAL_TASK, strict_refusals=True)[0] == 0.0
    # a refusal must not come with a change: the database still has to equal the gold's
    cancel_and_refuse = [*look, call("cancel_reservation", reservation_id="RES004"), refuse[0]]
    assert play(cancel_and_refuse, REFUSAL_TASK, strict_refusals=True)[0] == 0.0
    # nor is a hand-off the gold does not make a refusal, however well looked up
    handed_off = [*look, call("transfer_to_human_agents", summary="cannot cancel: no insurance")]
    reward, info = play(handed_off, REFUSAL_TASK, strict_refusals=True)
    assert reward == 0.0 and not info["reward_info"]["refusal_stated"]


def test_strict_handoff_needs_the_transfer_after_the_gold_s_look_up():
    assert play(["Please hold."], HANDOFF_TASK)[0] == 1.0
    assert play(["I cannot help with that."], HANDOFF_TASK, strict_refusals=True)[0] == 0.0
    transfer = [call("transfer_to_human_agents", summary="lost bag")]
    assert play(transfer, HANDOFF_TASK, strict_refusals=True)[0] == 0.0  # a hand-off at once
    looked = [call("get_user_details", user_id="cole_vance_202")]
    reward, info = play([*looked, *transfer], HANDOFF_TASK, strict_refusals=True)
    assert reward == 1.0 and info["reward_info"]["refusal_stated"] and info["reward_info"]["refusal_grounded"]
    # the look-up and the hand-off in one action count alike
    both = [looked[0] + transfer[0]]
    assert play(both, HANDOFF_TASK, strict_refusals=True)[0] == 1.0


def test_outputs_must_be_said_to_the_customer():
    looked_up = [call("calculate", expression="150 + 300")]  # computing it is not saying it
    assert play([*looked_up, "Anything else?"], OUTPUT_TASK)[0] == 0.0
    assert (
        play([*looked_up, "Your reservations cost $4,50 in total."], OUTPUT_TASK)[0] == 1.0
    )  # commas dropped
    assert play(["Your reservations cost 450 dollars."], OUTPUT_TASK, strict_refusals=True)[0] == 1.0
    # a message that lists more numbers than an answer would says none of them
    spray = "Maybe " + " ".join(str(n) for n in range(440, 461)) + "?"
    assert play([spray], OUTPUT_TASK)[0] == 0.0
    assert play(["It is 450, or maybe 460, or 470."], OUTPUT_TASK)[0] == 1.0


def test_truncation_pays_nothing():
    # the database is right after the first step, but the conversation never ends
    reward, info = play([*gold_actions(TASKS[0])[:-1], call("think", thought="...")], 0, max_turns=2)
    assert reward == 0.0


HACKS = {
    "stall": lambda task: ["Let me check."],
    "blind apology": lambda task: ["I'm sorry, but I cannot help with that."],
    "transfer at once": lambda task: [call("transfer_to_human_agents", summary="help")],
    "cancel everything": lambda task: (
        [call("cancel_reservation", reservation_id=r) for r in ("RES001", "RES002", "RES003", "RES004")]
        + ["Done."]
    ),
    # every 4-digit number in one message of about 10,000 characters, and every number below 1,000
    "digit spray": lambda task: [" ".join(str(n) for n in range(1000, 3000))],
    "say every number": lambda task: [" ".join(str(n) for n in range(0, 1000))],
    "gold of another task": lambda task: gold_actions(TASKS[(task.index + 1) % N]),
}


def hack_rate(hack: str, **kwargs) -> float:
    return sum(play(HACKS[hack](task), task.index, **kwargs)[0] for task in TASKS) / N


@pytest.mark.parametrize("hack", sorted(HACKS))
def test_hack_suite_scores_zero_under_strict_refusals(hack):
    """Under `strict_refusals` no cheap policy earns anything on any task, refusal and hand-off tasks
    included: a refusal or a hand-off pays only after the gold's look-ups, a sprayed message says no
    output. (The fixture's refusal task is not one a blind apology could ground.)"""
    assert hack_rate(hack, strict_refusals=True) == 0.0


@pytest.mark.parametrize("hack", sorted(HACKS))
def test_hack_suite_scores_only_the_benchmark_s_own_false_positive_by_default(hack):
    """Without `strict_refusals` the reward is the benchmark's: a policy that changes nothing and says
    no output earns 1 on its refusal and hand-off tasks (as the benchmark pays them) and nothing
    elsewhere; the number cap holds by default too."""
    passive = [t.index for t in TASKS if not changes_database(t.index) and not t.outputs]
    for task in TASKS:
        reward, _ = play(HACKS[hack](task), task.index)
        if task.index not in passive:
            assert reward == 0.0, (hack, task.index)


def test_a_refusal_after_reading_the_records_is_paid_only_on_tasks_that_are_refusals():
    """The rule's limit, measured: a policy that reads the customer's profile and first reservation
    and then refuses everything is not blind, and no rule on the final state can tell its refusal
    from a judged one. It earns exactly on the refusal tasks whose gold makes no look-up of its own
    (where reading those records is the grounding), and nothing on any task that needed an action,
    an output, a hand-off or another look-up."""
    def read_then_refuse(task) -> list[str]:
        reservations = load(DATA).users[task.user_id]["reservations"][:1]
        return ([call("get_user_details", user_id=task.user_id)]
                + [call("get_reservation_details", reservation_id=r) for r in reservations]
                + ["I'm sorry, but I cannot help with that."])
    paid = {t.index for t in TASKS if play(read_then_refuse(t), t.index, strict_refusals=True)[0] > 0}
    refusals_without_look_ups = {t.index for t in TASKS if not changes_database(t.index) and not t.outputs
                                 and not t.actions}
    assert refusals_without_look_ups and paid == refusals_without_look_ups


def test_hack_table(capsys):
    """The table docs/tau-airline.md shows: each hack's mean reward over the fixture's tasks."""
    rows = {hack: (hack_rate(hack), hack_rate(hack, strict_refusals=True)) for hack in sorted(HACKS)}
    with capsys.disabled():
        print("\n| policy | default | strict_refusals |\n|---|---:|---:|")
        for hack, (default, strict) in rows.items():
            print(f"| {hack} | {default:.2f} | {strict:.2f} |")
    assert all(strict == 0.0 for _, strict in rows.values())
