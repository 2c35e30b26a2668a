"""`train/supervised.py --plan`: what a supervised recipe asks of each GPU, printed without loading the model.

    proofcheck train --config qwen3-8b-sft-8gpu-zero3 --accelerate-config zero3 --plan

The same byte counts as GRPO's plan (`train/plan.py`: weights, gradients, optimizer state and fp32 masters by
strategy, sharded by ZeRO / FSDP; activations ~34 x hidden bytes per token per layer, one layer's worth plus the
layer inputs under gradient checkpointing) for one micro-batch of `per_device_train_batch_size` rows of
`max_length` tokens (TRL truncates longer rows), and the LM head's log-probabilities: TRL's fused head works
through the vocabulary in tiles (4096 tokens x 32768 columns), so it holds one tile, never the whole batch's
logits. No vLLM.
"""

from __future__ import annotations

from typing import Any

from proofcheck.train.plan import GIB, PlanOptions, _g, launch_setup, model_shape, state_bytes

# TRL 1.16's chunked log-prob head projects tiles of 4096 tokens x 32768 vocabulary columns
# (trl.kernels.chunked_logprob.TOKEN_CHUNK_SIZE, trl.trainer.utils._CHUNKED_LOGPROB_CHUNK_SIZE)
HEAD_TILE = (4096, 32768)


def sft_plan(script: Any, training: Any, model: Any, opts: PlanOptions) -> dict[str, Any]:
    """The numbers the plan prints (bytes per GPU, batch arithmetic, warnings)."""
    launch = launch_setup(opts.accelerate)
    n = launch.processes
    per_update = training.per_device_train_batch_size * n * training.gradient_accumulation_steps
    out: dict[str, Any] = {"launch": launch, "per_update": per_update, "warnings": []}
    if training.max_length is None:
        out["warnings"].append("max_length is unset: rows are never truncated, and the longest row sets the "
                               "activations; set max_length (e.g. 4096) to bound them")
    shape, where = model_shape(model.model_name_or_path)
    out["shape"], out["shape_source"] = shape, where
    if shape is None:
        return out
    P = shape.params
    T, weights, grads, optim = state_bytes(shape, model, script, launch)
    seq = training.max_length or opts.prompt_tokens
    tokens = training.per_device_train_batch_size * seq
    per_layer = 34 * shape.hidden
    acts = tokens * (shape.layers * shape.hidden * 2 + per_layer) if training.gradient_checkpointing else \
        tokens * shape.layers * per_layer
    head = min(tokens, HEAD_TILE[0]) * min(shape.vocab, HEAD_TILE[1]) * 4 * 2  # one fp32 tile, forward and backward
    total = weights + grads + optim + acts + head
    out.update(params=P, trainable=T, weights=weights, grads=grads, optim=optim, acts=acts, head=head, peak=total,
               seq=seq)
    if total > opts.gpu_gib * GIB:
        out["warnings"].append(f"estimated peak {total / GIB:.1f} GiB per GPU exceeds the {opts.gpu_gib:g} GiB GPU "
                               "(--plan_gpu_gib): shard more (ZeRO-3/FSDP), use LoRA, gradient checkpointing, a "
                               "smaller per_device_train_batch_size or max_length")
    return out


def render(p: dict[str, Any], training: Any, model: Any, opts: PlanOptions) -> str:
    L = p["launch"]
    lines = [f"# supervised plan: {model.model_name_or_path}, {L.processes} process(es), {L.strategy} ({L.source}); "
             f"GPU {opts.gpu_gib:g} GiB",
             f"rows per optimizer update: {training.per_device_train_batch_size} per device x {L.processes} "
             f"process(es) x {training.gradient_accumulation_steps} gradient_accumulation_steps = {p['per_update']}"]
    if p["shape"] is None:
        lines.append(f"model shape: {p['shape_source']}: memory not estimated (build or download the model first)")
    else:
        lines += [f"model: {p['params'] / 1e9:.3f} B parameters ({p['shape_source']}); trainable "
                  f"{p['trainable'] / 1e6:,.1f} M ({'LoRA r=' + str(model.lora_r) if model.use_peft else 'full'})",
                  f"longest row: {p['seq']} tokens (max_length{'' if training.max_length else ' unset: --plan_prompt_tokens'})",
                  "per GPU (estimate):",
                  f"  weights                 {_g(p['weights'])}",
                  f"  gradients               {_g(p['grads'])}",
                  f"  optimizer (+ masters)   {_g(p['optim'])}",
                  f"  activations (1 micro)   {_g(p['acts'])}  "
                  f"({'checkpointed' if training.gradient_checkpointing else 'no checkpointing'})",
                  f"  LM head (one tile)      {_g(p['head'])}",
                  f"  peak                    {_g(p['peak'])}"]
    lines += [f"WARNING: {w}" for w in p["warnings"]]
    return "\n".join(lines)


def print_sft_plan(script: Any, training: Any, model: Any, opts: PlanOptions) -> int:
    print(render(sft_plan(script, training, model, opts), training, model, opts))
    return 0
