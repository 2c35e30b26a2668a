"""Supervised warm-up: teach a model the verifier's answer format before GRPO.

A fresh model (random, or a small instruction model such as SmolLM2-135M, 0 of 96 passes valid
zero-shot) almost never writes a parsable verdict, so every GRPO sample scores 0 and there is no
advantage to learn from. A short supervised run on synthetic tasks with gold verifications
(exact labels, `data.synth`) fixes the format; GRPO then has rewards that differ within a group.
The prompts are the verifier prompts GRPO and serving use (no reference solution: in the
synthetic tasks it would give the answer away).

It trains with TRL's SFTTrainer (`train/sft_trainer.py`: `AnswerOnlySFTTrainer`, which projects the vocabulary
(49,152 tokens for SmolLM2) at the answer positions only, where TRL's fused head on the CPU projects every
position: 37 s a step against ~12 s; measured at 1.03x the former hand-written loop's step,
docs/measurements/2026-12-06-sft-trainer.md); the same stage runs as a recipe (`configs/sft/smollm2-sft-cpu.yaml`,
`proofcheck train`). LoRA (`lora_r` > 0) is merged before saving, so GRPO and serving load a plain folder either
way. The compute dtype comes from `proofcheck.precision.choose_dtype` (`--dtype`, else `PROOFCHECK_DTYPE`, else
the machine): bf16 autocast with fp32 master weights where the CPU runs bf16 natively (avx512_bf16 / AMX), plain
fp32 elsewhere (an emulated bf16 step is ~16x slower than fp32 on an AVX2 CPU).

Running it again into an `--out` that holds a finished warm-up (its `sft_plan.json`, written last)
trains nothing and leaves the model as it is, as a resumed GRPO run at its end does: a requeued job
or a re-run script never trains the warm-up twice. Different settings for that folder are an error
(choose another `--out`, or delete it); an unfinished one (no plan) is trained again from the start.

`--time-budget S` fits the run to a wall-clock budget: the first step is timed and the number of
steps becomes what fits in the seconds left (at most `--steps`); the cosine schedule follows the
new length. The plan is printed and written to `<out>/sft_plan.json`.

    python -m proofcheck.train.sft --model runs/smollm2 --out runs/sft --tasks 256 --steps 16 --lora-r 16
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from proofcheck.data.families import family_choice
from proofcheck.data.loaders import DataError, iter_json_objects
from proofcheck.protocol import DEFAULT_PROMPT_STYLE, PROMPT_STYLES
from proofcheck.time_budget import units_that_fit

LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def sft_rows(tasks: list[dict[str, Any]], style: str = DEFAULT_PROMPT_STYLE) -> list[dict[str, Any]]:
    """Conversational prompt/completion rows: the verifier prompt (in prompt `style`) and the gold verification."""
    from proofcheck.protocol import verifier_messages

    return [{"prompt": verifier_messages(t["problem"], t["steps"], None, style),
             "completion": [{"role": "assistant", "content": t["gold_verification"]}]} for t in tasks]


TASK_FIELDS = ("problem", "steps", "gold_verification")


def load_tasks(path: str | Path) -> list[dict[str, Any]]:
    """Synthetic tasks from a JSONL file (as `proofcheck demo` writes them); each needs `TASK_FIELDS`.

    Lines are read by the data layer's `iter_json_objects` and bad ones reported as its readers do:
    a `DataError` with one `file:line: field: reason` per issue. A task is not one of the record
    schemas (`gold_verification` is in none of them), hence this reader rather than `validate_jsonl`.
    """
    tasks, problems = [], []
    for lineno, value, problem in iter_json_objects(path):
        if problem is not None:
            problems.append(problem)
        elif missing := [k for k in TASK_FIELDS if k not in value]:
            problems += [f"{path}:{lineno}: {k}: missing (write the file with proofcheck.data.synth, "
                         "e.g. `proofcheck data synth`)" for k in missing]
        else:
            tasks.append(value)
    if problems:
        raise DataError(problems)
    if not tasks:
        raise ValueError(f"{path}: no tasks")
    return tasks


def encode(tokenizer: Any, row: dict[str, Any]) -> tuple[list[int], int]:
    """(token ids of prompt + answer + end of turn, number of prompt tokens)."""
    prompt = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True,
                                           return_dict=True)["input_ids"]
    full = tokenizer.apply_chat_template(row["prompt"] + row["completion"], tokenize=True,
                                         return_dict=True)["input_ids"]
    if full[:len(prompt)] != prompt:
        raise ValueError("the chat template renders the prompt differently with the answer appended")
    return list(full), len(prompt)


def hard_token_weights(losses: Any, gamma: float, floor: float = 0.05) -> Any:
    """Per-token weights (1 - p)^gamma, p = exp(-loss) the model's probability of the gold token,
    at least `floor`: a focal loss (Lin et al., 2017) over the answer.

    Most answer tokens are copies or format the model predicts at once; the few that decide (the
    computed value, `ok` vs `not` at a step) are rare, and a plain mean lets the common `ok` win
    them. Weighting by how wrong the model still is puts the gradient where the answer is decided,
    whatever the answer's wording. The floor keeps easy tokens learned.

    >>> import torch
    >>> [round(w, 3) for w in hard_token_weights(torch.tensor([0.0, 0.693, 5.0]), 2.0).tolist()]
    [0.05, 0.25, 0.987]
    """
    return (1 - losses.neg().exp()).pow(gamma).clamp_min(floor)


FOCAL_GAMMA_NEGATIVE = ("--focal-gamma {gamma}: must be >= 0 (a negative power would weight the tokens the model "
                        "already gets right most); use 0 for the plain mean loss or e.g. 2 for a focal loss")
SAVE_RESERVE_S = 15.0   # merging and saving a 135M model after the last step (measured 5-10 s)
PLAN_FILE = "sft_plan.json"


def steps_that_fit(first_step_s: float, seconds_left: float, max_steps: int, min_steps: int = 1) -> int:
    """How many steps in all (the first one included) fit in `seconds_left` after the first step,
    at the first step's pace; between `min_steps` and `max_steps`."""
    return units_that_fit(seconds_left, first_step_s, already=1, at_least=min_steps, at_most=max_steps)


