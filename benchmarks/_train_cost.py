"""What one training pass costs per token, SFT against GRPO, and where GRPO's time goes (`train_real.py --profile`).

In one process, on one model folder, one LoRA layout (the recipe's r / alpha / `lora_layers`), one compute
dtype (bf16 autocast where native, `proofcheck.precision`) and the same synthetic tasks:
- SFT: the warm-up's step as the former hand loop ran it (`_sft_hand.py`, the baseline of `sft_trainer.py`:
  vocabulary projection at the answer positions only, AdamW) on a batch of 8 tasks as its length-sorted batching draws them;
- GRPO: TRL's training pass on one generation batch (`compute_loss` under the trainer's autocast, backward,
  the trainer's optimizer step), 16 completions = 4 prompts x 4 generations, the prompts as the recipe
  renders them, each completion the task's gold verification repeated to a drawn length (seeded: 40-160
  tokens, 2 of 16 at max_completion_length), right-padded, prompts left-padded, as TRL batches them.
  Content does not change the cost; lengths and padding do. Every log-probability path runs on the same
  batch: TRL's fused LM head (`completion_logits: false`) and `train/logprobs.py` (`true`), with every
  row's prompt forwarded (`completion_logits_shared_prompt: false`) and with a group's prompt once.

Each pass is timed (median of `reps` after a warm-up) and counted: real tokens (prompt + completion, what
TRL's `num_tokens` counts), padded positions, loss tokens. One more pass of each GRPO path runs under
torch.profiler; its ops are grouped (`PARTS`) by self CPU time.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

GRPO_PATHS = ("trl", "rows", "completion_logits")  # TRL's head; ours, every row's prompt; ours, a prompt once
VOCAB_RANGES = ("ChunkedLogProbFunction", "logprobs: vocab")  # TRL's fused head; train/logprobs.py's range
PARTS = ("forward: vocab projection + log-softmax", "forward: attention", "forward: rest of the model",
         "entropy (no grad)", "backward: vocab (TRL recomputes the projection)", "backward: attention",
         "backward: rest of the model", "optimizer", "other")


def grpo_trainer(model: Path, recipe: Path, work: Path) -> Any:
    """The recipe's trainer (our GRPOTrainer subclass, its LoRA layout and dtype) without vLLM or evaluation."""
    from proofcheck.app.launch import SyntheticTasks, grpo_args
    from proofcheck.train.args import parse
    from proofcheck.train.run import build_trainer

    script, training, model_args = parse(grpo_args(
        recipe, model, work / "grpo-cost", SyntheticTasks(64),
        {"use_vllm": False, "uncertainty_pool": 0, "eval_max_samples": 0, "report_to": "none"}))
    trainer = build_trainer(script, training, model_args)[0]
    trainer.create_optimizer_and_scheduler(num_training_steps=100)
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop, which this bypasses
    trainer.model.train()
    return trainer


def tasks_and_lengths(n_prompts: int, generations: int, cap: int, seed: int = 0) -> tuple[list[dict], list[int]]:
    """Synthetic tasks (all proof families, half valid) and the drawn completion lengths."""
    from proofcheck.data.synth import balanced_tasks

    rng = random.Random(seed)
    lengths = [rng.randint(40, min(160, cap)) for _ in range(n_prompts * generations)]
    for i in range(0, len(lengths), 8):
        lengths[i + 3] = cap  # some completions run to the cap, as sampled ones do
    return balanced_tasks(max(8, n_prompts), seed=seed + 1000, families="all"), lengths


