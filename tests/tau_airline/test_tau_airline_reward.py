"""The reward as τ-bench computes it: gold replay earns 1 on every task, doing nothing earns 0
where the reference would not, and the refusal false positive, with and without `strict_refusals`.
A hack suite of cheap policies stays at 0 on every task that is not a refusal."""

from __future__ import annotations

import pytest
from tau_hacks import HACKS, RULE_SENTENCES, paid, reasoned, table
from tau_hacks import play as play_task
from tau_helpers import DATA, call

from agentrl.tau_airline.data import load
from agentrl.tau_airline.env import TauAirlineEnv, gold_actions, gold_state, initial_state, refusal_tasks
from agentrl.tau_airline.strict import POLICY_RULES, blanket_refusal_penalty, forbidding_rules, named_rules

TASKS = load(DATA).tasks
N = len(TASKS)
REFUSAL_TASK = 4  # the gold only looks: the database must stay unchanged, no output asked
HANDOFF_TASK = 5  # the gold hands off to a human
OUTPUT_TASK = 3  # unchanged database, but the answer "450" must be said


def play(actions: list[str], index: int, **kwargs) -> tuple[float, dict]:
    return play_task(DATA, actions, index, **kwargs)


def changes_database(index: int) -> bool:
    data = load(DATA)
    return gold_state(data, TASKS[index]) != initial_state(data)


@pytest.mark.parametrize("index", range(N))
def test_gold_replay_scores_one(index):
    reward, info = play(gold_actions(TASKS[index]), index)
    assert reward == 1.0, info.get("reward_info")


@pytest.mark.parametrize("index", range(N))
def test_the_reasoned_policy_scores_one_under_strict_refusals(index):
    """The strict rules ask nothing a careful agent does not do: read the customer's records, do
    what the gold does, and refuse (or hand off) naming the rule that forbids the request."""
    reward, info = play(reasoned(load(DATA), TASKS[index]), index, strict_refusals=True)
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


def test_a_strict_refusal_names_the_rule_that_forbids_the_request_and_no_other():
    """RES004 is basic economy, booked weeks ago, uninsured: cancelling it is forbidden by the
    24-hour/insurance rule, computed from the database, and by no other rule."""
    assert forbidding_rules(load(DATA), TASKS[REFUSAL_TASK]) == {"cancellation_window"}
    look = [call("get_reservation_details", reservation_id="RES004")]
    for refusal, pays in [
        ("I'm sorry, but I cannot cancel it: it was booked more than 24 hours ago.", True),
        ("I'm sorry, but I cannot cancel it: you have no insurance.", True),
        ("I'm sorry, but I cannot help with that.", False),  # no reason: a blanket refusal
        # a rule that does not forbid this request; a right rule with a wrong one
        ("I'm sorry, but I cannot cancel it: basic economy flights cannot be changed.", False),
        ("I'm sorry, but I cannot: it is past 24 hours, and basic economy cannot be changed.", False),
    ]:
        reward, info = play([*look, refusal], REFUSAL_TASK, strict_refusals=True)
        assert (reward == 1.0) == pays and info["reward_info"]["refusal_reasoned"] == pays, refusal
    # the reason counts in any message of the conversation
    later = play([*look, "Let me see.", "I cannot: 24 hours have passed."], REFUSAL_TASK,
                 strict_refusals=True, user_turns=["Cancel RES004.", "Well?"])
    assert later[0] == 1.0


def test_each_rule_sentence_names_its_rule_only_and_the_policy_names_many():
    for rule, sentence in RULE_SENTENCES.items():
        assert named_rules([sentence]) == {rule}, rule
    assert named_rules([load(DATA).policy]) >= {"cancellation_window", "basic_economy_change"}
    assert set(RULE_SENTENCES) == set(POLICY_RULES)


def test_strict_handoff_needs_the_transfer_after_the_gold_s_look_up_and_its_reason():
    assert play(["Please hold."], HANDOFF_TASK)[0] == 1.0
    assert play(["I cannot help with that."], HANDOFF_TASK, strict_refusals=True)[0] == 0.0
    # cole_vance_202 is a regular member, uninsured, with no cancelled flight: no compensation
    assert forbidding_rules(load(DATA), TASKS[HANDOFF_TASK]) == {"compensation"}
    looked_then_help = [call("get_user_details", user_id="cole_vance_202"),
                        call("transfer_to_human_agents", summary="help")]
    reward, info = play(looked_then_help, HANDOFF_TASK, strict_refusals=True)
    assert reward == 0.0 and not info["reward_info"]["refusal_reasoned"]  # a hand-off with no reason
    transfer = [call("transfer_to_human_agents", summary="lost bag, asks for compensation")]
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


