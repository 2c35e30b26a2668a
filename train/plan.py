"""`train/grpo.py --plan`: what a recipe asks of each GPU, printed without loading the model.

    python train/grpo.py --config configs/grpo/qwen3-8b-8gpu-zero3.yaml \\
        --plan --plan_accelerate configs/accelerate/zero3.yaml [--plan_gpu_gib 141]

From the recipe (GRPOConfig + ModelConfig + ours), the accelerate configuration (processes,
DeepSpeed ZeRO stage / FSDP; under `accelerate launch` its environment is read instead) and the
model's shape (its `config.json`: a local folder, the Hugging Face cache, or the table below for the
recipes' hub models, so no download is needed), it prints per GPU: weights, gradients, optimizer
state, activations of one micro-batch, the colocated vLLM engine's share and the KV cache it
leaves at `vllm_gpu_memory_utilization`; the effective batch and generations per step; and a
warning when the KV cache cannot hold one generation batch's worst-case tokens (vLLM then runs the
batch in waves, preempting and recomputing sequences) or the total does not fit the GPU.

These are estimates from the standard byte counts (bf16 weights 2 B/param; AdamW two states;
DeepSpeed keeps fp32 master weights and states: 12 B/param, sharded by ZeRO; FSDP2 under
accelerate's bf16 mixed precision keeps fp32 parameters, gradients and states: 16 B/param,
sharded; activations ~34 bytes x hidden per token per layer in bf16, one layer's worth plus the
layer inputs with gradient checkpointing; completion logits over the full vocabulary in bf16 plus
one sequence's fp32 log-softmax). Worst-case
tokens assume every completion runs to `max_completion_length` after a prompt of
`--plan_prompt_tokens` (default 2048; TRL 1.16 does not truncate prompts). Compare with
`benchmarks/gpu_check`, which reports `torch.cuda.max_memory_allocated` on the lent GPU (transformers
generation there: vLLM does not travel to that machine, so its KV blocks are measured only on a GPU node).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 2**30
PLAN_FLAGS = {"--plan": 0, "--dry-run": 0, "--plan_accelerate": 1, "--plan_gpu_gib": 1, "--plan_prompt_tokens": 1}
# config.json fields of the recipes' hub models (no download needed for the plan)
KNOWN_SHAPES: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-8B": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 12288,
                      "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
                      "head_dim": 128, "tie_word_embeddings": False, "model_type": "qwen3"},
}
VLLM_OVERHEAD_GIB = 1.5  # vLLM's activations, sampler and CUDA graphs beside weights and KV (eager: less)
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "auto": 2, None: 4}


@dataclass
class PlanOptions:
    accelerate: str | None = None
    gpu_gib: float = 80.0
    prompt_tokens: int = 2048


def split_plan_args(argv: list[str]) -> tuple[PlanOptions | None, list[str]]:
    """(plan options or None when --plan/--dry-run is absent, the rest of argv for the parser)."""
    rest: list[str] = []
    opts = PlanOptions()
    asked = False
    i = 0
    while i < len(argv):
        a = argv[i]
        name, eq, val = a.partition("=")
        if name in PLAN_FLAGS:
            if PLAN_FLAGS[name] == 0:
                asked = True
            else:
                if not eq:
                    i += 1
                    val = argv[i] if i < len(argv) else ""
                if name == "--plan_accelerate":
                    opts.accelerate = val
                elif name == "--plan_gpu_gib":
                    opts.gpu_gib = float(val)
                else:
                    opts.prompt_tokens = int(val)
        else:
            rest.append(a)
        i += 1
    if asked:  # a plan is made anywhere: transformers refuses `bf16: true` without a GPU, and the plan's
        rest += ["--bf16", "false"]  # byte counts come from the model dtype, not from this switch
    return (opts if asked else None), rest


@dataclass
class Shape:
    vocab: int
    hidden: int
    inter: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool
    qk_norm: bool = False  # Qwen3 normalises queries and keys per head (2 x head_dim weights a layer)

    @classmethod
    def from_config(cls, c: dict[str, Any]) -> Shape:
        heads = c["num_attention_heads"]
        return cls(c["vocab_size"], c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], heads,
                   c.get("num_key_value_heads") or heads, c.get("head_dim") or c["hidden_size"] // heads,
                   bool(c.get("tie_word_embeddings", False)), str(c.get("model_type", "")).startswith("qwen3"))

    def linear_dims(self) -> dict[str, tuple[int, int]]:
        h, q, kv, i = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim, self.inter
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    @property
    def params(self) -> int:
        layer = sum(a * b for a, b in self.linear_dims().values()) + 2 * self.hidden + 2 * self.head_dim * self.qk_norm
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.layers * layer + self.hidden

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


def model_shape(name: str) -> tuple[Shape | None, str]:
    """The model's shape from its config.json without loading weights: (shape, where it came from)."""
    p = Path(name)
    if (p / "config.json").is_file():
        return Shape.from_config(json.loads((p / "config.json").read_text())), f"{p / 'config.json'}"
    if name in KNOWN_SHAPES:
        return Shape.from_config(KNOWN_SHAPES[name]), "built-in table (the model's config.json)"
    try:
        from transformers import AutoConfig

        return Shape.from_config(AutoConfig.from_pretrained(name, local_files_only=True).to_dict()), "HF cache"
    except Exception as e:  # noqa: BLE001 - any failure means: shape unknown, said in the plan
        return None, f"unknown ({type(e).__name__}: no config.json at {name} and not in the HF cache)"


