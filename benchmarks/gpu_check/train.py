"""The GPU check's training stages (driver.py): GRPO steps, and a kill between checkpoints.

`train`: `train/grpo.py` on configs/grpo/qwen3-8b-lora-1gpu.yaml as shipped, with transformers
generation (`use_vllm false`: vLLM cannot travel to the lent machine) at the check's sizes; from its
run_summary.json and log rows: the step split, tokens per step and per second, the MFU of the
optimisation part against the bf16 peak measured by the machine stage, `max_memory_allocated` beside
the plan stage's estimate, and the held-out evaluation on the same path (the recipe's
eval_batch_size rows per `generate` call). It saves a checkpoint every step: a resumed run keeps the
save_steps of the checkpoint it starts from (transformers reads it from trainer_state.json), and the
resume stage needs the next checkpoint one step later.

`resume`: from that checkpoint a second run (save every step) is SIGKILLed as soon as its first new
checkpoint is marked complete, i.e. between two checkpoints; a third run resumes from the newest
complete checkpoint (`resume_from_checkpoint last`) and must end one step later with the whole
reward history (no step lost or repeated).

GRPO runs are children in the stage's own process group (no session of their own): the driver's
`os.killpg` at the stage's limit reaches them.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _figures import log_rows

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "configs" / "grpo" / "qwen3-8b-lora-1gpu.yaml"
EXPERT = REPO / "data" / "samples" / "annotated.jsonl"


def grpo_argv(settings: dict[str, Any], out_dir: Path, max_steps: int, save_steps: int, *, evaluate: bool = True,
              resume: bool = False) -> list[str]:
    """`train/grpo.py` arguments (`proofcheck.app.launch.grpo_args`): the 1-GPU LoRA recipe with the check's sizes
    and HF generation (the plan stage uses the same list, so its estimate describes the run the train stage measures)."""
    from proofcheck.app.launch import SyntheticTasks, grpo_args

    s = settings["sizes"]
    flags: dict[str, Any] = {
        "max_steps": max_steps, "save_steps": save_steps, "save_total_limit": 2, "use_vllm": False,
        "per_device_train_batch_size": s["batch"], "num_generations": s["generations"],
        "gradient_accumulation_steps": 1, "max_completion_length": s["completion"],
        "eval_max_samples": s["eval_proofs"] if evaluate else 0, "eval_passes": s["eval_passes"],
        "eval_max_new_tokens": s["completion"], "eval_at_start": False, "eval_every_steps": 0, "logging_steps": 1,
        "disable_tqdm": True, "report_to": "none", "save_merged": False, "save_adapter": True}
    if settings["device"] == "cpu":  # the rehearsal: fp32 on the CPU (bf16 there is emulated or refused)
        flags.update(use_cpu=True, bf16=False, dtype="float32")
    if resume:
        flags["resume_from_checkpoint"] = "last"
    data = SyntheticTasks(s["synthetic"], 0.2, expert_files=(EXPERT,), mix_ratios=(0.5, 0.0, 0.5))
    return grpo_args(RECIPE, settings["model"], out_dir, data, flags)


def run_grpo(argv: list[str], stdout_file: Path, kill_when: Callable[[], bool] | None = None
             ) -> tuple[int, bool]:
    """Run `train/grpo.py argv` (stdout to `stdout_file`, stderr to the stage's log); SIGKILL it by its
    handle as soon as `kill_when()` is true. Returns (exit code, killed)."""
    with open(stdout_file, "w") as out:
        from proofcheck.app.launch import grpo_script

        proc = subprocess.Popen([sys.executable, str(grpo_script()), *argv], stdout=out)
        while proc.poll() is None:
            if kill_when is not None and kill_when():
                proc.kill()
                proc.wait()
                return proc.returncode, True
            time.sleep(0.05)
    return proc.returncode, False


def _num(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def step_figures(rows: list[dict[str, Any]], batch: int) -> dict[str, float | None]:
    """Tokens per step (prompt + completion, from TRL's cumulative `num_tokens`) and the mean completion
    length, medians over the logged steps."""
    seen = [v for r in rows if (v := _num(r.get("num_tokens"))) is not None]
    per_step = [b - a for a, b in zip(seen, seen[1:], strict=False)] or seen[:1]
    lengths = [v for r in rows if (v := _num(r.get("completions/mean_length"))) is not None]
    return {"tokens_per_step": statistics.median(per_step) if per_step else None,
            "completion_mean_tokens": statistics.median(lengths) if lengths else None,
            "completions_per_step": batch}


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def mfu(shape: Any, tokens: float, batch: int, train_s: float, peak: float) -> float:
    """Model FLOPs of the optimisation part (forward + activation gradients through every layer: LoRA
    on all of them; weights frozen) per second / the matmul peak measured by the machine stage."""
    from roofline import train_flops_per_token

    return tokens * train_flops_per_token(shape, tokens / batch / 2, weight_grads=False) / train_s / peak


def train_stage(settings: dict[str, Any], save: Callable[[dict[str, Any]], None]) -> None:
    """GRPO steps + the held-out evaluation on the transformers path (see the module docstring)."""
    from roofline import Shape
    from transformers import AutoConfig

    from proofcheck.metrics import EVAL_VALID_RATE

    work, s = Path(settings["work"]), settings["sizes"]
    out = work / "train"
    argv = grpo_argv(settings, out, s["steps"], 1)
    save({"argv": argv, "recipe": str(RECIPE.relative_to(REPO))})
    t0 = time.monotonic()
    rc, _ = run_grpo(argv, work / "logs" / "train-grpo.out")
    if rc != 0:
        raise SystemExit(f"train: train/grpo.py exited {rc}; its stderr is in this stage's log")
    summary = _read(out / "run_summary.json")
    split = summary["step_split_s"]
    figs = step_figures(log_rows((work / "logs" / "train-grpo.out").read_text()), s["batch"])
    res: dict[str, Any] = {"wall_s": round(time.monotonic() - t0, 1), "global_step": summary["global_step"],
                           "generation": summary["generation"], "step_split_s": split, **figs,
                           "memory": summary.get("memory"), "precision": summary.get("precision")}
    if figs["completion_mean_tokens"] and split.get("generation"):
        res["generation_tokens_per_s"] = round(s["batch"] * figs["completion_mean_tokens"] / split["generation"], 1)
    machine = _read(work / "stages" / "machine.json")
    bf16 = bool((summary.get("precision") or {}).get("train_bf16"))
    peak = machine.get("matmul_bf16_flop_s" if bf16 else "matmul_fp32_flop_s")  # the dtype the run computed in
    if figs["tokens_per_step"] and split.get("train") and peak:
        shape = Shape.from_config(AutoConfig.from_pretrained(settings["model"]))
        res["mfu_optimisation"] = round(mfu(shape, figs["tokens_per_step"], s["batch"], split["train"], peak), 4)
        res["mfu_peak"] = {"dtype": "bfloat16" if bf16 else "float32", "flop_s": peak}
    ev = summary.get("eval") or {}
    if ev:
        res["eval"] = {"proofs": ev.get("n_proofs"), "passes": ev.get("n_passes"), "seconds": ev.get("seconds"),
                       "generation": ev.get("generation"), "max_new_tokens": s["completion"],
                       "passes_per_s": round(ev["n_passes"] / ev["seconds"], 3) if ev.get("seconds") else None,
                       EVAL_VALID_RATE: ev.get(EVAL_VALID_RATE)}
    plan = _read(work / "stages" / "plan.json")
    mem = (summary.get("memory") or {}).get("max_memory_allocated_gib")
    if mem and plan.get("peak_gib"):
        res["plan_vs_measured"] = {"plan_peak_gib": plan["peak_gib"], "max_memory_allocated_gib": mem,
                                   "measured_over_plan": round(mem / plan["peak_gib"], 3)}
    res["checkpoint"] = str(out / f"checkpoint-{summary['global_step']}")
    save(res)


def resume_stage(settings: dict[str, Any], save: Callable[[dict[str, Any]], None]) -> None:
    """SIGKILL between two checkpoints, then a resume from the newest complete one (module docstring)."""
    from proofcheck.train.checkpoints import MARKER, checkpoint_folders, last_complete

    work = Path(settings["work"])
    out = work / "train"
    start = last_complete(out)
    if start is None:
        raise SystemExit(f"resume: no complete checkpoint in {out} (the train stage saves one at its last step)")
    first = int(start.name.split("-")[1])
    res: dict[str, Any] = {"resumed_first_from": start.name}
    save(res)

    def new_checkpoint() -> bool:  # one more checkpoint marked complete: the run is between two checkpoints
        return any(step > first and (folder / MARKER).is_file() for step, folder in checkpoint_folders(out))

    rc, killed = run_grpo(grpo_argv(settings, out, first + 3, 1, evaluate=False, resume=True),
                          work / "logs" / "resume-killed.out", kill_when=new_checkpoint)
    if not killed:
        raise SystemExit(f"resume: the run ended (exit {rc}) before a checkpoint after step {first} was marked "
                         "complete, so it could not be killed between checkpoints")
    newest = last_complete(out, say=lambda msg: res.setdefault("skipped", []).append(msg))
    res.update(killed_returncode=rc, newest_complete=newest.name,
               folders_after_kill=[p.name for _, p in checkpoint_folders(out)])
    save(res)
    step = int(newest.name.split("-")[1])
    rc, _ = run_grpo(grpo_argv(settings, out, step + 1, 1, evaluate=False, resume=True),
                     work / "logs" / "resume-final.out")
    if rc != 0:
        raise SystemExit(f"resume: the resumed run exited {rc}; its stderr is in this stage's log")
    summary = _read(out / "run_summary.json")
    steps = [r["step"] for r in summary.get("rewards", [])]
    res.update(resumed_from=Path(summary["resumed_from"]).name, start_step=summary["start_step"],
               global_step=summary["global_step"], reward_steps=steps)
    problems = []
    if res["resumed_from"] != newest.name or summary["start_step"] != step or summary["global_step"] != step + 1:
        problems.append(f"expected a resume from {newest.name} (step {step}) to step {step + 1}")
    if steps != list(range(1, step + 2)):
        problems.append(f"reward history has steps {steps}, expected 1..{step + 1} once each")
    res["ok"] = not problems
    save(res)
    if problems:
        raise SystemExit("resume: " + "; ".join(problems))
