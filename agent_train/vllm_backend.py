"""vLLM generation (GPU, optional `[vllm]` extra) with in-process weight updates.

The engine runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`) so new weights pass as
tensors, not files: a worker extension's `load_weights` copies them into the running model,
then the prefix cache is reset, since cached KV blocks were computed by the old weights.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentrl.agent_train.backends import BatchingBackend, Generation, turn_end_ids


class WeightUpdateExtension:
    """Mixed into vLLM's GPU worker (`worker_extension_cls`); called through `collective_rpc`."""

    def agentrl_load_weights(self, named_tensors: list[tuple[str, Any]]) -> int:
        model = self.model_runner.model  # type: ignore[attr-defined]  # vLLM's worker, mixed into, has it
        model.load_weights(weights=named_tensors)
        return len(named_tensors)


class VLLMBackend(BatchingBackend):
    def __init__(
        self,
        model_path: str | Path,
        tokenizer: Any,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        gpu_memory_utilization: float = 0.35,
        max_model_len: int = 4096,
        max_batch: int = 256,
        dtype: str = "bfloat16",
    ) -> None:
        super().__init__(max_batch=max_batch)
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM, SamplingParams  # pyright: ignore[reportMissingImports]  # optional, not installed here

        kwargs: dict[str, Any] = dict(
            model=str(model_path),
            tokenizer=str(model_path),
            dtype=dtype,
            enable_prefix_caching=True,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            worker_extension_cls=f"{__name__}.WeightUpdateExtension",
        )
        try:  # logprobs of the distribution actually sampled from (after temperature and top-p)
            self.llm = LLM(**kwargs, logprobs_mode="processed_logprobs")
        except TypeError as exc:
            if "logprobs_mode" not in str(exc):
                raise
            if temperature != 1.0 or top_p < 1.0:
                raise RuntimeError(
                    "this vLLM has no logprobs_mode='processed_logprobs' (added in vLLM 0.10.2): it would "
                    f"return logprobs of the raw logits, not of the distribution sampled at temperature "
                    f"{temperature} and top_p {top_p}, so every importance ratio would be wrong; upgrade "
                    "vLLM or sample at temperature 1.0 and top_p 1.0"
                ) from exc
            # at temperature 1 and top_p 1 the raw logprobs are those of the sampled distribution
            self.llm = LLM(**kwargs)
        self._params = SamplingParams
        self.temperature, self.top_p = temperature, top_p
        self.stop_ids = turn_end_ids(tokenizer)

    @classmethod
    def from_policy(cls, policy: Any, tokenizer: Any, folder: Path, **kwargs: Any) -> VLLMBackend:
        """vLLM loads from disk once; later updates go in-process."""
        folder.mkdir(parents=True, exist_ok=True)
        policy.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        return cls(folder, tokenizer, **kwargs)

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        with self._weights_lock:
            named = [(k, v.detach()) for k, v in state_dict.items()]
            self.llm.collective_rpc("agentrl_load_weights", args=(named,))
            self.llm.reset_prefix_cache()
            self.version = version

    def generate_batch(
        self, prompts: list[list[int]], max_new: list[int], seeds: list[int]
    ) -> list[Generation]:
        from vllm.inputs import TokensPrompt  # pyright: ignore[reportMissingImports]  # as above

        params = [
            self._params(
                temperature=self.temperature,
                top_p=self.top_p,
                max_tokens=m,
                logprobs=0,
                stop_token_ids=self.stop_ids,
                seed=seed,
            )
            for m, seed in zip(max_new, seeds, strict=True)
        ]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        result = []
        for out in outs:
            c = out.outputs[0]
            ids = list(c.token_ids)
            lps = [float(step[tok].logprob) for tok, step in zip(ids, c.logprobs or [], strict=False)]
            result.append(Generation(ids, lps, self.version, c.finish_reason == "stop"))
        return result
