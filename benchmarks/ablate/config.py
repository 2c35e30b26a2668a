"""The ablation's sizes and arms (`AblateConfig`, `ARMS`, the overrides that make an arm), and the small
helpers every stage uses: the console, the logged subprocess runner, a JSONL writer."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from proofcheck.app.demo_config import GRPO_THAT_CHECKS
from proofcheck.app.launch import Delta, fill_from_recipe

REPO = Path(__file__).resolve().parents[2]
INCENTIVE_ARMS = ("training", "benchmark", "balanced", "polarity")
ARMS = (*INCENTIVE_ARMS, "repaired", "sft_control", "rejection")
CONTROL_ARMS = ("sft_control", "rejection")  # no GRPO of their own: trained for the reference arm's GRPO time
REFERENCE = "training"
TITLES = {"training": "(a) graded, training scale 1/0.5/0.25/0 (the paper's)",
          "benchmark": "(b) graded, benchmark scale 1/0.75/0.5/0",
          "balanced": "(c) balanced: right polarity 1, a rejection's grade centred per group",
          "polarity": "(d) polarity only: 1 if accept/reject is right",
          "repaired": "data: repaired positives in place of valid rows, same row count (training scale)",
          "sft_control": "control: SFT continued for the GRPO stage's wall-clock time (steps: SFT steps)",
          "rejection": "rejection sampling: the start's own passes on GRPO tasks kept at EXACT_MATCH by the "
                       "meta-verifier, then SFT on them, for the GRPO stage's wall-clock time (steps: SFT steps)"}
OVERRIDES = {**{a: ["--reward_scale", a] for a in INCENTIVE_ARMS}, "repaired": [], "sft_control": [], "rejection": []}
MIN_RUN_S = 240.0     # a GRPO run shorter than this is mostly its fixed cost (start, evaluation, save)
CONTROL_RUNS = 1.5    # the SFT control (and the rejection arm) costs about 1.5 GRPO runs (its SFT + a one-step evaluation)
KPASS_RESERVE_S = 300.0


# AblateConfig field -> the recipe YAML key it reads (None in AblateConfig: the recipe's value with the deltas)
RECIPE_FIELDS = {"steps": "max_steps", "grpo_lr": "learning_rate", "eval_tasks": "eval_max_samples",
                 "eval_passes": "eval_passes", "prompt_style": "prompt_style"}
# the full run compares the incentives where GRPO was measured to teach checking: the long recipe's GRPO (2e-4, the
# 64-proof pool) from the 64-step warm-up, 40 steps (+.056 / +.068 with the training scale, seeds 0 / 1, E3 / E4 of
# docs/measurements/2026-12-05-grpo-signal.md); at the YAML's 3e-4 a checking warm-up came undone
FULL_DELTAS = {"max_steps": Delta(40, "every arm's most GRPO steps (a budget cuts them): E3 / E4 needed 40 for +.06"),
               **GRPO_THAT_CHECKS,
               "eval_max_samples": Delta(128, "128 held-out proofs x 4 passes: standard errors small enough to "
                                              "compare arms")}
QUICK_DELTAS = {"max_steps": Delta(24, "as many as fit 30 minutes, at most 24"),
                "eval_max_samples": Delta(32, "32 held-out proofs x 4 passes: fits 30 minutes")}


@dataclass
class AblateConfig:
    """Sizes of one ablation run. `quick()` fits 30 minutes; the defaults are the full one. The GRPO values
    of `RECIPE_FIELDS` are the recipe YAML's with `deltas` applied (every arm: that plus its `OVERRIDES`)."""

    model: str = "smollm2"
    out: Path = Path("runs/ablate")
    report_dir: Path = REPO / "benchmarks"
    seeds: list[int] = field(default_factory=lambda: [0, 1])
    steps: int | None = None      # GRPO steps of every arm (the most, with a budget; recipe: max_steps)
    budget_s: float | None = None  # the whole run's wall clock; None: no fitting (every seed, `steps` steps)
    families: str | None = None   # None: the demo's arithmetic chains (the warm-up checks there); "all" or names
    # the warm-up every arm starts from: on chains 48 steps give held-out Bal-F1 ~0.58 (room to learn, some
    # checking), 64 steps ~0.81 (the long recipe's start, where GRPO gained +.088 in 128 steps), 77 steps ~0.88
    # (docs/measurements/2026-12-05-demo-chains.md); 32 six-family steps gave ~0.3
    sft_tasks: int = 640
    sft_steps: int = 64
    sft_lr: float = 1e-3
    sft_lora_r: int = 16
    grpo_tasks: int = 512
    grpo_lr: float | None = None  # (recipe: learning_rate)
    eval_tasks: int | None = None  # (recipe: eval_max_samples)
    eval_passes: int | None = None  # (recipe: eval_passes)
    repair_pairs: int = 32        # flawed proofs sent to the repair path
    repaired_share: float = 0.25  # of the valid training rows replaced by repaired positives
    rejection_tasks: int = 128    # GRPO tasks the rejection arm samples verifications of (the first ones)
    rejection_passes: int = 4     # its verifications sampled per task (kept at EXACT_MATCH)
    kpass_tasks: int = 64         # held-out proofs of the k-pass curve (the first ones)
    kpass_max: int = 8
    max_tokens: int = 160
    recipe: str = "configs/grpo/smollm2-cpu.yaml"
    deltas: dict[str, Delta] = field(default_factory=lambda: dict(FULL_DELTAS))  # recipe key -> this run's value
    prompt_style: str | None = None  # (recipe: prompt_style)
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    extra_overrides: list[str] = field(default_factory=list)  # for every GRPO run (tests: --use_vllm false)
    rejection_endpoint: str | None = None  # the rejection arm samples there instead of serving the start (tests)

    def __post_init__(self) -> None:
        fill_from_recipe(self, RECIPE_FIELDS)

    @classmethod
    def quick(cls, **kw: Any) -> AblateConfig:
        base = dict(seeds=[0, 1], budget_s=1800.0, sft_tasks=384, sft_steps=48, grpo_tasks=256,
                    deltas=dict(QUICK_DELTAS), repair_pairs=16, kpass_tasks=16,
                    arms=[a for a in ARMS if a not in ("repaired", "rejection")])
        return cls(**{**base, **kw})


def _tiny(cfg: AblateConfig) -> AblateConfig:
    """`cfg` on the tiny model with the demo's tiny-model settings (`DemoConfig.quick`): its recipe, its learning
    rate and prompt style deltas, its SFT and serving settings; the ablation's own sizes kept."""
    from proofcheck.app.demo import DemoConfig

    demo = DemoConfig.quick()
    deltas = {**cfg.deltas, **{k: demo.deltas[k] for k in ("learning_rate", "prompt_style")}}
    kept = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name not in RECIPE_FIELDS}
    return AblateConfig(**{**kept, "recipe": demo.recipe, "deltas": deltas, "sft_lr": demo.sft_lr,
                           "sft_lora_r": demo.sft_lora_r, "max_tokens": demo.max_tokens})


def console() -> Any:
    from rich.console import Console

    return Console()


def run_logged(cmd: list[str], log: Path, env: dict[str, str], console: Any) -> float:
    """Run a subprocess with the launcher's runner (output kept in `log`, its `[proofcheck]` and loss lines
    shown); return its seconds."""
    from proofcheck.app.launch import run_logged as run

    def show(line: str) -> None:
        if "[proofcheck]" in line or line.startswith("{'loss'"):
            console.print("  " + line.strip()[:160], style="dim", markup=False, highlight=False)

    return run(cmd, log, env, show)


def jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
