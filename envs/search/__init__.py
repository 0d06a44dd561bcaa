"""Search-v0: Search-R1's protocol over real retrievers."""

from agentrl.search.reward import answer_reward, exact_match, f1_score, normalize_answer

__all__ = ["answer_reward", "exact_match", "f1_score", "normalize_answer"]
