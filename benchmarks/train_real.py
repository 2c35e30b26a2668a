"""Benchmark: GRPO steps on the real SmolLM2-135M (HF generate vs vLLM colocate, LoRA and full) and
the held-out evaluation inside training (HF generate vs the trainer's vLLM engine), with MFU.

Runs `train/grpo.py` four times on the same small synthetic dataset, seed and sizes:
{LoRA as `configs/grpo/smollm2-cpu.yaml` ships it (top layers, bf16 autocast where native), full fine-tuning
(the same recipe with `use_peft: false`)} x {plain transformers generation (`--use_vllm false`,
the baseline), vLLM colocate}. Each run's `run_summary.json` `step_split_s` gives the median seconds
per step of generation, weight sync, reward and the rest (log-probs, loss, backward, optimizer;
the first step excluded).
`train.colocate_vs_hf_generate` = HF generation time / vLLM generation time (the LoRA recipe).

The held-out evaluation (`VerifierEvalCallback`, k passes per proof at the end of training) runs
in the two LoRA runs on the same rows and seed: in the HF run through `model.generate` (what the
trainer did before, even with `use_vllm` on) and in the vLLM run through the trainer's colocated
engine (what it does now). `train.eval_vllm_speedup` = HF seconds / vLLM seconds.

The model-FLOPs utilisation of the optimisation part: model FLOPs of forward + backward per token
(`roofline.train_flops_per_token`; LoRA: activation gradients through the trained top layers only;
full: weight and activation gradients everywhere) x tokens per step (TRL's `num_tokens`), the vocabulary
projection counted at the completion tokens only (`_train_cost.model_flops`: no other position is scored)
/ its seconds / the compute dtype's matmul peak measured in the same run.

With `--compare-prompt-styles` it runs instead the LoRA recipe with vLLM colocate twice, the verifier
prompt in its `full` style (the baseline) and in its `compact` style (`prompt_style`, issue 21's
shorter prompt, the same in training, evaluation and serving), and prints completions per minute of
each and their ratio (`train.prompt_style_speedup` = compact completions/min / full completions/min).

With `--denormals` it runs the demo's SFT warm-up and then the LoRA recipe with vLLM colocate twice each, denormal
floats kept (the CPU's default, the baseline) and flushed to zero (`flush_denormal`, `proofcheck.precision
.flush_denormals`), and prints their step times and ratios (`train.denormal_sft_speedup`, `train.denormal_grpo_speedup`).

With `--step-cost` it says where a GRPO step's training time goes and what removing the waste buys, in one
run on one model and host (`_train_cost.py`): SFT's step and GRPO's training pass (TRL's fused LM head and
`completion_logits`) per real token (padded positions and loss tokens counted apart), their MFU, a
torch.profiler table of GRPO's training pass before and after; then the LoRA recipe with vLLM colocate
twice, side by side: the old path (`completion_logits: false`, TRL's log-probabilities, and
`vllm_cpu_packed_kernels: false`, plain F.linear generation) and the new (both true): step split,
completions per minute, their ratio (`train.completion_logits_speedup`) and the training part's MFU.

    .venv/bin/python benchmarks/train_real.py [--quick] [--model DIR] [--steps N]
    .venv/bin/python benchmarks/train_real.py --compare-prompt-styles [--steps N]
    .venv/bin/python benchmarks/train_real.py --step-cost [--steps N] [--json FILE]
    .venv/bin/python benchmarks/train_real.py --denormals [--steps N] [--sft-steps N]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _figures import REPO, emit, log_rows, real_model

from proofcheck.protocol import DEFAULT_PROMPT_STYLE, PROMPT_STYLES

RECIPE = REPO / "configs" / "grpo" / "smollm2-cpu.yaml"
FULL_LR = 1e-5  # full fine-tuning's learning rate (the LoRA recipe's 3e-4 is an adapter's)
BACKENDS = (("hf", False), ("vllm", True))
BACKEND_LABELS = {"hf": "HF generate (baseline)", "vllm": "vLLM colocate"}


def recipe_lora_layers(recipe: Path) -> tuple[bool, int | None]:
    """(use_peft, lora_layers) of a recipe YAML: how far the backward pass reaches."""
    import yaml

    cfg = yaml.safe_load(recipe.read_text()) or {}
    return bool(cfg.get("use_peft")), cfg.get("lora_layers")


def full_recipe(recipe: Path, out: Path) -> Path:
    """`recipe` turned into full fine-tuning: no adapter, no `lora_layers`, a full-model learning rate."""
    import yaml

    cfg = yaml.safe_load(recipe.read_text()) or {}
    for key in ("lora_layers", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules"):
        cfg.pop(key, None)
    cfg.update(use_peft=False, save_adapter=False, save_merged=True, learning_rate=FULL_LR)
    out.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return out


def run_bounded(cmd: list[str], timeout_s: float | None, what: str) -> subprocess.CompletedProcess:
    """`cmd` in its own process group, killed as a whole (vLLM's engine processes included, which
    would otherwise keep the GPU) when it runs past `timeout_s`; then a SystemExit that says so."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise SystemExit(f"{what}: no end after {timeout_s:.0f} s (a hang, or sized too large for this machine); "
                         f"killed. Command: {' '.join(cmd)}\nlast output:\n{(err or '')[-3000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, f"{err}\n({what}: {time.monotonic() - t0:.0f} s)")


