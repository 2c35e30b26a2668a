"""The demo's sizes (`DemoConfig`) and its modes: the default 20-minute demo, the long CPU recipe
(`full_recipe`) and the tiny-model check (`quick`). The GRPO values are the recipe YAML's plus each mode's
named deltas (`DEMO_DELTAS`, `FULL_DELTAS`, `QUICK_DELTAS`); the rest (SFT, curriculum, scoring, budget) are
the demo's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofcheck.app.launch import Delta, fill_from_recipe, recipe_record
from proofcheck.data.families import family_choice, family_selection, resolve

# DemoConfig field -> the recipe YAML key it reads (None in DemoConfig: the recipe's value, its mode's delta applied)
RECIPE_FIELDS = {"grpo_steps": "max_steps", "grpo_lr": "learning_rate", "eval_tasks": "eval_max_samples",
                 "eval_passes": "eval_passes", "curve_every": "eval_every_steps", "prompt_style": "prompt_style"}
# the GRPO measured to teach checking from the 64-step chains warm-up, shared by the demo, the long recipe and the
# full ablation's arms
GRPO_THAT_CHECKS = {
    "learning_rate": Delta(2e-4, "from the 64-step chains warm-up with the 64-proof pool: +.056 / +.068 in 40 steps "
                                 "(two seeds; 1e-4: +.024); 3e-4 undid a checking warm-up"),
    "uncertainty_pool": Delta(64, "every disagreeing proof queued (~14 of 64; 24 queues 20 of 24, ~6 disagreeing)"),
}
# each mode's deliberate differences from its recipe YAML (printed at the start, recorded in summary.json `recipe`)
DEMO_DELTAS = {
    "max_steps": Delta(48, "the most: the demo runs at least 40 (+0.05 needs ~40) and more where they fit in 20 "
                           "minutes on this machine (app/demo_estimate.py)"),
    **GRPO_THAT_CHECKS,
    "eval_every_steps": Delta(8, "a learning-curve point every 8 GRPO steps: 6 points in 40 steps (every 4 cost "
                                 "~10 x 64 passes)"),
}
FULL_DELTAS = {
    "max_steps": Delta(200, "the most; the 90-minute budget decides"),
    **GRPO_THAT_CHECKS,
    "eval_max_samples": Delta(128, "128 held-out proofs x 4 passes before and after GRPO"),
    "eval_every_steps": Delta(15, "a learning-curve point every 15 GRPO steps (32 proofs x 4 passes, ~40 s: every 10 "
                                  "cost 14 x 40 s, ~17 steps)"),
}
# the long recipe on all six families (issue 49): what a 90-minute six-family run needs is warm-up steps (256
# steps: .70 and still rising; the chains' GRPO at 2e-4 lowered it, -.037), so SFT gets 3/4 of the time and GRPO
# a gentler rate over 32 held-out proofs per family
SIX_FAMILY_DELTAS = {
    **FULL_DELTAS,
    "learning_rate": Delta(1e-4, "six families: 2e-4 lowered a .70 six-family warm-up (-.037 +- .013, TNR -.057)"),
    "eval_max_samples": Delta(192, "32 held-out proofs per family x 4 passes before and after GRPO"),
}
# the recomputed gold rationale (`--rationale recomputed`) is about twice the checks' tokens: parity's longest
# training verification is ~360 tokens (the checks' ~170), so GRPO and the held-out evaluation may write more
RECOMPUTED_TOKENS = 400
RECOMPUTED_DELTAS = {
    key: Delta(RECOMPUTED_TOKENS, "the recomputed rationale: the longest training verification is ~360 tokens")
    for key in ("max_completion_length", "eval_max_new_tokens")
}
QUICK_DELTAS = {
    "max_steps": Delta(8, "a pipeline check in a few minutes"),
    "learning_rate": Delta(5e-4, "the tiny random model: a visible move in 8 steps"),
    "eval_max_samples": Delta(16, "the demo's held-out set: 16 proofs"),
    "eval_every_steps": Delta(3, "a learning-curve point every 3 GRPO steps, as the demo"),
    "prompt_style": Delta("compact", "the demo's style in every stage; the tiny recipe leaves train's default"),
}


@dataclass
class DemoConfig:
    """Sizes of the demo. The defaults (the real model) fit in 20 minutes on a 2-core CPU machine;
    `quick()` gives the tiny-model pipeline check.

    The GRPO values of `RECIPE_FIELDS` are the recipe YAML's with the mode's `deltas` applied (None here: not
    restated); a value given explicitly (the command line's sizes) wins and is recorded as one more delta."""

    workdir: Path = Path("runs/demo")
    model: str = "smollm2"        # smollm2 (real) or tiny (random weights)
    seed: int = 0
    sft_tasks: int = 1024         # 128 steps of 8 without repeating a task
    grpo_tasks: int = 512
    dev_tasks: int = 64           # for choosing settings; never the held-out set
    eval_tasks: int | None = None  # held-out tasks for the before/after measurement (recipe: eval_max_samples)
    eval_passes: int | None = None  # (recipe: eval_passes)
    sft_steps: int = 48           # the most; the time budget decides. 48 steps (Bal-F1 .67-.78 on seeds 0-2) leave GRPO
                                  # room: 40 steps gained +.089 / +.049 / +.057, TNR held (2026-12-07). From 64 steps
                                  # (.74-.89) they gained +.074 / +.045 / +.004 and a reject-biased start lost TNR
                                  # (-.086); a longer warm-up ends higher (64 + 40 GRPO: .82-.89; the long recipe keeps 64)
    sft_lr: float = 1e-3
    sft_lora_r: int = 16          # 0 = full fine-tuning
    sft_lora_layers: int | None = None   # every layer: the top 10 alone learned the format worse (dev: valid .28 vs .79)
    grpo_steps: int | None = None  # the most; the time budget decides (recipe: max_steps)
    grpo_lr: float | None = None  # (recipe: learning_rate)
    recipe: str = "configs/grpo/smollm2-cpu.yaml"
    deltas: dict[str, Delta] = field(default_factory=lambda: dict(DEMO_DELTAS))  # recipe key -> this mode's value
    passes: int = 8               # verification passes when scoring
    repeats: int = 1              # verifier repeats per shipped annotated proof (a pipeline check)
    prover_n: int = 40            # synthetic prover: submissions from the dev set (proofs no stage trained on)
    prover_rate: float = 0.6      # ... of which this share is valid: the true score the verifier is read against
    max_tokens: int | None = None  # serving's token budget; None: the recipe's eval_max_new_tokens
    grpo_overrides: list[str] = field(default_factory=list)
    dtype: str | None = None      # None: PROOFCHECK_DTYPE, else the machine's (proofcheck.precision)
    budget_s: float | None = None  # None: the demo runs its steps (`grpo_floor` GRPO steps at least) and says first
                                   # how long that takes here; a number: the wall clock the steps are sized to fit
    grpo_floor: int | None = 40   # the fewest GRPO steps without a budget (None: exactly grpo_steps)
    score_reserve_s: float = 480.0   # kept for serving + scoring (AVX2 fp32 host, 2 passes x 1 repeat: 365-496 s)
    score: bool = True            # serve the trained model and score through it (step 6); False (--no-score): the
                                  # held-out evaluations are the measurement (leave one family out) and the reserve
                                  # goes to training
    sft_share: float = 0.8        # of the training time left after the reserve: the warm-up is what teaches checking
                                  # (chains, avx512_bf16 host: 48 steps Bal-F1 .58, 77 steps .88); GRPO also gets
                                  # what serving and scoring leave of their reserve
    ref_sft_step_s: float = 11.0  # the SFT step where the default sizes fit: avx512_bf16 host, 2 cores (196 s / 16
                                  # steps with load and save); a slower first step scales evaluation and scoring down
                                  # (0: never scale: the long recipe keeps its 128 x 4 held-out evaluation)
    families: str | None = None   # proof families (proofcheck.data.families): None = arithmetic chains only, "all",
                                  # "linear,parity,...". 20 minutes of 2 cores is ~600 warm-up proofs: over six
                                  # families (~100 each) nothing checks (Bal-F1 .30), on chains alone it does (.88)
    exclude_family: str | None = None   # left out of SFT and GRPO only: the held-out and dev sets keep it
    prompt_style: str | None = None  # verifier prompt (proofcheck.protocol): the same in SFT, GRPO, evaluation and
                                     # serving (written into the model folder); the recipe's (compact halves the
                                     # prompt tokens)
    curve_every: int | None = None  # GRPO steps between learning-curve points (0: only before and after)
    curve_tasks: int = 16         # held-out proofs of each curve point (the first ones of the held-out set)
    full: bool = False            # the long CPU recipe (`full()`), judged against its own targets
    fit_eval: bool = True         # the long recipe cuts its held-out evaluation on a slow host (its two runs take at
                                  # most half of GRPO's time: `Plan._fit_long_evaluation`); False keeps every proof,
                                  # as `--eval-tasks` asks (leave one family out: the held-out set is the measurement)
    sft_varied: float = 0.0       # share of the SFT set drawn beyond the plain training proofs (families only): numbers
                                  # 3x, every family a step longer (data.heldout.VARIED_TRAINING); the harder
                                  # held-out stays beyond both (10x, 3 steps more)
    rationale: str = "checks"     # the SFT rows' gold verification (proofcheck.data.rationale): "checks", each
                                  # family's shorthand, or "recomputed", one form in every family (about 2x the
                                  # tokens: GRPO and evaluation then generate up to RECOMPUTED_TOKENS)

    def __post_init__(self) -> None:
        from proofcheck.data.rationale import RATIONALE_FORMS

        if self.rationale not in RATIONALE_FORMS:
            raise ValueError(f"rationale {self.rationale!r}: choose one of {', '.join(RATIONALE_FORMS)}")
        if not 0 <= self.sft_varied < 1 or (self.sft_varied and not self.families):
            raise ValueError(f"sft_varied={self.sft_varied}: a share in [0, 1) of a family curriculum's SFT set "
                             "(families set, e.g. all); 0 keeps every SFT proof plain")
        if self.rationale == "recomputed":
            self.deltas = {**RECOMPUTED_DELTAS, **self.deltas}
        if not self.score:
            self.score_reserve_s = 0.0   # nothing to serve or score: SFT's share and GRPO get the time
        values = fill_from_recipe(self, RECIPE_FIELDS)
        if self.max_tokens is None:
            self.max_tokens = values["eval_max_new_tokens"]

    @property
    def chains_only(self) -> bool:
        """Neither --families nor --exclude-family: the historical arithmetic-chain draws (`disjoint_splits`
        without families)."""
        return not (self.families or self.exclude_family)

    def held_out_families(self) -> tuple[str, ...]:
        """The families the held-out (eval and dev) sets draw: a left-out family is kept there."""
        chosen = family_selection(self.families)
        return ("chain",) if self.chains_only else resolve(None if chosen == "all" else chosen)

    @property
    def recipe_summary(self) -> dict[str, Any]:
        """The recipe and its deltas, as summary.json records them (`recipe`)."""
        return recipe_record(self.recipe, self.deltas)

    @classmethod
    def full_recipe(cls, **kw: Any) -> DemoConfig:
        """The long CPU recipe (`proofcheck demo --full`, `make train-cpu`): SmolLM2-135M, 90 minutes, 4 passes
        per held-out proof before and after GRPO, a learning-curve point on 32 of them every 15 GRPO steps. By
        default one verifier for all six families (`SIX_FAMILY_FULL`: the recomputed rationale, an SFT-first
        split); `families=None` (`--families chain`) is the chains recipe (`CHAIN_FULL`: a 64-step warm-up, GRPO
        for the rest). Step counts are the most; the budget sizes them."""
        base = dict(workdir=Path("runs/train-cpu"), full=True, budget_s=5400.0, grpo_tasks=1024, dev_tasks=64,
                    score_reserve_s=720.0, curve_tasks=32, passes=4, repeats=1, ref_sft_step_s=0.0, grpo_floor=None)
        chains = "families" in kw and family_choice(kw["families"]) is None
        base.update(CHAIN_FULL if chains else SIX_FAMILY_FULL)   # (fill_from_recipe copies the deltas)
        base.update(kw)
        return cls(**base)

    @classmethod
    def quick(cls, **kw: Any) -> DemoConfig:
        """The tiny random model: every stage in a few minutes, numbers are a pipeline check only."""
        base = dict(model="tiny", families="all", sft_tasks=128, grpo_tasks=64, sft_steps=60, sft_lr=3e-3,
                    sft_lora_r=0, sft_lora_layers=None, recipe="configs/grpo/tiny-cpu.yaml", deltas=dict(QUICK_DELTAS),
                    max_tokens=96,  # serving's budget (the tiny recipe's evaluation stops at 48 tokens)
                    budget_s=1200.0, grpo_floor=None, prover_n=8)
        base.update(kw)
        return cls(**base)


# the long recipe's two forms (`DemoConfig.full_recipe`): every family (the default) or the chains alone
SIX_FAMILY_FULL: dict[str, Any] = dict(families="all", rationale="recomputed", sft_tasks=7200, sft_steps=900,
                                       sft_share=0.75, sft_varied=0.3, deltas=SIX_FAMILY_DELTAS)
CHAIN_FULL: dict[str, Any] = dict(families=None, sft_tasks=2048, sft_steps=64, sft_share=0.5, deltas=FULL_DELTAS)