@dataclass
class Launch:
    processes: int
    strategy: str  # "single", "ddp", "zero2", "zero3", "fsdp"
    source: str


def launch_setup(path: str | None) -> Launch:
    """Processes and sharding from an accelerate config YAML, else from `accelerate launch`'s
    environment, else one process."""
    if path:
        import yaml

        c = yaml.safe_load(Path(path).read_text()) or {}
        n = int(c.get("num_processes") or 1)
        kind = c.get("distributed_type", "NO")
        if kind == "DEEPSPEED":
            strategy = f"zero{int((c.get('deepspeed_config') or {}).get('zero_stage', 0))}"
        elif kind == "FSDP":
            strategy = "fsdp"
        else:
            strategy = "ddp" if n > 1 else "single"
        return Launch(n, strategy, path)
    n = int(os.environ.get("WORLD_SIZE", "1"))
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        return Launch(n, f"zero{os.environ.get('ACCELERATE_DEEPSPEED_ZERO_STAGE', '2')}", "accelerate environment")
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return Launch(n, "fsdp", "accelerate environment")
    return Launch(n, "ddp" if n > 1 else "single", "accelerate environment" if n > 1 else "no accelerate config")


def lora_params(shape: Shape, model: Any, script: Any) -> int:
    targets = model.lora_target_modules or []
    dims = shape.linear_dims()
    names = list(dims) if (isinstance(targets, str) or "all-linear" in targets) else [t for t in targets if t in dims]
    layers = min(script.lora_layers, shape.layers) if script.lora_layers else shape.layers
    return layers * sum(model.lora_r * (dims[n][0] + dims[n][1]) for n in names)


def state_bytes(shape: Shape, model: Any, script: Any, launch: Launch) -> tuple[int, float, float, float]:
    """(trainable parameters, bytes per GPU of weights, gradients, optimizer state with fp32 masters) of a run
    under `launch` (GRPO's plan and the supervised stage's, train/sft_plan.py)."""
    n = launch.processes
    wb = DTYPE_BYTES.get(model.dtype, 2)
    P = shape.params
    shard = n if launch.strategy in ("zero3", "fsdp") else 1
    states_shard = n if launch.strategy in ("zero2", "zero3", "fsdp") else 1
    if model.use_peft:
        T = lora_params(shape, model, script)
        grads, optim = T * 4, T * 8 + T * 4  # peft keeps adapters in fp32 beside a bf16 base
    elif launch.strategy.startswith("zero"):
        T = P
        grads, optim = T * 2 / states_shard, T * 12 / states_shard
    elif launch.strategy == "fsdp":
        T = P
        grads, optim = T * 4 / n, T * 8 / n  # fp32 gradients and AdamW states; fp32 params below
        wb = 4
    else:
        T = P
        grads, optim = T * wb, T * 2 * wb
    return T, P * wb / shard, grads, optim


