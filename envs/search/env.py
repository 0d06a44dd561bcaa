"""Search-v0: Search-R1's protocol (think, search, read, answer) over a real retriever.

Each turn the model writes free text; the first `<search>query</search>` or
`<answer>...</answer>` in it is the action. A search returns the top passages inside
`<information>...</information>`, rendered as Search-R1's trainer renders them. After
`max_turns` searches one final turn remains in which searching returns nothing, so the model
must answer. `info["env_spans"]` marks which characters of `env.rollout_text` the environment
wrote, so a trainer can mask them out of the loss.

Questions are split into train and test by question text (`agentrl.search.splits`); `info` names
the task by an opaque `task_id` and never carries gold answers or evidence unless the operator built
the env with `privileged_info=True` (for an oracle, SFT export or debugging).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from agentrl.core import StepResult, TextEnv
from agentrl.core.encoding import utf8_safe
from agentrl.core.trajectory import call_record
from agentrl.retrievers import Hit, Retriever
from agentrl.retrievers.datasets import Question
from agentrl.search.reward import answer_reward, exact_match, f1_score
from agentrl.search.sources import get_retriever, load_source, load_split
from agentrl.search.splits import check_split, task_id

# Search-R1's prompt (its `make_prefix`, "base" template), word for word
PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time "
    "you get new information. After reasoning, if you find you lack some knowledge, you can call a search "
    "engine by "
    "<search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"
)
# Search-R1's reply to a turn with neither action, word for word
INVALID_ACTION = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and "
    "</search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again.\n"
)
ACTION = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)


def render_passages(hits: list[Hit]) -> str:
    """Search-R1's `_passages2string`, byte for byte: `Doc i(Title: <first line>) <rest>`.

    The first line is kept as it is (wiki-18 quotes its titles), because models trained with
    Search-R1 saw it that way."""
    lines = []
    for i, hit in enumerate(hits, 1):
        title, _, text = hit.contents.partition("\n")
        lines.append(f"Doc {i}(Title: {title}) {text}\n")
    return "".join(lines)


def information(hits: list[Hit]) -> str:
    return f"\n\n<information>{render_passages(hits).strip()}</information>\n\n"


class SearchEnv(TextEnv):
    """Answer a question, searching a corpus as often as `max_turns` allows (Search-R1's protocol).

    ## Description
    A question from a QA set (`dataset`: "synthetic" builds a world of `world_passages` passages from
    `world_seed`, "wiki" brings its corpus; `qa_path` reads one, searched in your own index) is
    answered by searching a retriever (BM25 or dense, in process, from `index_dir`, or at
    `retrieval_url`). Questions are split into train and test by
    their text (`agentrl.search.splits`).

    ## Action Space
    Free text (`TextSpace`, at most `max_action_chars`): the first `<search>query</search>` or
    `<answer>...</answer>` in it is the action. A turn with neither gets Search-R1's invalid-action
    reply.

    ## Observation Space
    Text (`TextSpace`, clipped to `max_observation_chars`): first Search-R1's prompt with the question;
    after a search, the top `topk` passages inside `<information>...</information>`, rendered as
    Search-R1's trainer renders them (a failed search says so there). `info["env_spans"]` marks which
    characters of `env.rollout_text` the env wrote, so a trainer can mask them out of the loss.

    ## Rewards
    At the answer: 1.0 for an exact match with any gold answer after Search-R1's normalisation
    (`reward="f1"`: token F1), `format_score` for a wrong but well-formed answer; 0.0 when the episode
    ends with no answer.

    ## Starting State
    The prompt with a question drawn from `split` by the seed, or chosen by
    `reset(options={"question_index": i})`, or given as `{"question": ..., "answers": [...]}`.
    `info` names the task by an opaque `task_id`; gold answers and evidence only with
    `privileged_info=True`.

    ## Episode End
    - Termination: an answer.
    - Truncation: after `max_turns` searches and one final turn, in which a search returns nothing, so
      the model must answer; reward 0.

    ## Arguments
    `dataset` ("synthetic"), `qa_path`, `index_dir`, `retrieval_url`, `backend` ("bm25"), `retriever`
    (one already built), `topk` (3), `max_turns` (4 searches), `reward` ("em" | "f1"),
    `format_score` (0.0), `world_seed` (0), `world_passages` (10,000), `split` ("train"),
    `privileged_info` (False), `max_action_chars` (16,384), `max_observation_chars` (65,536),
    `render_mode`.
    """

    default_max_turns: ClassVar[int] = 4
    operator_kwargs = frozenset({"qa_path", "index_dir", "retrieval_url", "retriever", "privileged_info"})
    # a fork copies the episode's few fields and shares the corpus, its retriever and the question set
    fork_by_copy = True
    fork_shared = frozenset({"retriever", "questions", "question", "_source"})

    def __init__(
        self,
        *,
        dataset: str = "synthetic",
        qa_path: str | None = None,
        index_dir: str | None = None,
        retrieval_url: str | None = None,
        backend: str = "bm25",
        topk: int = 3,
        max_turns: int | None = None,
        reward: str = "em",
        format_score: float = 0.0,
        world_seed: int = 0,
        world_passages: int = 10_000,
        split: str = "train",
        privileged_info: bool = False,
        retriever: Retriever | None = None,
        render_mode: str | None = None,
        max_action_chars: int = 16_384,
        max_observation_chars: int = 65_536,
    ) -> None:
        searches = max_turns if max_turns is not None else self.default_max_turns
        super().__init__(
            max_turns=searches + 1,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
            max_observation_chars=max_observation_chars,
        )
        if reward not in ("em", "f1"):
            raise ValueError("reward must be 'em' or 'f1'")
        if topk < 1:
            raise ValueError("topk must be at least 1")
        self.max_searches = searches
        self.topk = topk
        self.reward_metric = reward
        self.format_score = format_score
        self.split = check_split(split)
        self.privileged_info = privileged_info
        self.dataset = dataset
        self._source: dict[str, Any] = {
            "world_seed": world_seed,
            "world_passages": world_passages,
            "qa_path": qa_path,
        }
        self.source_key = f"qa:{qa_path}" if qa_path else f"{dataset}:{world_seed}:{world_passages}"
        _, rows = load_source(dataset, **self._source)
        self.questions = self.split_questions(self.split)
        if not self.questions:
            raise ValueError(f"the {self.split} split of the QA set is empty")
        self.retriever = retriever or get_retriever(
            rows, backend=backend, index_dir=index_dir, retrieval_url=retrieval_url
        )
        self.question: Question | None = None
        self.rollout_text = ""
        self.env_spans: list[tuple[int, int]] = []

    def split_questions(self, split: str) -> list[Question]:
        """The questions of `split` ("train" or "test") in this env's QA set."""
        return load_split(self.dataset, check_split(split), **self._source)

    def _begin(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        split = check_split(options.get("split", self.split))
        if "question" in options:
            answers = options.get("answers") or options.get("golden_answers") or []
            self.question = Question(
                "custom", utf8_safe(str(options["question"])), tuple(utf8_safe(str(a)) for a in answers)
            )
        else:
            questions = self.split_questions(split)
            index = options.get("question_index")
            if index is None:
                index = int(self.np_random.integers(len(questions)))
            self.question = questions[int(index) % len(questions)]
        self.rollout_text = ""
        self.env_spans = []
        self.searches = 0
        self.shown_passages: set[str] = set()
        info: dict[str, Any] = {
            "task_id": task_id(self.source_key, self.question),
            "split": split,
            "question": self.question.question,
            "max_searches": self.max_searches,
            "env_spans": [],
        }
        if self.privileged_info:
            info["privileged"] = self._privileged()
        return PROMPT.format(question=self.question.question), info

    def _privileged(self) -> dict[str, Any]:
        """What only an operator may see: the answers and the passages (in hop order) that hold them."""
        assert self.question is not None
        return {
            "question_id": self.question.id,
            "answers": list(self.question.answers),
            "evidence": list(self.question.evidence),
            "hops": self.question.hops,
        }

    def _state(self) -> Any:
        """The question and the set of passages shown: what the next answer can draw on."""
        question = self.question.question if self.question else None
        return {"question": question, "passages": self.shown_passages}

    def _record(self, action: str, observation: str) -> None:
        self.rollout_text += action
        if observation:
            self.env_spans.append((len(self.rollout_text), len(self.rollout_text) + len(observation)))
            self.rollout_text += observation

    def _act(self, action: str) -> StepResult:
        assert self.question is not None
        golds = self.question.answers
        action = utf8_safe(action)  # the query and the answer go on as text any encoder accepts
        match = ACTION.search(action)
        kind = match.group(1) if match else "invalid"
        content = match.group(2).strip() if match else ""
        info: dict[str, Any] = {"action": kind}
        if kind == "answer":
            reward = answer_reward(content, golds, self.reward_metric, self.format_score)
            info.update(answer=content, em=exact_match(content, golds), f1=f1_score(content, golds))
            result = StepResult("", reward, True, False, info)
            self._step_calls.append(call_record("answer", {"answer": content}, True, ""))
        elif kind == "search":
            info["query"] = content
            if self.turn > self.max_searches:  # the final turn: no more searching
                hits: list[Hit] = []
            else:
                self.searches += 1
                try:
                    hits = self.retriever.search([content], self.topk)[0]
                except Exception as exc:  # a retriever outage is reported to the model, not raised
                    info["search_error"] = f"{type(exc).__name__}: {exc}"
                    hits = []
            info["retrieved_ids"] = [h.id for h in hits]
            self.shown_passages.update(info["retrieved_ids"])
            observation = information(hits)
            if "search_error" in info:
                observation = f"\n\n<information>Search failed ({info['search_error']}).</information>\n\n"
            result = StepResult(observation, 0.0, False, False, info)
            # a search on the final turn is not run: the call failed, and says so by its empty result
            ran = self.turn <= self.max_searches and "search_error" not in info
            self._step_calls.append(call_record("search", {"query": content}, ran, observation))
        else:
            result = StepResult(INVALID_ACTION, 0.0, False, False, info)
        if self.privileged_info and (result.terminated or self.turn >= self.max_turns):
            info["privileged"] = self._privileged()
        self._record(action, result.observation)
        info["env_spans"] = [list(span) for span in self.env_spans]
        info["searches"] = self.searches
        return result
