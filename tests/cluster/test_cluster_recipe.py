"""How a lost episode's recipe is replayed: its steps in batches, bounded, each reset alone (no server)."""

from __future__ import annotations

from agentrl.client.recipe import REPLAY_BATCH_CHARS, REPLAY_BATCH_S, op_name, replay_batches
from agentrl.protocol import MAX_BATCH


def step(action: str = "a", seconds: float = 0.0) -> tuple:
    return ("step", action, seconds, ("digest",))


def reset() -> tuple:
    return ("reset", 7, None, ("digest",))


def test_steps_between_resets_go_in_one_batch_each_reset_alone():
    ops = [step("1"), step("2"), reset(), step("3"), reset(), reset(), step("4")]
    assert list(replay_batches(ops)) == [ops[0:2], [ops[2]], [ops[3]], [ops[4]], [ops[5]], [ops[6]]]
    assert list(replay_batches([])) == []


def test_a_batch_keeps_to_the_item_count_the_action_size_and_the_steps_recorded_time():
    """A long episode's replay is several requests, each one a server takes and answers in time."""
    many = [step(str(i)) for i in range(MAX_BATCH + 5)]
    assert [len(b) for b in replay_batches(many)] == [MAX_BATCH, 5]
    big = [step("x" * (REPLAY_BATCH_CHARS // 2 + 1)) for _ in range(3)]
    assert [len(b) for b in replay_batches(big)] == [1, 1, 1]
    slow = [step(seconds=REPLAY_BATCH_S / 3 + 0.01) for _ in range(5)]  # a sandbox's slow commands
    assert [len(b) for b in replay_batches(slow)] == [2, 2, 1]
    slowest = [step(seconds=REPLAY_BATCH_S * 5), step(), step(seconds=REPLAY_BATCH_S * 5)]
    assert [len(b) for b in replay_batches(slowest)] == [1, 1, 1]  # one over the bound still goes, alone


def test_an_op_is_named_by_its_step_count():
    assert op_name(step('<tool_call>{"name": "echo"}'), 2) == """step 2 ('<tool_call>{"name": "echo"}')"""
    assert op_name(reset(), 3) == "the reset after step 3"