def plan(script: Any, training: Any, model: Any, opts: PlanOptions) -> dict[str, Any]:
    """The numbers `--plan` prints (bytes per GPU, batch arithmetic, warnings)."""
    launch = launch_setup(opts.accelerate)
    n = launch.processes
    spg = training.steps_per_generation or training.gradient_accumulation_steps
    gen_batch = training.per_device_train_batch_size * n * spg
    out: dict[str, Any] = {
        "launch": launch, "gen_batch": gen_batch, "prompts": gen_batch / training.num_generations,
        "steps_per_generation": spg,
        "per_update": training.per_device_train_batch_size * n * training.gradient_accumulation_steps,
        "warnings": [],
    }
    if gen_batch % training.num_generations:
        out["warnings"].append(f"num_generations={training.num_generations} does not divide the generation batch "
                               f"{gen_batch}: TRL refuses this run (see docs/training.md, batch arithmetic)")
    if str(training.save_strategy) not in ("no", "SaveStrategy.NO") and training.save_total_limit == 1:
        out["warnings"].append("save_total_limit=1: transformers deletes the previous checkpoint before the new one "
                               "is marked complete; a kill in that window leaves nothing to resume from (use >= 2)")
    shape, where = model_shape(model.model_name_or_path)
    out["shape"], out["shape_source"] = shape, where
    if shape is None:
        return out
    P = shape.params
    T, weights, grads, optim = state_bytes(shape, model, script, launch)
    seq = opts.prompt_tokens + training.max_completion_length
    micro_tokens = training.per_device_train_batch_size * seq
    per_layer = 34 * shape.hidden  # ~34 x hidden bytes per token per layer (bf16, flash attention)
    if training.gradient_checkpointing:
        acts = micro_tokens * (shape.layers * shape.hidden * 2 + per_layer)
    else:
        acts = micro_tokens * shape.layers * per_layer
    # completion logits in bf16 for the micro-batch, and one sequence's fp32 log-softmax at a time (TRL's
    # selective_log_softmax goes row by row for 16-bit logits)
    logits = training.per_device_train_batch_size * training.max_completion_length * shape.vocab * 2 + \
        training.max_completion_length * shape.vocab * 4
    train_total = weights + grads + optim + acts + logits
    out.update(params=P, trainable=T, weights=weights, grads=grads, optim=optim, acts=acts, logits=logits,
               train_total=train_total, seq=seq)
    gpu = opts.gpu_gib * GIB
    kv_tok = shape.kv_bytes_per_token()
    if training.use_vllm and training.vllm_mode == "colocate":
        tp = training.vllm_tensor_parallel_size
        vllm_share = training.vllm_gpu_memory_utilization * gpu
        kv = vllm_share - P * 2 / tp - VLLM_OVERHEAD_GIB * GIB
        seqs = training.per_device_train_batch_size * spg * tp  # a TP group generates its ranks' prompts together
        need = seqs * seq * kv_tok / tp
        out.update(vllm_share=vllm_share, kv=kv, kv_tokens=kv / (kv_tok / tp), step_tokens=seqs * seq,
                   kv_need=need, sleep=training.vllm_enable_sleep_mode)
        resident = weights + grads + optim  # what stays while vLLM generates
        peak = max(train_total, resident + vllm_share) if training.vllm_enable_sleep_mode else train_total + vllm_share
        out["peak"] = peak
        if kv <= 0:
            out["warnings"].append(f"vllm_gpu_memory_utilization={training.vllm_gpu_memory_utilization} of "
                                   f"{opts.gpu_gib:g} GiB leaves no room for a KV cache beside the weights")
        elif kv < need:
            out["warnings"].append(
                f"the KV cache ({kv / GIB:.1f} GiB, {kv / (kv_tok / tp):,.0f} tokens) cannot hold one generation "
                f"batch ({seqs} sequences x {seq} tokens = {seqs * seq:,} tokens, {need / GIB:.1f} GiB): vLLM will "
                "run it in waves (preempting). Raise vllm_gpu_memory_utilization, lower per_device_train_batch_size"
                " x steps_per_generation or max_completion_length")
    else:
        out["peak"] = train_total
        if training.use_vllm:  # server: the KV cache lives on the vLLM server's GPUs
            kv = 0.9 * gpu - P * 2 - VLLM_OVERHEAD_GIB * GIB
            need = gen_batch * seq * kv_tok
            out.update(server_kv=kv, server_kv_tokens=kv / kv_tok, server_need=need, step_tokens=gen_batch * seq)
            if kv < need:
                out["warnings"].append(
                    f"one vLLM server GPU at --gpu_memory_utilization 0.9 holds {kv / kv_tok:,.0f} KV tokens; one "
                    f"generation batch needs {gen_batch * seq:,} ({need / GIB:.1f} GiB): run the server with "
                    f"--tensor_parallel_size / --data_parallel_size >= {math.ceil(need / max(kv, 1))}, or it works "
                    "in waves")
    if out["peak"] > gpu:
        out["warnings"].append(f"estimated peak {out['peak'] / GIB:.1f} GiB per GPU exceeds the {opts.gpu_gib:g} GiB "
                               "GPU (--plan_gpu_gib): shard more (ZeRO-3/FSDP), use LoRA, gradient checkpointing, "
                               "or smaller batches")
    return out


