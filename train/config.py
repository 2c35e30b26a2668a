"""Our script arguments for `train/grpo.py`, next to TRL's `GRPOConfig` and `ModelConfig`.

One config path (STYLE 3): `TrlParser` parses these three dataclasses from
`--config configs/grpo/<recipe>.yaml` plus CLI overrides. Help lives on each field;
`__post_init__` validates what can be checked from the values alone (ratios, choices),
`check_compatible` what needs the other dataclasses too (reward weights, adapter saving) and
`check_paths` that the data files exist. Both raise `ConfigError` with the fix in the message, before any model,
tokenizer or dataset is loaded.

This module is light (dataclasses only) so `python train/grpo.py --help` stays instant.

Example:
    >>> args = ProofcheckScriptArguments(synthetic_count=8)
    >>> args.reward_funcs
    ['meta_verifier', 'format']
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofcheck.data.assembly import ORIGINS
from proofcheck.protocol import DEFAULT_PROMPT_STYLE, PROMPT_STYLES

REWARD_MODES = ("structural", "judge", "hybrid")
REWARD_SCALES = ("training", "benchmark", "balanced", "polarity")  # proofcheck.reward.levels.INCENTIVES
UNCERTAINTY_DRAWS = ("pairs", "by_split")  # train/uncertainty.py: how the pool's candidates split by class


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the field and says how to fix it."""


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass
class ProofcheckScriptArguments:
    """What to train on, how to reward it, how to evaluate and what to save."""

    # --- data -------------------------------------------------------------------------------
    expert_files: list[str] = field(default_factory=list, metadata=_help(
        "Expert-annotated proofs: annotated-proof JSONL files, or folders saved by `proofcheck data build` "
        "(a datasets DatasetDict with train/eval splits). Rows without an `origin` count as expert."))
    repaired_files: list[str] = field(default_factory=list, metadata=_help(
        "Repaired proofs (origin `repaired`), same formats as expert_files."))
    synthetic_count: int = field(default=0, metadata=_help(
        "Number of synthetic tasks with exact labels to add (proofcheck.data.synth), in valid/flawed pairs of the "
        "families in synthetic_families; 0 = none."))
    synthetic_families: list[str] = field(default_factory=lambda: ["chain"], metadata=_help(
        "Proof families of the synthetic tasks (proofcheck.data.families: chain, prose, linear, expand, parity, "
        "inequality) or `all`. Default: arithmetic chains only."))
    mix_ratios: list[float] | None = field(default=None, metadata=_help(
        "Relative share of expert, repaired and synthetic rows in the training set, three numbers "
        "(e.g. `0.6 0.4 0`). Unset = every training row once. Set = rows are drawn per origin in these "
        "proportions: train_size rows, or as many as possible without repeating a row."))
    train_size: int | None = field(default=None, metadata=_help(
        "Training-set size when mix_ratios is set (origins that are too small are repeated). Unset = the "
        "largest size that repeats no row."))
    balanced_batches: bool = field(default=False, metadata=_help(
        "Order the training rows as (valid, flawed) pairs so every GRPO batch of an even number of prompts is half "
        "valid, which guards against drifting to always-accept or always-reject. Needs shuffle_dataset: false (the "
        "trainer's own shuffling would undo the order) and an even number of prompts per batch "
        "(per_device_train_batch_size / num_generations)."))
    mix_seed: int = field(default=0, metadata=_help(
        "Seed for synthetic tasks, the eval hold-out and the mix (the training seed is GRPOConfig.seed)."))
    include_reference_solution: bool = field(default=False, metadata=_help(
        "Show the problem's reference solution in the verifier prompt when the record has one. Off by default, "
        "as `proofcheck score verifier` evaluates (and the release's VerifierBench); turn both on together "
        "(`score verifier --with-reference`). Recorded in run_summary.json and in each saved model folder "
        "(proofcheck_prompt.json); `score verifier` warns when the two settings differ."))
    prompt_style: str = field(default=DEFAULT_PROMPT_STYLE, metadata=_help(
        "Verifier prompt style (proofcheck.protocol.PROMPT_STYLES): `full` (the long instructions) or `compact` "
        "(~52 fixed tokens instead of ~145 with SmolLM2's tokenizer; problem and proof rendered the same). "
        "Used for training and held-out evaluation prompts, and written into each saved model folder "
        "(proofcheck_prompt.json), from which `serve`, `verify` and `score verifier` take it by default."))

    # --- which prompts GRPO trains on ------------------------------------------------------------
    uncertainty_pool: int = field(default=0, metadata=_help(
        "Draw GRPO prompts where the current model is uncertain (train/uncertainty.py): every uncertainty_every "
        "steps, and before the first, verify this many training proofs with uncertainty_passes passes on the "
        "trainer's own generation and train next on those whose passes disagree (a group whose completions all "
        "earn the same reward teaches nothing). Larger than the prompts of a step; 0 = off (the dataset's order)."))
    uncertainty_passes: int = field(default=4, metadata=_help(
        "Sampled passes per pool proof when drawing uncertain prompts (uncertainty_pool)."))
    uncertainty_every: int = field(default=2, metadata=_help(
        "Optimizer steps between two refreshes of the uncertainty pool."))
    uncertainty_draw: str = field(default="pairs", metadata=_help(
        "How the pool's candidates split between valid and flawed proofs (with balanced_batches; the queue stays "
        "in valid/flawed pairs either way). `pairs`: half each. `by_split`: each refresh draws more of the class "
        "whose passes split between accept and reject less often (share 1/4 to 3/4, from the last refresh), so "
        "the queue holds as many proofs that can teach acceptance as rejection (train/uncertainty.py)."))

    # --- held-out evaluation ----------------------------------------------------------------
    eval_split: str = field(default="eval", metadata=_help(
        "Name of the evaluation split inside DatasetDict folders; such a split is used as the eval set."))
    eval_fraction: float = field(default=0.1, metadata=_help(
        "Share of problems held out for evaluation from JSONL and synthetic data (split by problem: no problem "
        "in both sets). 0 = no hold-out."))
    eval_max_samples: int = field(default=32, metadata=_help(
        "At most this many held-out proofs are verified at each evaluation."))
    eval_passes: int = field(default=4, metadata=_help(
        "k: sampled verifier passes per held-out proof at each evaluation."))
    eval_every_steps: int = field(default=0, metadata=_help(
        "Run the k-pass held-out evaluation every N optimizer steps, and always at the end. 0 = only at the end. "
        "(TRL's own eval_strategy/eval_steps, if set, additionally run GRPOTrainer.evaluate on the same split.)"))
    eval_curve_samples: int = field(default=0, metadata=_help(
        "Learning curve: the evaluations every eval_every_steps verify only the first N held-out proofs (the "
        "same N every time; the full evaluations at the start and end contribute the same N proofs' point), so "
        "the curve costs N/eval_max_samples of a full evaluation per point. 0 = every evaluation is full. "
        "Written to run_summary.json as `curve`."))
    eval_max_new_tokens: int = field(default=256, metadata=_help(
        "Token budget of each evaluation pass (a pass cut off by it is invalid)."))
    eval_temperature: float = field(default=1.0, metadata=_help("Sampling temperature of evaluation passes."))
    eval_constrain_format: bool = field(default=False, metadata=_help(
        "Constrain evaluation passes to the answer format with vLLM structured outputs (needs use_vllm with "
        "vllm_mode colocate): every pass parses, so the evaluation measures decisions, not format."))
    eval_at_start: bool = field(default=False, metadata=_help(
        "Also run the k-pass held-out evaluation before the first step (the starting point; same tasks and "
        "sampling seed as every later evaluation, so before/after compare)."))
    eval_batch_size: int = field(default=4, metadata=_help(
        "Proofs per model.generate() call during evaluation with transformers generation (each with eval_passes "
        "sequences). The vLLM engines take every proof of an evaluation at once and run the passes in waves of their "
        "max_num_seqs (TRL sizes the colocated engine's from per_device_train_batch_size x steps_per_generation: a "
        "64 x 4 evaluation of long thinking passes runs in several waves, each as long as its longest pass)."))

    # --- rewards ----------------------------------------------------------------------------
    reward_funcs: list[str] = field(default_factory=lambda: ["meta_verifier", "format"], metadata=_help(
        "Reward functions: names from proofcheck.reward.functions.REWARD_FUNCTIONS (meta_verifier, format, polarity) "
        "or dotted paths `package.module:Class`. Weights: GRPOConfig.reward_weights, one per function."))
    reward_mode: str = field(default="structural", metadata=_help(
        "Meta-verifier grader: structural (step indices, no model), judge (LLM judge) or hybrid "
        "(min of both). judge/hybrid need judge_endpoint and judge_model."))
    reward_scale: str = field(default="training", metadata=_help(
        "The meta-verifier's accept/reject incentive (README \"Rewards\"): training (1/0.5/0.25/0, the paper's: "
        "accepting pays until the model believes a proof flawed with p > 0.8 at a poorly located rejection), "
        "benchmark (1/0.75/0.5/0), balanced (right polarity 1, a rejection's grade centred on its group's mean: "
        "accept and reject break even at p = 0.5 whatever the grade) or polarity (right polarity 1, else 0). "
        "training is the default by measurement: of the four, the two-seed ablation (benchmarks/ablate, docs/results.md "
        "\"What the ablations show\") found its held-out Balanced F1 gain the largest that kept TNR."))
    judge_endpoint: str | None = field(default=None, metadata=_help(
        "OpenAI-compatible base URL of the judge (e.g. a vLLM server, http://host:8001/v1)."))
    judge_model: str | None = field(default=None, metadata=_help("Model name the judge endpoint serves."))
    judge_api_key_env: str | None = field(default=None, metadata=_help(
        "Environment variable holding the API key sent to judge_endpoint (as `--judge-api-key-env` in "
        "`proofcheck grade` / `score verifier`); must be set when named."))

    # --- model ------------------------------------------------------------------------------
    model_build: str | None = field(default=None, metadata=_help(
        "The command that builds model_name_or_path when the recipe expects a local folder (e.g. "
        "`proofcheck model smollm2 --out runs/smollm2`): a missing folder then stops the run before anything "
        "loads, naming this command."))

    lora_layers: int | None = field(default=None, metadata=_help(
        "With LoRA: adapt only the top N transformer layers (peft layers_to_transform). The backward pass then "
        "stops at the lowest adapted layer: on a 2-core CPU, SmolLM2-135M's forward+backward took 8 s instead of "
        "18-24 s with the top 10 of 30 layers. Needs lora_target_modules as module names (not all-linear)."))

    completion_logits: bool = field(default=True, metadata=_help(
        "On CPU, compute GRPO's log-probabilities at the completion tokens only (train/logprobs.py): a group's "
        "rows per forward cut to their own width, the vocabulary projection and log-softmax on real completion "
        "tokens only. TRL's fused LM head projects every padded position there (Triton-less devices); on the "
        "SmolLM2 CPU recipe (bf16, 2 cores) the training pass took 11 s instead of 30 s, same loss and gradients "
        "(tests/integration/test_grpo_logprobs.py). No effect on CUDA, where TRL's head already does it. "
        "false = TRL's path."))

    completion_logits_shared_prompt: bool = field(default=True, metadata=_help(
        "With completion_logits: forward a group's prompt once, not once per completion (train/logprobs.py "
        "shared_prompt_hidden): its key/value cache, repeated for each completion, is their context, and the "
        "gradient reaches the prompt's keys and values through it, so loss and gradients are the full rows'. "
        "The prompt is ~3/4 of a step's tokens on the SmolLM2 CPU recipe. Not with gradient checkpointing "
        "(no cache there). false = each row forwarded whole."))

    vllm_cpu_packed_kernels: bool = field(default=True, metadata=_help(
        "vLLM-CPU colocate only (train/vllm_cpu_fix.py): keep vLLM's packed GEMM kernels (oneDNN / sgl) and "
        "pack the engine's layers again after every weight sync (~0.1 s for SmolLM2-135M). On the SmolLM2 CPU "
        "recipe (bf16, 2 cores) 16 completions took 4.6 s instead of 6.7 s. false = plain F.linear on the "
        "synced weights (the previous path). No effect on GPU builds of vLLM."))

    flush_denormal: bool = field(default=True, metadata=_help(
        "Flush denormal floats to zero on the CPU before training (proofcheck.precision.flush_denormals): LoRA "
        "weights growing from zero and tiny Adam moments are denormal for a while, and x86 computes those in "
        "microcode. Same losses either way. Speed on the bf16 CPU host is not settled: 24 SFT steps ran 1.13x faster "
        "flushed in two runs and 0.95x in a third; 10 GRPO steps showed no difference (benchmarks/train_real.py "
        "--denormals). Only the CPU's arithmetic "
        "(not CUDA kernels). false = the CPU's default (denormals kept)."))

    time_budget_s: float | None = field(default=None, metadata=_help(
        "Wall-clock seconds the whole run may take, counted from the process start (model load, vLLM start and "
        "evaluations included): after each step, training stops if one more step plus the final evaluation and "
        "save would pass it (train/budget.py). max_steps stays the most it runs. Unset = no budget."))

    # --- saving -----------------------------------------------------------------------------
    save_merged: bool = field(default=True, metadata=_help(
        "Save a full model (LoRA merged into the base) with its tokenizer to <output_dir>/merged."))
    save_adapter: bool = field(default=True, metadata=_help(
        "With LoRA (use_peft): also save the adapter with the tokenizer to <output_dir>/adapter."))

    def __post_init__(self) -> None:
        self.expert_files = _as_list(self.expert_files)
        self.repaired_files = _as_list(self.repaired_files)
        self.reward_funcs = _as_list(self.reward_funcs)
        errors = [*self._check_data(), *self._check_eval(), *self._check_rewards()]
        if errors:
            raise ConfigError("invalid training configuration:\n  - " + "\n  - ".join(errors))

    def _check_data(self) -> list[str]:
        errs = []
        if not self.expert_files and not self.repaired_files and self.synthetic_count <= 0:
            errs.append("no training data: set expert_files and/or repaired_files (JSONL files or "
                        "`proofcheck data build` folders), or synthetic_count > 0")
        if self.synthetic_count < 0:
            errs.append(f"synthetic_count={self.synthetic_count}: must be >= 0")
        if self.mix_ratios is not None:
            r = [float(x) for x in self.mix_ratios]
            if len(r) != len(ORIGINS) or any(x < 0 for x in r) or sum(r) <= 0:
                errs.append(f"mix_ratios={self.mix_ratios}: give three non-negative numbers for {', '.join(ORIGINS)} "
                            "with a positive sum, e.g. `mix_ratios: [0.7, 0.3, 0.0]`")
            else:
                # availability of each origin depends on the rows' `origin` fields (dataset folders and
                # JSONL files may hold synthetic rows too): checked when the data loads, before the model
                self.mix_ratios = r
        elif self.train_size is not None:
            errs.append("train_size needs mix_ratios (without a mix, every training row is used once)")
        if self.train_size is not None and self.train_size < 1:
            errs.append(f"train_size={self.train_size}: must be >= 1")
        return errs

    def _check_eval(self) -> list[str]:
        from proofcheck.data.families import family_names, resolve

        errs = []
        if self.prompt_style not in PROMPT_STYLES:
            errs.append(f"prompt_style={self.prompt_style!r}: choose one of {', '.join(PROMPT_STYLES)}")
        if not 0.0 <= self.eval_fraction < 1.0:
            errs.append(f"eval_fraction={self.eval_fraction}: must be in [0, 1), e.g. 0.1")
        for name in ("eval_passes", "eval_max_new_tokens", "eval_batch_size"):
            if getattr(self, name) < 1:
                errs.append(f"{name}={getattr(self, name)}: must be >= 1")
        if self.eval_max_samples < 0:
            errs.append(f"eval_max_samples={self.eval_max_samples}: must be >= 0 (0 = no k-pass evaluation)")
        if self.eval_curve_samples < 0:
            errs.append(f"eval_curve_samples={self.eval_curve_samples}: must be >= 0 (0 = every evaluation is full)")
        if fams := [f for f in family_names(self.synthetic_families) if f != "all"]:
            try:
                resolve(fams)
            except ValueError as e:  # an unknown family, named with the choices
                errs.append(f"synthetic_families: {e} or `all`")
        if self.eval_every_steps < 0:
            errs.append(f"eval_every_steps={self.eval_every_steps}: must be >= 0 (0 = only at the end)")
        if self.eval_temperature <= 0:
            errs.append(f"eval_temperature={self.eval_temperature}: must be > 0 (passes are sampled)")
        if self.uncertainty_pool < 0:
            errs.append(f"uncertainty_pool={self.uncertainty_pool}: must be >= 0 (0 = off)")
        if self.uncertainty_pool and self.uncertainty_passes < 2:
            errs.append(f"uncertainty_passes={self.uncertainty_passes}: must be >= 2 (disagreement needs two passes)")
        if self.uncertainty_every < 1:
            errs.append(f"uncertainty_every={self.uncertainty_every}: must be >= 1 optimizer step")
        if self.uncertainty_draw not in UNCERTAINTY_DRAWS:
            errs.append(f"uncertainty_draw={self.uncertainty_draw!r}: choose one of {', '.join(UNCERTAINTY_DRAWS)}")
        elif self.uncertainty_draw != "pairs" and self.uncertainty_pool and not self.balanced_batches:
            errs.append(f"uncertainty_draw={self.uncertainty_draw!r} splits the pool by class: it needs "
                        "balanced_batches: true (or uncertainty_draw: pairs)")
        if self.time_budget_s is not None and self.time_budget_s <= 0:
            errs.append(f"time_budget_s={self.time_budget_s}: must be > 0 seconds (or unset for no budget)")
        return errs

    def _check_rewards(self) -> list[str]:
        errs = []
        if not self.reward_funcs:
            errs.append("reward_funcs is empty: use e.g. `reward_funcs: [meta_verifier, format]`")
        if self.reward_mode not in REWARD_MODES:
            errs.append(f"reward_mode={self.reward_mode!r}: choose one of {', '.join(REWARD_MODES)}")
        elif self.reward_mode != "structural" and not (self.judge_endpoint and self.judge_model):
            errs.append(f"reward_mode={self.reward_mode!r} needs a judge: set judge_endpoint (an OpenAI-compatible "
                        "base URL) and judge_model, or use reward_mode: structural")
        if self.judge_api_key_env and not os.environ.get(self.judge_api_key_env):
            errs.append(f"judge_api_key_env={self.judge_api_key_env!r}: the variable is not set (or empty); export "
                        f"{self.judge_api_key_env}=<key> first, or drop judge_api_key_env for a judge without a key")
        if self.reward_mode == "structural" and (self.judge_endpoint or self.judge_model):
            errs.append("judge_endpoint/judge_model are set but reward_mode is structural: set reward_mode: hybrid "
                        "(or judge), or remove the judge settings")
        if self.reward_scale not in REWARD_SCALES:
            errs.append(f"reward_scale={self.reward_scale!r}: choose one of {', '.join(REWARD_SCALES)}")
        return errs

    def reward_kwargs(self, name: str) -> dict[str, Any]:
        """Constructor options for reward function `name` (only the meta-verifier takes any)."""
        if name != "meta_verifier":
            return {}
        kw: dict[str, Any] = {"mode": self.reward_mode, "scale": self.reward_scale}
        if self.reward_mode != "structural":
            kw.update(judge_endpoint=self.judge_endpoint, judge_model=self.judge_model)
            if self.judge_api_key_env:
                kw["api_key_env"] = self.judge_api_key_env
        return kw