def run_backend(model: Path, out: Path, use_vllm: bool, steps: int, batch: int, generations: int,
                completion: int, recipe: Path = RECIPE, extra: list[str] | None = None,
                eval_proofs: int = 0, eval_passes: int = 4, timeout_s: float | None = None) -> dict[str, Any]:
    """One short GRPO run: its step split, tokens per step, GPU memory and (with `eval_proofs`) its
    final held-out evaluation. `extra`: more recipe overrides. `timeout_s`: the run is killed (with its
    engine processes) and the benchmark stops with a message past it."""
    from proofcheck.app.launch import SyntheticTasks, grpo_command

    cmd = grpo_command(recipe, model, out, SyntheticTasks(max(4 * batch, 8 * eval_proofs, 32), eval_fraction=0.2), {
        "max_steps": steps, "eval_max_samples": eval_proofs, "eval_passes": eval_passes,
        "eval_max_new_tokens": completion, "eval_at_start": False, "eval_every_steps": 0,
        "per_device_train_batch_size": batch, "num_generations": generations, "max_completion_length": completion,
        "use_vllm": use_vllm, "logging_steps": 1, "disable_tqdm": True, "report_to": "none"}) + (extra or [])
    proc = run_bounded(cmd, timeout_s, f"GRPO run ({'vLLM colocate' if use_vllm else 'HF generate'})")
    if proc.returncode != 0:
        raise SystemExit(f"GRPO run ({'vLLM colocate' if use_vllm else 'HF generate'}) failed "
                         f"({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    summary = json.loads((out / "run_summary.json").read_text())
    seen = [r["num_tokens"] for r in log_rows(proc.stdout) if isinstance(r.get("num_tokens"), float)]
    # transformers prints floats to 4 significant digits: per-step differences are good to ~0.1%
    per_step = [b - a for a, b in zip(seen, seen[1:], strict=False)] or seen[:1]
    lengths = [r["completions/mean_length"] for r in log_rows(proc.stdout)[1:]
               if isinstance(r.get("completions/mean_length"), float)]  # the timed steps (the first excluded)
    return {"split": summary["step_split_s"], "tokens_per_step": statistics.median(per_step) if per_step else None,
            "completion_tokens_per_step": statistics.median(lengths) * batch if lengths else None,
            "eval": summary.get("eval"), "memory": summary.get("memory")}


def mfu(row: dict[str, Any], shape: Any, batch: int, peft: bool, lora_layers: int | None, peak: float,
        prompt_once: int | None = None) -> float | None:
    """Model FLOPs of the optimisation part / its seconds / the compute dtype's matmul peak. Model FLOPs
    (`_train_cost.model_flops`): every token through the layers, the vocabulary projection at the completion
    tokens only (the loss reads no other position). `prompt_once`: the run forwards each group's prompt once
    (`completion_logits_shared_prompt`) for this many completions, so its prompt tokens count once."""
    from _train_cost import model_flops

    tok, loss_tok, train_s = row["tokens_per_step"], row.get("completion_tokens_per_step"), row["split"]["train"]
    if not tok or not loss_tok or not train_s:
        return None
    computed = loss_tok + (tok - loss_tok) / prompt_once if prompt_once else tok
    flops = model_flops(shape, computed, loss_tok, tok / batch / 2, lora_layers if peft else None, not peft)
    return flops / train_s / peak


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 steps (2 timed), 8 completions of <= 64 tokens per step, "
                    "16 held-out proofs")
    ap.add_argument("--model", help="model folder (default: runs/smollm2, built with `proofcheck model smollm2`)")
    ap.add_argument("--steps", type=int, help="GRPO steps per run, the first not timed (default 5, quick 3)")
    ap.add_argument("--batch", type=int, help="completions per step (default 16, quick 8)")
    ap.add_argument("--generations", type=int, default=4, help="completions per prompt")
    ap.add_argument("--completion-length", type=int, help="max_completion_length, also the evaluation's "
                    "max new tokens (default 160, quick 64)")
    ap.add_argument("--eval-proofs", type=int, help="held-out proofs evaluated at the end of the LoRA runs "
                    "(default 32, quick 16; 0 skips the evaluation comparison)")
    ap.add_argument("--eval-passes", type=int, default=4, help="passes per held-out proof")
    ap.add_argument("--recipe", default=str(RECIPE), help="GRPO recipe YAML with LoRA (default: the SmolLM2 CPU "
                    "recipe); the full fine-tuning runs use it with use_peft: false")
    ap.add_argument("--no-full", action="store_true", help="skip the two full fine-tuning runs")
    ap.add_argument("--compare-prompt-styles", action="store_true", help="instead: the LoRA recipe with vLLM, "
                    "prompt_style full (baseline) vs compact; completions per minute and their ratio")
    ap.add_argument("--step-cost", action="store_true", help="instead: SFT vs GRPO per token, the GRPO profile "
                    "before/after, and the LoRA recipe with vLLM with the old path (completion_logits and vllm_cpu_packed_kernels false) vs the new")
    ap.add_argument("--denormals", action="store_true", help="instead: the demo's SFT warm-up and the recipe's "
                    "GRPO step with denormal floats kept (baseline) and flushed to zero (flush_denormal)")
    ap.add_argument("--sft-steps", type=int, help="with --denormals: SFT steps per run (default 24, quick 8)")
    ap.add_argument("--json", help="with --step-cost: also write its figures to this JSON file")
    ap.add_argument("--timeout", type=float, default=None, help="seconds each GRPO run may take before it is killed "
                    "with its engine processes and the benchmark stops with a message (default: no limit)")
    ap.add_argument("--train-arg", action="append", default=[], metavar="FLAG=VALUE",
                    help="more overrides for every run, repeatable, e.g. --train-arg gradient_accumulation_steps=1 "
                         "(a list: --train-arg 'mix_ratios=0.5 0.0 0.5')")
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    extra = [x for item in args.train_arg for x in (f"--{item.partition('=')[0]}", *item.partition("=")[2].split())]
    steps = args.steps or (3 if args.quick else 5)
    batch = args.batch or (8 if args.quick else 16)
    completion = args.completion_length or (64 if args.quick else 160)
    eval_proofs = args.eval_proofs if args.eval_proofs is not None else (16 if args.quick else 32)
    from roofline import Shape, current_device, measure_machine
    from transformers import AutoConfig

    model = real_model(args.model)
    recipe = Path(args.recipe)
    peft, lora_layers = recipe_lora_layers(recipe)
    if not peft:
        raise SystemExit(f"--recipe {recipe}: use_peft is not true; give a LoRA recipe (the full fine-tuning runs "
                         "are derived from it)")
    shape = Shape.from_config(AutoConfig.from_pretrained(model))
    machine = measure_machine(threads=2, quick=args.quick, device=current_device())
    peak = machine["matmul_peak_flop_s"]   # the compute dtype's (proofcheck.precision): bf16 only where native
    work = Path(tempfile.mkdtemp(prefix="bench-train-real-"))
    if args.compare_prompt_styles:
        return compare_prompt_styles(model, work, recipe, steps, batch, args.generations, completion, extra, args.timeout)
    if args.denormals:
        return denormals(model, work, recipe, args.steps or (3 if args.quick else 10), args.sft_steps or
                         (8 if args.quick else 24), batch, args.generations, completion, extra, args.timeout)
    if args.step_cost:
        return step_cost(model, work, recipe, steps, batch, args.generations, args.completion_length or 192, extra,
                         args.timeout, shape, machine, lora_layers, args.json)
    variants = [("lora", recipe, True)] + ([] if args.no_full else [("full", full_recipe(recipe, work / "full.yaml"), False)])
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for variant, vrecipe, is_peft in variants:
        for name, use_vllm in BACKENDS:
            r = run_backend(model, work / f"{variant}-{name}", use_vllm, steps, batch, args.generations, completion,
                            vrecipe, (["--save_merged", "false", "--save_adapter", "true"] if is_peft else []) + extra,
                            eval_proofs=eval_proofs if variant == "lora" else 0,
                            eval_passes=args.eval_passes, timeout_s=args.timeout)
            r["mfu"] = mfu(r, shape, batch, is_peft, lora_layers, peak)
            rows[(variant, name)] = r
    figures = figures_of(rows, eval_proofs, args.eval_passes, completion)
    emit(figures)
    print_tables(rows, figures, model, shape, recipe, lora_layers, steps, batch, completion, machine)
    return 0