def grpo_batch(trainer: Any, tasks: list[dict], lengths: list[int], generations: int, style: str) -> dict[str, Any]:
    """A generation batch as TRL's `_generate_and_score_completions` returns it (prompts left-padded,
    completions right-padded and ended by EOS, advantages of mean 0)."""
    import torch

    from proofcheck.protocol import verifier_messages

    tok = trainer.processing_class
    prompts = [tok.apply_chat_template(verifier_messages(t["problem"], t["steps"], None, style),
                                       add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
               for t in tasks[:len(lengths) // generations]]
    golds = [tok(t["gold_verification"])["input_ids"] for t in tasks]
    pad, eos = tok.pad_token_id, trainer.eos_token_ids[0]
    n, width_p, width_c = len(lengths), max(map(len, prompts)), max(lengths)
    out = {k: torch.full((n, w), pad if k.endswith("ids") else 0, dtype=torch.long)
           for k, w in (("prompt_ids", width_p), ("prompt_mask", width_p), ("completion_ids", width_c),
                        ("completion_mask", width_c))}
    for i, length in enumerate(lengths):
        p, g = prompts[i // generations], golds[i // generations]
        out["prompt_ids"][i, width_p - len(p):] = torch.tensor(p)
        out["prompt_mask"][i, width_p - len(p):] = 1
        body = (g * (1 + length // max(1, len(g))))[:length - 1] + [eos]
        out["completion_ids"][i, :length] = torch.tensor(body)
        out["completion_mask"][i, :length] = 1
    # TRL shuffles a generation batch's rows before `compute_loss` (`shuffle_sequence_dict`): a group's rows
    # arrive scattered, and train/logprobs.py puts them back in prompt order; the same shuffle here
    order = torch.randperm(n, generator=torch.Generator().manual_seed(1))
    out = {k: v[order] for k, v in out.items()}
    out["advantages"] = torch.randn(n, generator=torch.Generator().manual_seed(0))
    out["advantages"] -= out["advantages"].mean()
    out["num_items_in_batch"] = out["completion_mask"].sum()
    return out


def grpo_counts(batch: dict[str, Any], generations: int) -> dict[str, int]:
    """Real tokens, padded positions and loss tokens of a GRPO batch, and the positions each path projects
    through the vocabulary (TRL's fused head on CPU: every position; train/logprobs.py: the real completion
    tokens, after a group's forward cut to the group's own width); `shared_prompt_tokens`: the real tokens
    through the layers when a group's prompt is forwarded once (`completion_logits_shared_prompt`)."""
    from proofcheck.train.logprobs import by_prompt

    order = by_prompt(batch["prompt_ids"], batch["prompt_mask"])  # groups contiguous, as train/logprobs.py runs them
    pm, cm = batch["prompt_mask"][order], batch["completion_mask"][order]
    real, positions = int(pm.sum() + cm.sum()), pm.numel() + cm.numel()
    trimmed = sum(int(pm[s:s + generations].any(0).sum()) * min(generations, pm.size(0) - s)
                  + int(cm[s:s + generations].any(0).sum()) * min(generations, pm.size(0) - s)
                  for s in range(0, pm.size(0), generations))
    shared = sum(int(pm[s].sum()) for s in range(0, pm.size(0), generations)) + int(cm.sum())
    return {"real_tokens": real, "padded_positions": positions - real, "loss_tokens": int(cm.sum()),
            "shared_prompt_tokens": shared,
            "trl_vocab_positions": pm.size(0) * (pm.size(1) + cm.size(1) - 1),
            "completion_logits_vocab_positions": int(cm.sum()), "completion_logits_positions": trimmed}


def grpo_pass(trainer: Any, batch: dict[str, Any]) -> float:
    """Seconds of one GRPO training pass: TRL's `compute_loss` (under the trainer's autocast), backward and
    the optimizer step (the weights move: every pass trains)."""
    import torch

    t0 = time.perf_counter()
    with torch.profiler.record_function("forward"), trainer.compute_loss_context_manager():
        loss = trainer.compute_loss(trainer.model, batch)
    with torch.profiler.record_function("backward"):
        loss.backward()
    with torch.profiler.record_function("optimizer"):
        trainer.optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def sft_setup(model: Path, lora_r: int, lora_alpha: int, lora_layers: int | None, bf16: bool, tasks: list[dict],
              style: str) -> tuple[Any, Any, list, int]:
    """The SFT warm-up's model (LoRA of the recipe's layout), its AdamW, one batch of 8 encoded tasks (as its
    length-sorted batching draws them) and the pad id."""
    import torch
    from _sft_hand import length_batches
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from proofcheck.train.config import top_layers
    from proofcheck.train.sft import LORA_MODULES, encode, sft_rows

    tok = AutoTokenizer.from_pretrained(model)
    examples = [encode(tok, r) for r in sft_rows(tasks, style)]
    net = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    layers = top_layers(net.config.num_hidden_layers, lora_layers) if lora_layers else None
    net = get_peft_model(net, LoraConfig(r=lora_r, lora_alpha=lora_alpha, target_modules=LORA_MODULES,
                                         layers_to_transform=layers, lora_dropout=0.0, task_type="CAUSAL_LM"))
    net.train()
    opt = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=1e-4)
    batch = [examples[i] for i in length_batches([len(e[0]) for e in examples], 8, random.Random(0))[0]]
    return net, opt, batch, tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id


def sft_pass(net: Any, opt: Any, batch: list, pad: int, bf16: bool) -> float:
    """Seconds of one SFT step as the former hand loop ran it (`_sft_hand.py`)."""
    import torch
    from _sft_hand import batch_loss as _batch_loss

    t0 = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = _batch_loss(net, batch, pad)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in net.parameters() if p.requires_grad], 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def sft_counts(batch: list) -> dict[str, int]:
    width = max(len(ids) for ids, _ in batch)
    real = sum(len(ids) for ids, _ in batch)
    return {"real_tokens": real, "padded_positions": len(batch) * width - real,
            "loss_tokens": sum(len(ids) - p for ids, p in batch)}


def _part(event: Any) -> str:
    """The `PARTS` entry one profiled op's self time belongs to, from its name and enclosing ranges."""
    names, node = [], event
    while node is not None:
        names.append(node.name)
        node = node.cpu_parent
    chain = " | ".join(names)
    phase = next((p for p in ("optimizer", "backward", "forward") if p in names), None)
    if phase == "optimizer":
        return "optimizer"
    if "logprobs: entropy" in names:
        return "entropy (no grad)"
    vocab = any(r in chain for r in VOCAB_RANGES) or any(49152 in s for s in (event.input_shapes or []) if s)
    attention = "attention" in chain
    if phase == "forward":
        return ("forward: vocab projection + log-softmax" if vocab else
                "forward: attention" if attention else "forward: rest of the model")
    if phase == "backward":
        return ("backward: vocab (TRL recomputes the projection)" if vocab else
                "backward: attention" if attention else "backward: rest of the model")
    return "other"


def profile_parts(fn: Any) -> dict[str, float]:
    """Seconds of self CPU time per `PARTS` entry over one call of `fn` under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    parts = dict.fromkeys(PARTS, 0.0)
    for ev in prof.events():
        parts[_part(ev)] += ev.self_cpu_time_total / 1e6
    return {k: round(v, 3) for k, v in parts.items()}


def model_flops(shape: Any, real_tokens: int, loss_tokens: int, context: float, backprop_layers: int | None,
                weight_grads: bool) -> float:
    """Model FLOPs of one training pass that scores `loss_tokens` of its `real_tokens`: every token through
    the layers (forward; backward through the top `backprop_layers`, `roofline.train_flops_per_token`'s
    rule), the vocabulary projection only where the loss reads it (GRPO's completion tokens, SFT's answer
    tokens): forward 2/weight, activation gradient 2/weight, weight gradient 2/weight more when trained."""
    from roofline import train_flops_per_token

    head = 2 * shape.lm_head_params
    with_head = train_flops_per_token(shape, context, backprop_layers=backprop_layers, weight_grads=weight_grads)
    per_head_token = head * (3 if weight_grads else 2)
    return real_tokens * (with_head - per_head_token) + loss_tokens * per_head_token


def measure(model: Path, recipe: Path, work: Path, reps: int = 3) -> dict[str, Any]:
    """SFT step and both GRPO paths on one model, LoRA layout, dtype and host: seconds (median of `reps`
    rounds, each round one pass of each, so a neighbour's load falls on all three alike), token counts,
    model FLOPs and the profile of each GRPO path."""
    import torch
    import yaml
    from roofline import Shape

    cfg = yaml.safe_load(recipe.read_text()) or {}
    trainer = grpo_trainer(model, recipe, work)
    bf16, style = bool(trainer.args.bf16), cfg.get("prompt_style", "full")
    generations, cap = trainer.num_generations, trainer.max_completion_length
    n_prompts = trainer.args.per_device_train_batch_size // generations
    tasks, lengths = tasks_and_lengths(n_prompts, generations, cap)
    batch = grpo_batch(trainer, tasks, lengths, generations, style)
    net, opt, sft_batch, pad = sft_setup(model, cfg.get("lora_r", 16), cfg.get("lora_alpha", 32),
                                         cfg.get("lora_layers"), bf16, tasks, style)

    def grpo(flag: bool, share_prompt: bool = True) -> float:
        trainer.completion_logits, trainer.share_prompt = flag, share_prompt
        return grpo_pass(trainer, batch)

    passes = {"sft": lambda: sft_pass(net, opt, sft_batch, pad, bf16), "trl": lambda: grpo(False),
              "rows": lambda: grpo(True, share_prompt=False), "completion_logits": lambda: grpo(True)}
    seconds: dict[str, list[float]] = {k: [] for k in passes}
    for fn in passes.values():  # warm-up
        fn()
    for _ in range(reps):
        for k, fn in passes.items():
            seconds[k].append(fn())
    out: dict[str, Any] = {"dtype": "bfloat16" if bf16 else "float32", "threads": torch.get_num_threads(),
                           "completions": len(lengths), "max_completion_length": cap, "prompt_style": style,
                           "lora_layers": cfg.get("lora_layers"), "lora_r": cfg.get("lora_r"), "sft_batch": len(sft_batch),
                           "seconds": {k: round(statistics.median(v), 3) for k, v in seconds.items()},
                           "seconds_all": {k: [round(x, 3) for x in v] for k, v in seconds.items()},
                           "counts": {"sft": sft_counts(sft_batch), "grpo": grpo_counts(batch, generations)},
                           "profile": {k: profile_parts(passes[k]) for k in GRPO_PATHS}}
    shape = Shape.from_config(trainer.model.config)
    peft = bool(cfg.get("use_peft"))
    out["model_flops"] = {}
    for k in passes:
        c = out["counts"]["sft" if k == "sft" else "grpo"]
        rows = len(sft_batch) if k == "sft" else len(lengths)
        # the shared-prompt path computes each group's prompt once: its FLOPs count it once
        tokens = c["shared_prompt_tokens"] if k == "completion_logits" else c["real_tokens"]
        out["model_flops"][k] = model_flops(shape, tokens, c["loss_tokens"], c["real_tokens"] / rows / 2,
                                            cfg.get("lora_layers") if peft else None, not peft)
    per = {k: s / out["counts"]["sft" if k == "sft" else "grpo"]["real_tokens"] for k, s in out["seconds"].items()}
    out["ms_per_real_token"] = {k: round(1e3 * v, 3) for k, v in per.items()}
    out["vs_sft_per_real_token"] = {k: round(per[k] / per["sft"], 3) for k in per}
    return out


def print_cost(cost: dict[str, Any], peak: float, machine: dict[str, Any]) -> None:
    """The per-token table (SFT, both GRPO paths) and the GRPO profile table, before and after."""
    c = cost["counts"]
    print(f"\n### One training pass per token: SFT step vs GRPO training pass ({cost['dtype']}, {cost['threads']} "
          f"threads, LoRA r{cost['lora_r']} on the top {cost['lora_layers']} layers; median of "
          f"{len(cost['seconds_all']['sft'])} rounds)\n")
    print("| pass | seconds | real tokens | padded positions | loss tokens | ms / real token | vs SFT | MFU |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    labels = {"sft": f"SFT step ({cost['sft_batch']} tasks, _sft_hand.py)",
              "trl": f"GRPO, TRL's fused head (`completion_logits: false`), {cost['completions']} completions",
              "rows": f"GRPO, `completion_logits: true`, every row's prompt (`completion_logits_shared_prompt: "
                      f"false`), {cost['completions']} completions",
              "completion_logits": f"GRPO, `completion_logits: true`, a group's prompt once, {cost['completions']} "
                                   "completions"}
    for k, label in labels.items():
        n = c["sft" if k == "sft" else "grpo"]
        mfu = cost["model_flops"][k] / cost["seconds"][k] / peak
        print(f"| {label} | {cost['seconds'][k]:.2f} | {n['real_tokens']} | {n['padded_positions']} | "
              f"{n['loss_tokens']} | {cost['ms_per_real_token'][k]:.3f} | {cost['vs_sft_per_real_token'][k]:.2f}x "
              f"| {mfu:.3f} |")
    g = c["grpo"]
    print(f"\nPositions through the 49,152-token vocabulary projection: TRL's fused head on CPU "
          f"{g['trl_vocab_positions']}, completion_logits {g['completion_logits_vocab_positions']} (the real completion "
          f"tokens); through the layers: {g['real_tokens'] + g['padded_positions']} (batch padded) vs "
          f"{g['completion_logits_positions']} (each group's forward cut to its own width) vs "
          f"{g['shared_prompt_tokens']} real tokens (a group's prompt once). MFU: model FLOPs (the layers for "
          f"every real token the path computes, the vocabulary projection at loss tokens only) / seconds / the "
          f"{machine['compute_dtype']} matmul peak measured now ({peak / 1e9:.0f} GFLOP/s).\n")
    print("| GRPO training pass, self CPU seconds (torch.profiler) | TRL's fused head | completion_logits, every "
          "row's prompt | completion_logits, a group's prompt once |")
    print("|---|---:|---:|---:|")
    prof = [cost["profile"][k] for k in GRPO_PATHS]
    for part in PARTS:
        if any(p[part] for p in prof):
            print(f"| {part} | " + " | ".join(f"{p[part]:.2f}" for p in prof) + " |")
    print("| total | " + " | ".join(f"{sum(p.values()):.2f}" for p in prof) + " |")