def _g(x: float) -> str:
    return f"{x / GIB:8.2f} GiB"


def render(p: dict[str, Any], training: Any, model: Any, opts: PlanOptions) -> str:
    L = p["launch"]
    lines = [f"# plan: {model.model_name_or_path}, {L.processes} process(es), {L.strategy} ({L.source}); "
             f"GPU {opts.gpu_gib:g} GiB",
             f"generation batch: {training.per_device_train_batch_size} per device x {L.processes} process(es) x "
             f"{p['steps_per_generation']} steps_per_generation = {p['gen_batch']} completions = "
             f"{p['prompts']:g} prompts x {training.num_generations} generations",
             f"per optimizer update: {p['per_update']} completions (gradient_accumulation_steps "
             f"{training.gradient_accumulation_steps}); one generation every "
             f"{p['steps_per_generation'] / training.gradient_accumulation_steps:g} update(s)"]
    if p["shape"] is None:
        lines.append(f"model shape: {p['shape_source']}: memory not estimated (build or download the model first)")
    else:
        lines += [f"model: {p['params'] / 1e9:.3f} B parameters ({p['shape_source']}); trainable "
                  f"{p['trainable'] / 1e6:,.1f} M ({'LoRA r=' + str(model.lora_r) if model.use_peft else 'full'})",
                  f"worst-case sequence: {opts.prompt_tokens} prompt + {training.max_completion_length} completion "
                  f"= {p['seq']} tokens",
                  "per GPU (estimate):",
                  f"  weights                 {_g(p['weights'])}",
                  f"  gradients               {_g(p['grads'])}",
                  f"  optimizer (+ masters)   {_g(p['optim'])}",
                  f"  activations (1 micro)   {_g(p['acts'])}  "
                  f"({'checkpointed' if training.gradient_checkpointing else 'no checkpointing'})",
                  f"  log-probs over vocab    {_g(p['logits'])}",
                  f"  training total          {_g(p['train_total'])}"]
        if "vllm_share" in p:
            lines += [f"  vLLM colocate share     {_g(p['vllm_share'])}  (vllm_gpu_memory_utilization "
                      f"{training.vllm_gpu_memory_utilization}, sleep mode {'on' if p['sleep'] else 'off'})",
                      f"  KV cache in that share  {_g(max(p['kv'], 0))}  = {max(p['kv_tokens'], 0):,.0f} tokens "
                      f"(one generation batch on this engine: {p['step_tokens']:,} tokens)"]
        if "server_kv" in p:
            lines.append(f"vLLM server (per server GPU at 0.9, TP 1): KV {_g(max(p['server_kv'], 0))} = "
                         f"{max(p['server_kv_tokens'], 0):,.0f} tokens; one generation batch: {p['step_tokens']:,} "
                         "tokens")
        lines.append(f"  peak                    {_g(p['peak'])}")
    lines += [f"WARNING: {w}" for w in p["warnings"]]
    return "\n".join(lines)


def print_plan(script: Any, training: Any, model: Any, opts: PlanOptions) -> int:
    print(render(plan(script, training, model, opts), training, model, opts))
    return 0