def test_strict_outputs_are_said_as_whole_numbers():
    """The benchmark's substring rule pays "450" for "1450" or "450.5"; under `strict_refusals` a
    required output is a whole word: not inside a longer number or a decimal."""
    for message, pays in [("It is 1450 dollars.", False), ("It is 4500.", False), ("It is 450.5.", False),
                          ("Ref4501.", False), ("It is 450.", True), ("$450.00 in all", True),
                          ("It is $4,50 in all.", True), ("450 dollars", True)]:
        assert play([message], OUTPUT_TASK, strict_refusals=True)[0] == float(pays), message
    assert play(["It is 1450 dollars."], OUTPUT_TASK)[0] == 1.0  # the default keeps the benchmark's rule


def test_truncation_pays_nothing():
    # the database is right after the first step, but the conversation never ends
    reward, info = play([*gold_actions(TASKS[0])[:-1], call("think", thought="...")], 0, max_turns=2)
    assert reward == 0.0


BLANKET = "read, then cite the commonest rule"
BY_KIND = "read, then cite the rule of the request's kind"


def hack_rate(hack: str, **kwargs) -> float:
    rewards = paid(DATA, HACKS[hack], **kwargs)
    return sum(rewards) / len(rewards)


@pytest.mark.parametrize("hack", sorted(set(HACKS) - {BLANKET, BY_KIND}))
def test_hack_suite_scores_zero_under_strict_refusals(hack):
    """Under `strict_refusals` no cheap policy earns anything on any task, refusal and hand-off tasks
    included: a refusal or a hand-off pays only after the gold's look-ups (or the customer's
    records) and naming the rule that forbids the request, a sprayed message says no output, a
    number is said only whole."""
    assert hack_rate(hack, strict_refusals=True) == 0.0


@pytest.mark.parametrize("hack", sorted(HACKS))
def test_hack_suite_scores_only_the_benchmark_s_own_false_positive_by_default(hack):
    """Without `strict_refusals` the reward is the benchmark's: a policy that changes nothing and says
    no output earns 1 on its refusal and hand-off tasks (as the benchmark pays them) and nothing
    elsewhere; the number cap holds by default too."""
    passive = {t.index for t in refusal_tasks(load(DATA))}
    rewards = paid(DATA, HACKS[hack])
    assert all(reward == 0.0 for index, reward in enumerate(rewards) if index not in passive), hack


@pytest.mark.parametrize("hack", [BLANKET, BY_KIND])
def test_a_blanket_refusal_citing_a_likely_rule_is_paid_only_where_that_rule_forbids(hack):
    """The rule's limit, measured: a policy that reads the records and refuses everything citing
    the rule most refusals rest on (or the one most refusals of the request's kind rest on) is
    right wherever that rule forbids the request, and nothing on the final state tells it from a
    judged refusal there; it earns nothing anywhere else."""
    data = load(DATA)
    rewards = paid(DATA, HACKS[hack], strict_refusals=True)
    right = {t.index for t in refusal_tasks(data)
             if named_rules([HACKS[hack](data, t)[-1]]) <= forbidding_rules(data, t)
             and not any(a.name == "transfer_to_human_agents" for a in t.actions)}
    assert right and {i for i, r in enumerate(rewards) if r > 0} == right


def test_wrong_refusal_penalty_makes_a_blanket_refusal_earn_no_more_than_doing_nothing():
    """The remedy for training: with the penalty `blanket_refusal_penalty` computes, a failed
    episode of a task that needed an action or an output and ended on a refusal or a hand-off costs
    it, so no blanket refusal beats doing nothing (0) in the mean, and the reasoned policy loses
    nothing."""
    data = load(DATA)
    penalty = blanket_refusal_penalty(data, refusal_tasks(data))
    assert penalty > 0
    strict = {"strict_refusals": True, "wrong_refusal_penalty": penalty}
    for hack in (BLANKET, BY_KIND, "read, then refuse", "read, then transfer", "blind apology"):
        assert hack_rate(hack, **strict) < 1e-12, hack  # at most 0, float sums aside
    assert hack_rate("stall", **strict) == 0.0  # doing nothing is not a refusal
    assert min(paid(DATA, HACKS[BLANKET], strict_refusals=True, wrong_refusal_penalty=penalty)) == -penalty
    assert paid(DATA, reasoned, **strict) == [1.0] * N
    reward, info = play(HACKS[BLANKET](data, TASKS[0]), 0, **strict)
    assert reward == -penalty and info["reward_info"]["wrong_refusal"]
    with pytest.raises(ValueError, match="needs strict_refusals"):
        TauAirlineEnv(DATA, wrong_refusal_penalty=0.5)
    with pytest.raises(ValueError, match="a number >= 0"):
        TauAirlineEnv(DATA, strict_refusals=True, wrong_refusal_penalty=-1.0)


def test_hack_table(capsys):
    """The table docs/tau-airline.md shows, on the fixture's tasks (`python tests/tau_airline/
    tau_hacks.py DATA_DIR` makes it for τ-bench's own)."""
    text = table(DATA)
    with capsys.disabled():
        print("\n" + text)
    assert "| reasoned (reference) | 1.00 (10) | 1.00 (10) | 1.00 (10) |" in text
