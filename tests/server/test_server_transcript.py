"""What a server keeps of each episode's steps for watchers (`GET .../transcript`, /ui)."""

from __future__ import annotations

import agentrl.server.transcript as module
from agentrl.server.transcript import WatchTranscript


def test_a_transcript_over_its_budget_lets_the_oldest_steps_go_and_keeps_their_numbers(monkeypatch):
    """A long episode's transcript stays within its byte budget by dropping its oldest steps (in
    constant time each: a step must stay cheap however long the episode), never the first
    observation, and the kept steps keep their numbers."""
    transcript = WatchTranscript()
    transcript.begin({"observation": "start", "info": {}})
    body = b"x" * 1000
    transcript.record("a", 0.0, body)  # measure one step's size, then fill the budget three times over
    per_step = transcript.size - len(transcript.first)
    budget = 64 * per_step
    monkeypatch.setattr(module, "MAX_TRANSCRIPT_BYTES", budget)
    for i in range(1, 200):
        transcript.record("a", float(i), body)
    assert transcript.size <= budget and transcript.count == 200
    assert transcript.dropped == 200 - len(transcript.steps) and transcript.dropped > 100
    numbers = [n for n, _, _ in transcript.since(0)]
    assert numbers == list(range(transcript.dropped, 200))
    assert transcript.first.startswith(b'{"observation":"start"')