def side_by_side(model: Path, work: Path, recipe: Path, steps: int, batch: int, generations: int, completion: int,
                 timeout_s: float | None, variants: dict[str, tuple[str, list[str]]]) -> dict[str, dict[str, Any]]:
    """The recipe's short GRPO run (vLLM colocate, adapter saved) once per variant `name -> (folder, flags)`:
    each run's record (`run_backend`) with its completions per minute (`batch` over the median step)."""
    rows = {}
    for name, (folder, flags) in variants.items():
        r = run_backend(model, work / folder, True, steps, batch, generations, completion, recipe,
                        ["--save_merged", "false", "--save_adapter", "true", *flags], timeout_s=timeout_s)
        r["completions_per_min"] = round(60.0 * batch / r["split"]["total"], 2)
        rows[name] = r
    return rows


def side_by_side_table(title: str, key: str, rows: dict[str, dict[str, Any]],
                       columns: list[tuple[str, Callable[[dict[str, Any]], str]]]) -> None:
    """`side_by_side`'s runs as a Markdown table: a row per variant (named under `key`), a column per cell."""
    print(title)
    print(f"| {key} | " + " | ".join(h for h, _ in columns) + " |\n|---|" + "---:|" * len(columns))
    for name, r in rows.items():
        print(f"| {name} | " + " | ".join(cell(r) for _, cell in columns) + " |")