REPLAN_EVERY = 32  # steps between re-plans once the doublings pass it; also the recent steps whose median is the pace


def replans_at(step: int) -> bool:
    """Steps 1, 2, 4, ..., 32, then every 32nd: the pace of a warm-up drifts (six families, 2026-12-07: the
    median of 32 steps went 7.3 -> 12 s over 256 steps, and re-planned only at 128 and 256 the run overran its
    2329 s budget by 456 s).

    >>> [s for s in range(1, 130) if replans_at(s)]
    [1, 2, 4, 8, 16, 32, 64, 96, 128]
    """
    return step & (step - 1) == 0 or step % REPLAN_EVERY == 0


def _replan(plan: dict[str, Any], durations: list[float], left: float, step: int, max_steps: int,
            budget_s: float, log: Any, current: int) -> int:
    """The step count that fits: the steps done plus what the seconds left hold at the recent pace (the median of
    the last `REPLAN_EVERY` steps).

    Re-planned at `replans_at` steps: a first step slowed by other work on the machine (another process, a cold
    cache) no longer fixes the whole run's length, and a pace that slows later is caught within 32 steps."""
    median = statistics.median(durations[-REPLAN_EVERY:])
    total = step - 1 + steps_that_fit(median, left, max_steps - step + 1) if step < max_steps else step
    total = max(step, min(max_steps, total))
    plan.setdefault("replans", []).append({"at_step": step, "median_step_s": round(median, 2), "steps": total})
    if step == 1 or total != current:
        log(f"[proofcheck] sft plan at step {step}: {median:.1f} s/step (median), {max(0.0, left):.0f} s left of "
            f"the {budget_s:.0f} s budget -> {total} of at most {max_steps} steps")
    return total


LENGTH_WINDOW = 8  # the warm-up's batches: sorted by length within windows of 8 (the families: ~330-600 tokens)
# recorded in the settings: a warm-up trained in transformers' group_by_length order (before) is not this one
BATCH_ORDER = f"sorted by length within windows of {LENGTH_WINDOW} batches, batches shuffled"


def _schedule(step: int, total: int) -> float:
    """Linear warm-up over the first 5% of `total` steps, then cosine decay to 0 at `total`."""
    warm = max(1, total // 20)
    return min(1.0, (step + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, step / max(1, total))))


