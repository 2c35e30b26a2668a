"""TRL's SFTTrainer with the vocabulary projected at the answer tokens only, and the warm-up's schedule and budget.

TRL 1.16's SFTTrainer computes its loss through a fused LM head (`add_fused_lm_head`). With Triton (CUDA, XPU)
that head projects only the positions whose next token carries a label; elsewhere (the CPU) it projects **every**
position of the padded batch, each through the whole vocabulary (49,152 tokens for SmolLM2), and again in the
backward pass. Our SFT rows are ~90% prompt (median 484 prompt tokens, 36 answer tokens): on this 2-core CPU
SFTTrainer's step took 37 s against ~12 s for a loop that projects the answer positions only.

`AnswerOnlySFTTrainer.compute_loss` does what that loop did, inside TRL's trainer (its data preparation,
collator, optimizer, accelerate, DeepSpeed, PEFT and logging stay TRL's): the model's own forward with
`logits_to_keep=1` and its final hidden states, the rows at the positions whose next token is an answer token
(label != -100) through the LM head (`proofcheck.train.logprobs.HeadSpec`, TRL's logit scale and soft cap), an
fp32 log-softmax there, the mean negative log-likelihood over those tokens, counted as TRL counts them
(`num_items_in_batch` under gradient accumulation, times the processes when tokens are averaged across them).
With `focal_gamma` > 0 each token's loss is weighted by (1 - p)^gamma (`hard_token_weights`). TRL's metrics
(`entropy`, `mean_token_accuracy`, `num_tokens`) are logged from the same rows, without gradient.

It steps aside (TRL's own loss) where that head is already compact or where this path does not apply:
`why_not` says when. `tests/integration/test_sft_trainer.py` checks loss and gradients against TRL's path.

`StepBudget` is the callback that fits the steps to a wall-clock budget (`proofcheck.time_budget`, re-planned at
steps 1, 2, 4, ...); the trainer's `schedule` (the warm-up's `train.sft.cosine_to_zero`) reads its length, so when
the budget cuts the run the learning rate decays to the new end.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from torch.utils.data import Sampler
from transformers import TrainerCallback
from trl import SFTTrainer

from proofcheck.train.sft import _replan, hard_token_weights, replans_at


def why_not(device_type: str, *, focal_gamma: float, sharded: bool, aux_loss: bool, custom_loss: bool,
            label_smoothing: bool, loss_type: str, packed: bool) -> str | None:
    """None when the answer-only loss stands in for TRL's, else why TRL's own loss runs.

    On a Triton device TRL's head already projects the answer positions only: this path runs there only for
    a focal loss, which TRL lacks. Parameters sharded by FSDP / ZeRO-3 take TRL's path, as do the losses TRL
    builds from full logits (a custom loss function, label smoothing), DFT, MoE aux losses and packed rows.

    >>> why_not("cpu", focal_gamma=0, sharded=False, aux_loss=False, custom_loss=False, label_smoothing=False,
    ...         loss_type="nll", packed=False) is None
    True
    >>> why_not("cuda", focal_gamma=0, sharded=False, aux_loss=False, custom_loss=False, label_smoothing=False,
    ...         loss_type="nll", packed=False)
    "TRL's head is compact on cuda"
    """
    reasons = [(f"TRL's head is compact on {device_type}", device_type != "cpu" and focal_gamma <= 0),
               ("the parameters are sharded (FSDP / ZeRO-3)", sharded), ("the model has a MoE aux loss", aux_loss),
               ("a custom loss function needs the logits", custom_loss), ("label smoothing", label_smoothing),
               (f"loss_type {loss_type}", loss_type != "nll"), ("packed or padding-free rows", packed)]
    return next((why for why, hit in reasons if hit), None)


def answer_loss(model: Any, lm_head: Any, inputs: dict[str, Any], head: Any, focal_gamma: float = 0.0,
                num_items_in_batch: Any = None) -> tuple[Any, Any, Any]:
    """(loss, fp32 log-probabilities at the answer positions, their target tokens) of a collated SFT batch
    (`input_ids`, `attention_mask`, `labels` with -100 where no loss is taken).

    The model's own forward with `logits_to_keep=1` (one position through the head) and its final hidden
    states; the positions whose next token has a label go through `lm_head` with `head`'s transform
    (`proofcheck.train.logprobs.HeadSpec`). The loss is the mean negative log-likelihood over those tokens
    (divided by `num_items_in_batch` when given, as TRL divides under gradient accumulation), or with
    `focal_gamma` > 0 their average weighted by `hard_token_weights`."""
    import torch

    labels = inputs["labels"][:, 1:]
    mask = labels != -100
    out = model(input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"), logits_to_keep=1,
                output_hidden_states=True, use_cache=False)
    hidden = out.hidden_states[-1][:, :-1][mask]  # the final-norm output; position t predicts token t + 1
    logp = head.log_softmax(lm_head, hidden, 1.0)
    targets = labels[mask]
    losses = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    count = torch.as_tensor(mask.sum() if num_items_in_batch is None else num_items_in_batch).clamp(min=1)
    if focal_gamma > 0:
        weights = hard_token_weights(losses.detach(), focal_gamma)
        return (weights * losses).sum() / weights.sum() * (mask.sum() / count), logp, targets
    return losses.sum() / count, logp, targets


def window_batches(lengths: list[int], batch_size: int, rng: random.Random, window: int = 8) -> list[list[int]]:
    """One epoch of batches (every index once): the rows shuffled, sorted by length within windows of `window`
    batches (a batch pads little), the full batches in random order and the one short batch, if any, last.

    >>> batches = window_batches([5, 1, 9, 2, 8, 3, 7], 2, random.Random(0), window=2)
    >>> sorted(i for b in batches for i in b), [len(b) for b in batches][-1]
    ([0, 1, 2, 3, 4, 5, 6], 1)
    """
    order = rng.sample(range(len(lengths)), len(lengths))
    span = batch_size * window
    batches = []
    for start in range(0, len(order), span):
        chunk = sorted(order[start:start + span], key=lambda i: lengths[i])
        batches += [chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size)]
    full = [b for b in batches if len(b) == batch_size]
    rng.shuffle(full)
    return full + [b for b in batches if len(b) < batch_size]


class LengthWindowSampler(Sampler[int]):
    """Rows in the order of `window_batches`, a new shuffle each epoch (seeded by `seed` and the epoch).

    Why not transformers' `group_by_length`: it sorts megabatches of up to 50 batches longest first and keeps
    that order, so consecutive steps walk from the longest rows to the shortest and a short warm-up ends on
    the shortest proofs while its learning rate decays. On the demo's chains a 64-step warm-up in that order
    reached held-out rough Bal-F1 0.765 +- 0.024 where the hand loop's order (this one) had reached 0.822."""

    def __init__(self, lengths: list[int], batch_size: int, seed: int, window: int = 8) -> None:
        self.lengths, self.batch_size, self.seed, self.window = list(lengths), batch_size, seed, window
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self) -> Iterator[int]:
        rng = random.Random(f"{self.seed}:{self.epoch}")
        self.epoch += 1
        return iter([i for b in window_batches(self.lengths, self.batch_size, rng, self.window) for i in b])


