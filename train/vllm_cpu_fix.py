"""CPU-only fix that lets TRL push trained weights into a colocated vLLM-CPU engine.

Why: vLLM's CPU backend repacks every linear weight after loading
(`vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm`: oneDNN / sgl-kernel packed
copies) and replaces `layer.weight` with an empty placeholder `Parameter` that has no
`weight_loader`. TRL's colocate weight sync calls `model.load_weights(...)` every step, which
then fails with `'Parameter' object has no attribute 'weight_loader'` (and even if it did not,
the packed copy would keep serving the old weights).

The fix: make that dispatch keep the plain weights and compute with
`torch.nn.functional.linear`, so the weights vLLM uses ARE the parameters TRL overwrites.
Generation on the tiny CPU model is a little slower than with packed kernels; correctness of
the sync (checked in tests/integration/test_train_grpo.py) matters more here.

This module is the only place in the project that patches vLLM. It is applied only when the
installed vLLM is the CPU build (`vllm-cpu`) and the run uses `vllm_mode="colocate"`; on GPU
nodes nothing is patched. It must run before the engine is created (before `GRPOTrainer(...)`).
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version


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
    """Replacement dispatch: no repacking, keep `layer.weight`, use F.linear."""
    import torch

    layer.cpu_linear = torch.nn.functional.linear


def apply_vllm_cpu_fix(dtype: str | None = None) -> bool:
    """Patch vLLM-CPU's linear dispatch to keep plain weights; returns True when it patched.

    Idempotent. Does nothing (returns False) when vLLM is not the CPU build. Also sets
    `VLLM_CPU_KVCACHE_SPACE=1` (GiB) unless set: the default memory fraction fails on small VMs.
    `dtype` ("bfloat16" / "float32"): the dtype TRL's colocated engine computes in. TRL passes none,
    and vLLM-CPU turns `auto` into bf16 on every x86 CPU, emulated (~4x slower decode) on CPUs
    without native bf16; `proofcheck.precision` decides, this makes TRL's engine follow.
    """
    if not vllm_is_cpu_build():
        return False
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm.model_executor.layers import utils as layer_utils

    layer_utils.dispatch_cpu_unquantized_gemm = _keep_plain_weights
    if dtype is not None:
        _pin_colocated_dtype(dtype)
    return True


def _pin_colocated_dtype(dtype: str) -> None:
    """Make TRL's colocated `LLM(...)` (trl.generation.vllm_generation, TRL 1.16) pass `dtype`."""
    import functools

    from trl.generation import vllm_generation

    base = getattr(vllm_generation.LLM, "func", vllm_generation.LLM)  # idempotent: unwrap an earlier pin
    vllm_generation.LLM = functools.partial(base, dtype=dtype)