def compare_prompt_styles(model: Path, work: Path, recipe: Path, steps: int, batch: int, generations: int,
                          completion: int, extra: list[str], timeout_s: float | None) -> int:
    """The same GRPO run with every verifier prompt style (the default, full, and compact): step split, tokens
    per step, completions per minute, and compact's speed-up over full (measured in this run)."""
    base = DEFAULT_PROMPT_STYLE
    rows = side_by_side(model, work, recipe, steps, batch, generations, completion, timeout_s,
                        {style: (f"style-{style}", ["--prompt_style", style, *extra]) for style in PROMPT_STYLES})
    other = next(s for s in PROMPT_STYLES if s != base)
    speedup = round(rows[other]["completions_per_min"] / rows[base]["completions_per_min"], 3)
    emit({"train.prompt_style_completions_per_min": {k: r["completions_per_min"] for k, r in rows.items()},
          "train.prompt_style_step_split_s": {k: r["split"] for k, r in rows.items()},
          "train.prompt_style_speedup": speedup})
    side_by_side_table(
        f"\n### train_real --compare-prompt-styles: GRPO on {model.name}, {recipe.name}, vLLM colocate; median of "
        f"{max(steps - 1, 1)} step(s) after a warm-up; {batch} completions of <= {completion} tokens per step\n",
        "prompt_style", rows,
        [("tokens/step", lambda r: f"{r['tokens_per_step']:.0f}" if r["tokens_per_step"] else "n/a"),
         *_step_columns(rows[base], f"vs {base}")])
    return 0