class WarmupExists(ValueError):
    """`--out` holds a finished warm-up trained with other settings."""


def warmup_settings(model: str | Path, tasks: int | list[dict[str, Any]], families: str | list[str] | None,
                    **kw: Any) -> dict[str, Any]:
    """What defines a warm-up's result, recorded in its plan: the start model, the tasks (their count
    when drawn, a hash of them when given), the families and the keyword settings `kw`. The time
    budget is left out: a requeued job gets another one."""
    import hashlib
    import json

    drawn = tasks if isinstance(tasks, int) else hashlib.sha256(
        json.dumps(tasks, sort_keys=True).encode()).hexdigest()
    return {"model": str(model), "tasks": drawn, "families": families, **kw, "batch_order": BATCH_ORDER}


def finished_warmup(out: str | Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The plan of the finished warm-up in `out` (None when there is none); raises WarmupExists when it
    was trained with other `settings` (a plan written before settings were recorded matches any)."""
    import json

    path = Path(out) / PLAN_FILE
    if not path.is_file():
        return None
    plan = json.loads(path.read_text(encoding="utf-8"))
    recorded = plan.get("settings")
    if recorded is not None and recorded != settings:
        diff = ", ".join(f"{k}: {recorded.get(k)!r} there, {v!r} now" for k, v in settings.items()
                         if recorded.get(k) != v)
        raise WarmupExists(f"{out} holds a finished warm-up trained with other settings ({diff}); choose another "
                           "--out, or delete it to train again")
    return plan


def warmup(model: str | Path, out: str | Path, *, tasks: int | list[dict[str, Any]] = 512, steps: int = 200,
           seed: int = 0, learning_rate: float = 1e-3, batch_size: int = 8, dtype: str | None = None,
           lora_r: int = 0, lora_layers: int | None = None, time_budget_s: float | None = None,
           started: float | None = None, prompt_style: str = DEFAULT_PROMPT_STYLE, families: str | list[str] | None = None,
           focal_gamma: float = 0.0, flush_denormal: bool = True, log: Any = print) -> Path:
    """Fine-tune `model` for `steps` steps on synthetic gold verifications (`tasks`: a list of tasks,
    or how many balanced tasks to draw); save to `out` (merged when LoRA). Returns `out`.

    `dtype`: "bfloat16" / "float32" / "auto" / None (None and auto: `choose_dtype`'s rule).
    `lora_r` > 0 trains LoRA on the attention and MLP projections, of the top `lora_layers`
    layers only when given (the backward pass then stops at the lowest adapted layer).
    `time_budget_s`: seconds the whole run may take, counted from `started` (a `time.perf_counter`
    value; default: now); `steps` becomes at most what fits, judged from the first step.
    `prompt_style`: the verifier prompt style (`proofcheck.protocol.PROMPT_STYLES`) trained on; it is
    written into `out`'s proofcheck_prompt.json, so GRPO from this folder and serving use the same one.
    `families`: the proof families drawn when `tasks` is a number (`proofcheck.data.families` names or
    "all"; None: arithmetic chains).
    `focal_gamma` > 0 weights each answer token's loss by (1 - p)^gamma (`hard_token_weights`).
    `flush_denormal`: flush denormal floats to zero first (`proofcheck.precision.flush_denormals`: same losses;
    1.13x, 1.13x and 0.95x the step speed in three runs on the bf16 CPU host); False keeps the CPU's default.
    """
    from proofcheck.protocol import style_texts

    style_texts(prompt_style)  # an unknown style fails before the model loads
    if focal_gamma < 0:
        raise ValueError(FOCAL_GAMMA_NEGATIVE.format(gamma=focal_gamma))
    settings = warmup_settings(model, tasks, families, steps=steps, seed=seed, learning_rate=learning_rate,
                               batch_size=batch_size, lora_r=lora_r, lora_layers=lora_layers, prompt_style=prompt_style,
                               **({"focal_gamma": focal_gamma} if focal_gamma else {}))
    if (done := finished_warmup(out, settings)) is not None:
        log(f"[proofcheck] sft: {out} holds a finished warm-up ({done.get('steps')} steps): nothing to train, "
            "the model is left as it is")
        return Path(out)
    if (Path(out) / "config.json").is_file():
        log(f"[proofcheck] sft: {out} holds an unfinished warm-up (no {PLAN_FILE}): training from the start")
    started = time.perf_counter() if started is None else started
    from proofcheck.train.sft_trainer import train_warmup

    return train_warmup(model, Path(out), tasks=tasks, steps=steps, seed=seed, learning_rate=learning_rate,
                        batch_size=batch_size, dtype=dtype, lora_r=lora_r, lora_layers=lora_layers,
                        time_budget_s=time_budget_s, started=started, prompt_style=prompt_style, families=families,
                        focal_gamma=focal_gamma, flush_denormal=flush_denormal, settings=settings, log=log)


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model folder to start from")
    ap.add_argument("--out", required=True, help="where to save the warmed-up model (merged, if LoRA)")
    ap.add_argument("--tasks", type=int, default=512, help="synthetic tasks to draw and train on (half valid)")
    ap.add_argument("--families", default="chain", help="proof families of the drawn --tasks: `all` or a comma list "
                    "(chain, prose, linear, expand, parity, inequality); default chain (arithmetic chains)")
    ap.add_argument("--data", help="train on the tasks of this JSONL file instead of drawing --tasks")
    ap.add_argument("--steps", type=int, default=200, help="optimisation steps (the most, with --time-budget)")
    ap.add_argument("--batch-size", type=int, default=8, help="examples per step")
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (cosine decay)")
    ap.add_argument("--dtype", choices=["auto", "bfloat16", "bf16", "float32", "fp32"],
                    help="compute dtype: bf16 autocast (fp32 master weights) or fp32. Default: the "
                    "PROOFCHECK_DTYPE environment variable, else auto (bf16 only on CPUs with native bf16)")
    ap.add_argument("--bf16", action="store_true", help="deprecated: use --dtype bfloat16")
    ap.add_argument("--time-budget", type=float, metavar="S", help="seconds the whole run may take: the "
                    "first step is timed and the step count cut to what fits (at most --steps)")
    ap.add_argument("--lora-r", type=int, default=0, help="LoRA rank; 0 = full fine-tuning")
    ap.add_argument("--lora-layers", type=int, help="with LoRA: adapt only the top N layers (faster backward)")
    ap.add_argument("--prompt-style", choices=PROMPT_STYLES, default=DEFAULT_PROMPT_STYLE,
                    help="verifier prompt style to train on (proofcheck.protocol.PROMPT_STYLES); written into "
                    "--out's proofcheck_prompt.json, which GRPO's recipe and serving should match")
    ap.add_argument("--focal-gamma", type=float, default=0.0, metavar="G", help="weight each answer token's loss "
                    "by (1 - p)^G, p the model's probability of it (a focal loss): the rare tokens that decide a "
                    "step (`ok` vs `not`) get the gradient the common ones would take. 0 = plain mean")
    ap.add_argument("--keep-denormals", action="store_true", help="leave the CPU's denormal floats as they are "
                    "(default: flushed to zero; the same losses; 1.13x faster in 2 of 3 runs on the bf16 CPU host, 0.95x in one)")
    ap.add_argument("--seed", type=int, default=0, help="seed")
    args = ap.parse_args(argv)
    if args.focal_gamma < 0:  # refused before anything loads; 0 is the plain mean, not a silent "off"
        ap.error(FOCAL_GAMMA_NEGATIVE.format(gamma=args.focal_gamma))
    if args.bf16:
        print("warning: --bf16 is deprecated and will be removed; use --dtype bfloat16", file=sys.stderr)
    try:
        tasks = load_tasks(args.data) if args.data else args.tasks
        families = family_choice(args.families)
        if families is not None and families != "all":
            from proofcheck.data.families import resolve

            resolve(families)  # an unknown family: ValueError naming the choices, before the model loads
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        warmup(args.model, args.out, tasks=tasks, steps=args.steps, seed=args.seed, learning_rate=args.lr,
               batch_size=args.batch_size, dtype="bfloat16" if args.bf16 else args.dtype, lora_r=args.lora_r,
               lora_layers=args.lora_layers, time_budget_s=args.time_budget, started=started,
               prompt_style=args.prompt_style, families=families, focal_gamma=args.focal_gamma,
               flush_denormal=not args.keep_denormals, log=lambda m: print(m, flush=True))
    except WarmupExists as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"warmed-up model saved to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