def _as_list(value: Any) -> list:
    """YAML may give one string where a list is meant: `expert_files: data.jsonl`."""
    if value is None:
        return []
    if isinstance(value, str | Path):
        return [str(value)]
    return list(value)


def check_paths(script: ProofcheckScriptArguments, model: Any = None) -> None:
    """Raise ConfigError naming every data file or folder that does not exist, and a local model
    folder (ModelConfig `model`) that does not, with the command that builds it.

    Kept apart from `__post_init__` so a recipe can be checked on a machine without its data
    (tests/unit/test_configs_parse.py); `train/grpo.py` always runs it before loading anything.
    """
    errs = [f"{name}: {p}: no such file or folder (check the path; relative paths are resolved from the "
            "directory you launch in)"
            for name in ("expert_files", "repaired_files") for p in getattr(script, name) if not Path(p).exists()]
    if model is not None and model.model_name_or_path:
        errs += _check_model_folder(model.model_name_or_path, script.model_build)
    if errs:
        raise ConfigError("missing model or training data:\n  - " + "\n  - ".join(errs))


def _check_model_folder(path: str, build: str | None) -> list[str]:
    """A local model folder that does not exist (a path, not a hub id): say how to build it.

    With `model_build` set the recipe expects a local folder whatever the path looks like; without
    it, absolute and `./` `../` paths and paths of three or more parts are local, while `org/name`
    stays a hub id for transformers to resolve.
    """
    p = Path(path)
    if p.is_dir():
        if not (p / "config.json").is_file():
            return [f"model_name_or_path: {path}: the folder has no config.json (not a saved model); "
                    + (f"build it with `{build}`" if build else "point at a folder written by save_pretrained")]
        return []
    local = build is not None or p.is_absolute() or path.startswith(("./", "../")) or len(p.parts) > 2
    if not local:
        return []
    fix = f"build it first: `{build}`" if build else "check the path, or build/download the model there"
    return [f"model_name_or_path: {path}: no such model folder; {fix}"]