class AnswerOnlySFTTrainer(SFTTrainer):
    """SFTTrainer whose loss projects the vocabulary at the answer tokens only (module docstring).

    `focal_gamma` > 0: the focal loss (`hard_token_weights`) instead of the plain mean. `schedule`: an LR
    multiplier of the step (a `LambdaLR` function) instead of the config's scheduler. `length_window` > 0:
    batches of similar length in random order (`LengthWindowSampler`) instead of the config's sampling."""

    def __init__(self, *args: Any, focal_gamma: float = 0.0, schedule: Callable[[int], float] | None = None,
                 length_window: int = 0, **kwargs: Any) -> None:
        if focal_gamma < 0:
            raise ValueError(f"focal_gamma {focal_gamma}: must be >= 0; 0 is the plain mean loss")
        self.focal_gamma = focal_gamma
        self.schedule = schedule
        self.length_window = length_window
        super().__init__(*args, **kwargs)
        self.answer_only_reason = self._why_not()

    def _why_not(self) -> str | None:
        from proofcheck.train.logprobs import sharded_parameters

        args = self.args
        return why_not(self.accelerator.device.type, focal_gamma=self.focal_gamma,
                       sharded=sharded_parameters(self.accelerator), aux_loss=bool(self.aux_loss_enabled),
                       custom_loss=self.compute_loss_func is not None, label_smoothing=self.label_smoother is not None,
                       loss_type=args.loss_type, packed=bool(args.packing or args.padding_free))

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        dataset = self.train_dataset if train_dataset is None else train_dataset
        if self.length_window <= 0:
            return super()._get_train_sampler(train_dataset)
        return LengthWindowSampler([len(ids) for ids in dataset["input_ids"]], self.args.per_device_train_batch_size,
                                   self.args.seed, self.length_window)

    def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
        if self.schedule is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)
        import torch

        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer or self.optimizer, self.schedule)
        self._created_lr_scheduler = True
        return self.lr_scheduler

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        if self.answer_only_reason is not None or return_outputs:
            if self.focal_gamma > 0:
                raise ValueError(f"focal_gamma needs the answer-only loss, which steps aside here "
                                 f"({self.answer_only_reason or 'the caller wants the logits'}); set focal_gamma 0")
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        import torch

        mode = "train" if self.model.training else "eval"
        net = self.accelerator.unwrap_model(model)
        loss, logp, targets = answer_loss(model, net.get_output_embeddings(), inputs, self._head_of(net),
                                          self.focal_gamma, num_items_in_batch)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * (self.accelerator.num_processes // self.get_tp_size())
        with torch.no_grad():
            entropy = -(logp.exp() * logp).sum(-1).sum()
            correct = (logp.argmax(-1) == targets).sum()
        self._log_answer_metrics(mode, targets.new_tensor(targets.numel()), entropy, correct, inputs)
        return loss

    def _head_of(self, net: Any) -> Any:
        from proofcheck.train.logprobs import HeadSpec

        if getattr(self, "_head", None) is None:
            self._head = HeadSpec.of(net.config)
        return self._head

    def _log_answer_metrics(self, mode: str, valid: Any, entropy: Any, correct: Any, inputs: dict[str, Any]) -> None:
        """TRL's SFT metrics (`entropy`, `mean_token_accuracy`, `num_tokens`), as its compute_loss logs them."""
        gather = self.accelerator.gather_for_metrics
        num_valid = gather(valid).sum()
        entropy_sum, num_correct = gather(entropy).sum(), gather(correct).sum()
        self._metrics[mode]["entropy"].append((entropy_sum / num_valid).item() if num_valid > 0 else 0.0)
        self._metrics[mode]["mean_token_accuracy"].append((num_correct / num_valid).item() if num_valid > 0 else 0.0)
        if mode == "train":
            self._total_train_tokens += gather(inputs["attention_mask"].sum()).sum().item() // self._tp_size
        self._metrics[mode]["num_tokens"] = [self._total_train_tokens]


class StepBudget(TrainerCallback):
    """Times every optimizer step, prints one line a step (`[proofcheck] sft step i/n loss L (s s/step)`) and,
    with a time budget, re-plans the step count at steps 1, 2, 4, ..., 32 and every 32nd (`replans_at`) and stops the run there.

    `started`: a `time.perf_counter()` value the budget counts from; `reserve_s`: seconds kept for saving."""

    def __init__(self, max_steps: int, plan: dict[str, Any], *, budget_s: float | None = None,
                 started: float | None = None, reserve_s: float = 0.0, log: Callable[[str], Any] = print) -> None:
        self.max_steps, self.total, self.plan, self.budget_s = max_steps, max_steps, plan, budget_s
        self.started = time.perf_counter() if started is None else started
        self.reserve_s, self.log = reserve_s, log
        self.durations: list[float] = []
        self._t0 = self._t_step = 0.0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._t0 = self._t_step = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        now = time.perf_counter()
        self.durations.append(now - self._t_step)
        self._t_step = now
        step = state.global_step
        if step == 1:
            self.plan["first_step_s"] = round(self.durations[0], 2)
        if self.budget_s is not None and replans_at(step):
            left = self.budget_s - (now - self.started) - self.reserve_s
            self.total = _replan(self.plan, self.durations, left, step, self.max_steps, self.budget_s, self.log,
                                self.total)
        if step >= self.total:
            control.should_training_stop = True

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
        if logs and "loss" in logs and state.global_step:
            step = state.global_step
            self.log(f"[proofcheck] sft step {step}/{self.total} loss {logs['loss']:.4f} "
                     f"({(time.perf_counter() - self._t0) / step:.1f} s/step)")

    def record(self) -> dict[str, Any]:
        """steps, train_s, median_step_s and every step's seconds (`step_s`) for the plan file."""
        return {"steps": len(self.durations), "train_s": round(time.perf_counter() - self._t0, 1),
                "step_s": [round(d, 3) for d in self.durations],
                "median_step_s": round(statistics.median(self.durations), 2) if self.durations else None}


def warmup_config(out: Path, *, steps: int, seed: int, learning_rate: float, batch_size: int, bf16: bool,
                  **overrides: Any) -> Any:
    """The CPU warm-up's SFTConfig: one process on the CPU, answer-only loss on prompt/completion rows (batches of
    similar length come from the trainer's `length_window`), no truncation, AdamW without
    weight decay, gradient norm clipped at 1, a line of log a step, nothing saved by the trainer itself."""
    from trl import SFTConfig

    return SFTConfig(output_dir=str(out), use_cpu=True, bf16=bf16, report_to="none", max_steps=steps, seed=seed,
                     learning_rate=learning_rate, per_device_train_batch_size=batch_size, weight_decay=0.0,
                     max_grad_norm=1.0, logging_steps=1, save_strategy="no", completion_only_loss=True,
                     max_length=None, dataloader_num_workers=0,
                     gradient_checkpointing=False,
                     disable_tqdm=True, **overrides)


def train_warmup(model: str | Path, out: Path, *, tasks: int | list[dict[str, Any]], steps: int, seed: int,
                 learning_rate: float, batch_size: int, dtype: str | None, lora_r: int, lora_layers: int | None,
                 time_budget_s: float | None, started: float, prompt_style: str, families: Any, focal_gamma: float,
                 flush_denormal: bool, settings: dict[str, Any], log: Callable[[str], Any]) -> Path:
    """`train.sft.warmup`'s training (its arguments; settings checked there): AnswerOnlySFTTrainer on the warm-up's
    rows, LoRA merged before saving, the prompt card, `sft_plan.json` written last. Returns `out`."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from proofcheck.allocator import loaded_allocator
    from proofcheck.data.synth import balanced_tasks
    from proofcheck.io import write_json_atomic
    from proofcheck.precision import choose_dtype, flush_denormals
    from proofcheck.prompt_card import write_prompt_card
    from proofcheck.protocol import prompt_sha256
    from proofcheck.train.config import top_layers
    from proofcheck.train.sft import (
        LENGTH_WINDOW,
        LORA_MODULES,
        PLAN_FILE,
        SAVE_RESERVE_S,
        _schedule,
        sft_rows,
    )

    flushed = flush_denormals(True) if flush_denormal else None  # before the first compute thread starts
    choice = choose_dtype(dtype, device="cpu")
    log(f"[proofcheck] sft dtype: {choice.short} ({choice.reason})")
    torch.manual_seed(seed)
    rows = sft_rows(tasks if isinstance(tasks, list) else balanced_tasks(tasks, seed=seed + 1000, families=families),
                    prompt_style)
    tok = AutoTokenizer.from_pretrained(model)
    net = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    peft_config = None
    if lora_r > 0:
        from peft import LoraConfig

        layers = top_layers(net.config.num_hidden_layers, lora_layers) if lora_layers else None
        peft_config = LoraConfig(r=lora_r, lora_alpha=2 * lora_r, target_modules=LORA_MODULES,
                                 layers_to_transform=layers, lora_dropout=0.0, task_type="CAUSAL_LM")
    plan: dict[str, Any] = {"max_steps": steps, "dtype": choice.record(), "time_budget_s": time_budget_s,
                            "flush_denormal": flushed, "allocator": loaded_allocator(), "settings": settings,
                            "trainer": "AnswerOnlySFTTrainer"}
    budget = StepBudget(steps, plan, budget_s=time_budget_s, started=started, reserve_s=SAVE_RESERVE_S, log=log)
    trainer = AnswerOnlySFTTrainer(
        model=net, args=warmup_config(out, steps=steps, seed=seed, learning_rate=learning_rate,
                                      batch_size=batch_size, bf16=choice.bf16),
        train_dataset=Dataset.from_list(rows), processing_class=tok, peft_config=peft_config,
        callbacks=[budget], focal_gamma=focal_gamma, schedule=lambda s: _schedule(s, budget.total),
        length_window=LENGTH_WINDOW)
    trainer.train()
    plan.update(budget.record())
    trained = trainer.model.merge_and_unload() if lora_r > 0 else trainer.model
    trained.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    # no reference solution in SFT prompts (in synthetic tasks it would give the answer away)
    write_prompt_card(out, False, prompt_sha256(style=prompt_style), prompt_style=prompt_style,
                      written_by="proofcheck train/sft.py")
    write_json_atomic(out / PLAN_FILE, plan)  # last: its presence says the warm-up is finished
    return out
