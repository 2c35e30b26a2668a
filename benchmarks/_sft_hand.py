"""The SFT warm-up's former hand-written loop (train/sft.py before issue 53), kept as the baseline the
SFTTrainer warm-up is measured against (`benchmarks/sft_trainer.py`) and the step whose cost
`benchmarks/_train_cost.py` splits: right-padded batches sorted by length within windows of 8 batches,
the decoder's last hidden states, the vocabulary projection and log-softmax at the answer positions only,
AdamW (no weight decay), gradient norm clipped at 1, linear warm-up over 5% then cosine to 0."""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any


def length_batches(lengths: list[int], batch_size: int, rng: random.Random, window: int = 8) -> list[list[int]]:
    """One epoch of batches in the hand loop's order: the warm-up's own `window_batches` (sorted by length within
    windows of `window` batches, batches in random order), imported here so this module stays light."""
    from proofcheck.train.sft_trainer import window_batches

    return window_batches(lengths, batch_size, rng, window)


def batch_loss(model: Any, batch: list[tuple[list[int], int]], pad_id: int) -> Any:
    """Mean next-token loss over the answer tokens of `batch` ((ids, prompt length) pairs, right-padded)."""
    import torch

    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, (seq, _) in enumerate(batch):
        ids[i, :len(seq)] = torch.tensor(seq)
        mask[i, :len(seq)] = 1
    hidden = model.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state
    rows = [i for i, (seq, p) in enumerate(batch) for _ in range(p - 1, len(seq) - 1)]
    cols = [t for seq, p in batch for t in range(p - 1, len(seq) - 1)]
    targets = torch.tensor([seq[t + 1] for seq, p in batch for t in range(p - 1, len(seq) - 1)])
    logits = model.get_output_embeddings()(hidden[rows, cols]).float()
    return torch.nn.functional.cross_entropy(logits, targets)


def hand_warmup(model: str | Path, out: str | Path, tasks: list[dict[str, Any]], *, steps: int, lr: float,
                lora_r: int, batch_size: int, seed: int, bf16: bool, style: str, log: Any = print) -> dict[str, Any]:
    """Train `steps` steps as the hand loop did, save the merged model to `out`; step seconds and losses."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from proofcheck.train.sft import LORA_MODULES, _schedule, encode, sft_rows

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(model)
    examples = [encode(tok, r) for r in sft_rows(tasks, style)]
    net = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    if lora_r > 0:
        net = get_peft_model(net, LoraConfig(r=lora_r, lora_alpha=2 * lora_r, target_modules=LORA_MODULES,
                                             lora_dropout=0.0, task_type="CAUSAL_LM"))
    net.train()
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _schedule(s, steps))
    rng, order = random.Random(seed), []
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    durations, losses = [], []
    for step in range(steps):
        t0 = time.perf_counter()
        if not order:
            order = length_batches([len(ids) for ids, _ in examples], batch_size, rng)
        batch = [examples[i] for i in order.pop(0)]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = batch_loss(net, batch, pad)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        durations.append(time.perf_counter() - t0)
        losses.append(loss.item())
        log(f"[hand loop] step {step + 1}/{steps} loss {losses[-1]:.4f} ({durations[-1]:.1f} s)")
    trained = net.merge_and_unload() if lora_r > 0 else net
    trained.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return {"step_s": durations, "losses": losses, "median_step_s": statistics.median(durations)}