def top_layers(n_layers: int, k: int) -> list[int]:
    """Indices of the top `k` of `n_layers` transformer layers (peft `layers_to_transform` for `lora_layers`)."""
    return list(range(max(0, n_layers - k), n_layers))


def check_compatible(script: ProofcheckScriptArguments, training: Any, model: Any) -> None:
    """Cross-checks between our arguments, `GRPOConfig` (`training`) and `ModelConfig` (`model`).

    Raises ConfigError naming the fields and the fix; run before any model is loaded.
    """
    errs = []
    if not model.model_name_or_path:
        errs.append("model_name_or_path is not set: give a local folder or hub id, e.g. "
                    "`model_name_or_path: runs/tiny-model`")
    weights = training.reward_weights
    if weights is not None and len(weights) != len(script.reward_funcs):
        errs.append(f"reward_weights has {len(weights)} value(s) for {len(script.reward_funcs)} reward function(s) "
                    f"{script.reward_funcs}: give one weight per function, in the same order")
    if not (script.save_merged or script.save_adapter):
        errs.append("save_merged and save_adapter are both false: nothing but checkpoints would be saved; "
                    "set save_merged: true (full model) or save_adapter: true (LoRA)")
    if script.lora_layers is not None:
        if not model.use_peft:
            errs.append("lora_layers needs use_peft: true (it restricts the LoRA adapter to the top layers)")
        elif script.lora_layers < 1:
            errs.append(f"lora_layers={script.lora_layers}: must be >= 1 (or unset for every layer)")
        elif not model.lora_target_modules or isinstance(model.lora_target_modules, str) or \
                "all-linear" in model.lora_target_modules:
            errs.append("lora_layers needs lora_target_modules as module names, e.g. [q_proj, k_proj, v_proj, "
                        "o_proj, gate_proj, up_proj, down_proj] (peft refuses layers_to_transform with all-linear)")
    if script.save_adapter and not script.save_merged and not model.use_peft:
        errs.append("save_adapter without use_peft saves nothing (there is no adapter): set save_merged: true "
                    "or use_peft: true")
    if script.eval_constrain_format and not (training.use_vllm and training.vllm_mode == "colocate"):
        errs.append("eval_constrain_format needs the colocated vLLM engine (structured outputs): set use_vllm: true "
                    "and vllm_mode: colocate, or eval_constrain_format: false")
    if script.balanced_batches:
        if getattr(training, "shuffle_dataset", True):
            errs.append("balanced_batches orders the rows in valid/flawed pairs, and the trainer's shuffling would undo "
                        "it: set shuffle_dataset: false")
        prompts = training.per_device_train_batch_size // max(1, training.num_generations)
        if prompts % 2:
            errs.append(f"balanced_batches needs an even number of prompts per batch; per_device_train_batch_size "
                        f"{training.per_device_train_batch_size} / num_generations {training.num_generations} = "
                        f"{prompts}: change either")
    if script.uncertainty_pool:
        # the sampler's count: one generation batch of every process together (pool_queue.ChunkPlan)
        prompts = training.generation_batch_size // max(1, training.num_generations)
        if script.uncertainty_pool <= prompts:
            errs.append(f"uncertainty_pool={script.uncertainty_pool} is not larger than the {prompts} prompts of a "
                        "generation batch (all processes): there is nothing to choose from; use at least twice as many")
    if training.use_vllm and training.vllm_mode not in ("colocate", "server"):
        errs.append(f"vllm_mode={training.vllm_mode!r}: choose colocate or server")
    if errs:
        raise ConfigError("invalid training configuration:\n  - " + "\n  - ".join(errs))