def warmup_run(model: Path, work: Path, steps: int, flush: bool, timeout_s: float | None) -> dict[str, Any]:
    """The demo's SFT warm-up (`proofcheck.app.demo.sft_run` on its own curriculum, seed 0) for `steps` steps: its
    median and mean step (the first included: a denormal slow-down starts after a few steps) and its last loss."""
    from proofcheck.app.demo import DemoConfig, build_curriculum, sft_run

    cfg = DemoConfig(workdir=work, sft_steps=steps)
    cmd = sft_run(cfg, model, build_curriculum(cfg), None).command() + ([] if flush else ["--keep-denormals"])
    proc = run_bounded(cmd, timeout_s, "SFT warm-up")
    if proc.returncode != 0:
        raise SystemExit(f"SFT warm-up failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    plan = json.loads((work / "sft" / "sft_plan.json").read_text())
    losses = [line.split(" loss ")[1].split()[0] for line in proc.stdout.splitlines() if " loss " in line]
    return {"median_step_s": plan["median_step_s"], "mean_step_s": round(plan["train_s"] / plan["steps"], 3),
            "last_loss": float(losses[-1]), "flush_denormal": plan.get("flush_denormal")}


def denormals(model: Path, work: Path, recipe: Path, steps: int, sft_steps: int, batch: int, generations: int,
              completion: int, extra: list[str], timeout_s: float | None) -> int:
    """`--denormals`: the demo's SFT warm-up and the recipe's GRPO step with denormal floats kept (the CPU's
    default, the baseline) and flushed to zero (`flush_denormal`, the default), one after the other."""
    sft = {name: warmup_run(model, work / f"sft-{name}", sft_steps, name == "flushed", timeout_s)
           for name in ("kept", "flushed")}
    rows = side_by_side(model, work, recipe, steps, batch, generations, completion, timeout_s,
                        {name: (f"grpo-{name}", ["--flush_denormal", str(name == "flushed").lower(),
                                                 "--uncertainty_pool", "0", *extra]) for name in ("kept", "flushed")})
    figures = {"train.denormal_sft": sft, "train.denormal_sft_speedup":
               round(sft["kept"]["mean_step_s"] / sft["flushed"]["mean_step_s"], 3),
               "train.denormal_grpo_step_split_s": {k: r["split"] for k, r in rows.items()},
               "train.denormal_grpo_speedup": round(rows["flushed"]["completions_per_min"]
                                                    / rows["kept"]["completions_per_min"], 3)}
    emit(figures)
    print(f"\n### The demo's SFT warm-up on {model.name} (its curriculum, seed 0): {sft_steps} steps each\n")
    print("| denormals | median step s | mean step s | last loss | vs kept |\n|---|---:|---:|---:|---:|")
    for name, r in sft.items():
        print(f"| {name} | {r['median_step_s']:.2f} | {r['mean_step_s']:.2f} | {r['last_loss']:.4f} | "
              f"{sft['kept']['mean_step_s'] / r['mean_step_s']:.2f}x |")
    side_by_side_table(
        f"\n### GRPO on {model.name}, {recipe.name}, vLLM colocate, no uncertainty pool: median of {max(steps - 1, 1)} "
        f"step(s) after a warm-up; {batch} completions of <= {completion} tokens per step\n",
        "denormals", rows, _step_columns(rows["kept"], "vs kept"))
    return 0


def _step_columns(base: dict[str, Any], versus: str) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    """The columns both side-by-side tables end with: step split, completions/min, speed-up over `base`."""
    return [("generation s", lambda r: f"{r['split']['generation']:.1f}"),
            ("log-probs+backward+optimizer s", lambda r: f"{r['split']['train']:.1f}"),
            ("step s", lambda r: f"{r['split']['total']:.1f}"),
            ("completions/min", lambda r: f"{r['completions_per_min']:.1f}"),
            (versus, lambda r: f"{r['completions_per_min'] / base['completions_per_min']:.2f}x")]


def step_cost(model: Path, work: Path, recipe: Path, steps: int, batch: int, generations: int, completion: int,
              extra: list[str], timeout_s: float | None, shape: Any, machine: dict[str, Any], lora_layers: int | None,
              json_out: str | None) -> int:
    """`--step-cost`: the per-token table and profile (`_train_cost.measure`), then the recipe's GRPO step with
    the old path and the new (`completion_logits` + `vllm_cpu_packed_kernels`), side by side (completions per minute, MFU of the training part)."""
    from _train_cost import measure, print_cost

    peak = machine["matmul_peak_flop_s"]
    cost = measure(model, recipe, work)
    # no uncertainty pool: its refresh (generation on the engine, every few steps) would land in one timed step
    # of each run (`--train-arg uncertainty_pool=24` puts it back)
    rows = side_by_side(model, work, recipe, steps, batch, generations, completion, timeout_s,
                        {flag: (f"completion-logits-{flag}", ["--completion_logits", flag, "--vllm_cpu_packed_kernels",
                                                              flag, "--uncertainty_pool", "0", *extra])
                         for flag in ("false", "true")})
    for flag, r in rows.items():  # the new path forwards a group's prompt once (the recipe's default)
        m = mfu(r, shape, batch, True, lora_layers, peak, prompt_once=generations if flag == "true" else None)
        r["mfu_train"] = round(m, 4) if m is not None else None
    speedup = round(rows["true"]["completions_per_min"] / rows["false"]["completions_per_min"], 3)
    figures = {"train.step_cost": cost, "train.completion_logits_runs": rows,
               "train.completion_logits_speedup": speedup,
               "train.grpo_vs_sft_per_token": cost["vs_sft_per_real_token"]["completion_logits"],
               "train.grpo_pass_mfu": round(cost["model_flops"]["completion_logits"]
                                            / cost["seconds"]["completion_logits"] / peak, 4),
               "train.peak_flop_s": peak, "train.compute_dtype": machine["compute_dtype"]}
    emit(figures)
    if json_out:
        Path(json_out).write_text(json.dumps(figures, indent=2))
    print_cost(cost, peak, machine)
    side_by_side_table(
        f"\n### GRPO on {model.name}, {recipe.name}, vLLM colocate: the old path (TRL's log-probabilities, plain "
        f"F.linear generation) vs completion_logits + packed kernels; median of {max(steps - 1, 1)} step(s) after a warm-up; {batch} completions of <= {completion} tokens\n",
        "completion_logits", rows,
        [("tokens/step", lambda r: f"{r['tokens_per_step'] or 0:.0f}"),
         ("completion tokens/step", lambda r: f"{r['completion_tokens_per_step'] or 0:.0f}"),
         *_step_columns(rows["false"], "vs the old path"),
         ("MFU of the training part", lambda r: f"{r['mfu_train'] or 0:.3f}")])
    return 0


def _gen_ratio(rows: dict[tuple[str, str], dict[str, Any]], variant: str) -> float | None:
    if (variant, "vllm") not in rows:
        return None
    hf, vl = rows[(variant, "hf")]["split"]["generation"], rows[(variant, "vllm")]["split"]["generation"]
    return round(hf / vl, 3) if vl else None


def figures_of(rows: dict[tuple[str, str], dict[str, Any]], eval_proofs: int, eval_passes: int,
               completion: int) -> dict[str, Any]:
    """The fixed JSON keys: the LoRA recipe's figures under the names run_all requires, full FT beside."""
    def r4(x: float | None) -> float | None:
        return round(x, 4) if x is not None else None

    out: dict[str, Any] = {"train.colocate_vs_hf_generate": _gen_ratio(rows, "lora"),
                           "train.tokens_per_step": rows[("lora", "vllm")]["tokens_per_step"]}
    for (variant, name), r in rows.items():
        tag = name if variant == "lora" else f"full_{name}"
        out[f"train.{tag}_step_split_s"] = r["split"]
        out[f"train.mfu_{tag}"] = r4(r["mfu"])
        if r.get("memory"):  # CUDA only: peak allocation of the training process, vLLM's KV blocks
            out[f"train.{tag}_memory"] = r["memory"]
    if ("full", "vllm") in rows:
        out["train.full_colocate_vs_hf_generate"] = _gen_ratio(rows, "full")
    hf_eval, vl_eval = rows[("lora", "hf")]["eval"], rows[("lora", "vllm")]["eval"]
    if eval_proofs and hf_eval and vl_eval:
        out.update({"train.eval_proofs": eval_proofs, "train.eval_passes": eval_passes,
                    "train.eval_max_new_tokens": completion,
                    "train.eval_hf_generate_s": hf_eval["seconds"], "train.eval_vllm_s": vl_eval["seconds"],
                    "train.eval_vllm_speedup": round(hf_eval["seconds"] / vl_eval["seconds"], 3)})
    return out


def print_tables(rows: dict[tuple[str, str], dict[str, Any]], figures: dict[str, Any], model: Path, shape: Any,
                 recipe: Path, lora_layers: int | None, steps: int, batch: int, completion: int,
                 machine: dict[str, Any]) -> None:
    lora = f"LoRA on the top {lora_layers} layers" if lora_layers else "LoRA on every layer"
    print(f"\n### train_real: GRPO on {model.name} ({shape.params / 1e6:.0f} M params; {recipe.name}: {lora}, and "
          f"full fine-tuning); median of {max(steps - 1, 1)} step(s) after a warm-up; {batch} completions of "
          f"<= {completion} tokens per step\n")
    print("| training | generation | generation s | weight sync s | reward s | log-probs+backward+optimizer s "
          "| total s | tokens/step | MFU of the optimisation part | generation vs vLLM |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (variant, name), r in rows.items():
        s = r["split"]
        vl = rows[(variant, "vllm")]["split"]["generation"]
        m = f"{r['mfu']:.3f}" if r["mfu"] is not None else "n/a"
        tok = f"{r['tokens_per_step']:.0f}" if r["tokens_per_step"] else "n/a"
        print(f"| {lora if variant == 'lora' else 'full fine-tuning'} | {BACKEND_LABELS[name]} | {s['generation']:.2f} "
              f"| {s['weight_sync']:.2f} | {s['reward']:.3f} | {s['train']:.2f} | {s['total']:.2f} | {tok} | {m} "
              f"| {s['generation'] / vl:.2f}x |")
    print(f"\nMFU against the {machine['compute_dtype']} matmul peak measured now "
          f"({machine['matmul_peak_flop_s'] / 1e9:.0f} GFLOP/s, {machine['device']}; {machine['dtype_reason']}); model FLOPs: forward 2/weight + attention; backward 1/weight through the LoRA "
          "layers (activation gradients only), 4/weight for full fine-tuning; the vocabulary projection at the "
          "completion tokens only (since issue 33; the figures before counted it at every token).")
    mem = {k: r["memory"] for k, r in rows.items() if r.get("memory")}
    if mem:
        print("\n| training | generation | max_memory_allocated GiB | max_memory_reserved GiB | vLLM KV blocks "
              "(block size) |\n|---|---|---:|---:|---:|")
        for (variant, name), m in mem.items():
            kv = f"{m['vllm_kv_blocks']} ({m['vllm_block_size']})" if m.get("vllm_kv_blocks") else "n/a"
            print(f"| {lora if variant == 'lora' else 'full fine-tuning'} | {BACKEND_LABELS[name]} "
                  f"| {m['max_memory_allocated_gib']:.2f} | {m['max_memory_reserved_gib']:.2f} | {kv} |")
    if "train.eval_vllm_speedup" in figures:
        f = figures
        print(f"\nHeld-out evaluation inside training ({lora}), at the end of the run: {f['train.eval_proofs']} proofs "
              f"x {f['train.eval_passes']} passes, <= {f['train.eval_max_new_tokens']} new tokens, same rows and seed\n")
        print("| evaluation generates with | seconds | ratio |\n|---|---:|---:|")
        print(f"| HF `generate` on the policy (before: also with `use_vllm` on) | {f['train.eval_hf_generate_s']:.1f} "
              f"| 1.00 |")
        print(f"| the trainer's colocated vLLM engine (now, with `use_vllm` + colocate) | {f['train.eval_vllm_s']:.1f} "
              f"| {f['train.eval_vllm_speedup']:.2f}x faster |")


if __name__ == "__main__":
    sys.exit(main())
