"""The training run behind `train/grpo.py`: data -> rewards -> TRL GRPOTrainer -> save -> summary.

Order matters for users: everything that can be wrong in the configuration or the data is
checked before the model is loaded (data built and validated, reward functions built, the
checkpoint to resume from found). Generation is TRL's: plain transformers, vLLM `colocate`
(the CPU fix in `vllm_cpu_fix` is applied only on vLLM-CPU) or vLLM `server`
(`trl vllm-serve` on other GPUs). The model is saved merged and/or as a LoRA adapter, each
with its tokenizer, so `serve/` loads either; `run_summary.json` records the run.

Resuming is idempotent: a resume from a checkpoint at or past the run's last step (a requeued job
that had finished, a re-run script) trains nothing, leaves the checkpoints, history and saved model
as they are and only writes the final save when it is missing (`keep_finished_run`). A run that
trains removes an old `run_summary.json` first and writes it again last, so its presence says the
final save of the newest training is complete.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from proofcheck.io import write_json_atomic
from proofcheck.prompt_card import write_prompt_card
from proofcheck.protocol import prompt_sha256
from proofcheck.train.config import ConfigError, ProofcheckScriptArguments, top_layers
from proofcheck.train.data import TrainingData, build_training_data, to_dataset

SUMMARY_FILE = "run_summary.json"


def build_rewards(script: ProofcheckScriptArguments) -> list[Any]:
    """Instantiate the configured reward functions through the reward package's registry."""
    from proofcheck.reward.functions import get_reward_function

    out = []
    for name in script.reward_funcs:
        try:
            out.append(get_reward_function(name, **script.reward_kwargs(name)))
        except (ValueError, TypeError) as e:
            raise ConfigError(f"reward_funcs: {name}: {e}") from e
    return out


def _is_main() -> bool:
    """Rank 0 of the launch, from its environment (resume is handled before the trainer exists)."""
    return os.environ.get("RANK", "0") == "0"


def _say(msg: str) -> None:
    """Print once per launch (rank 0's environment; resume is resolved before the trainer exists)."""
    if _is_main():
        print(msg, flush=True)


def resolve_resume(training: Any) -> str | None:
    """The checkpoint folder to resume from: `last` = the newest complete one in output_dir (newer
    incomplete ones are skipped with a message), or a given folder, which must be complete."""
    from proofcheck.train.checkpoints import MARKER, checkpoint_folders, incomplete_reason, last_complete

    value = training.resume_from_checkpoint
    if not value:
        return None
    if value == "last":
        last = last_complete(training.output_dir, say=_say)
        if last is None:
            found = checkpoint_folders(training.output_dir)
            why = (f"{len(found)} checkpoint folder(s), none complete (no {MARKER}, or files missing)" if found
                   else "no checkpoint-* folder")
            raise ConfigError(f"resume_from_checkpoint: last: {why} in {training.output_dir}; "
                              "train first (save_steps) or give a checkpoint path")
        _say(f"[proofcheck] resume: from {last}")
        return str(last)
    if not Path(value).is_dir():
        raise ConfigError(f"resume_from_checkpoint: {value}: no such checkpoint folder")
    reason = incomplete_reason(value)
    if reason is not None:
        raise ConfigError(f"resume_from_checkpoint: {value}: incomplete checkpoint ({reason}); resume from an "
                          "older complete one, or use `--resume_from_checkpoint last`, which picks the newest "
                          "complete one")
    return str(value)


def finished_at(resume: str | None, training: Any) -> tuple[int, int] | None:
    """(the checkpoint's step, the run's last step) when resuming from checkpoint `resume` has nothing
    left to train (it is at or past the run's last step), else None.

    transformers' Trainer checks the end only after a step: resumed from the last checkpoint it would
    train one step more and save `checkpoint-<end + 1>`, and every requeue of a finished job another.
    """
    from proofcheck.train.checkpoints import checkpoint_step, target_steps

    if resume is None:
        return None
    step = checkpoint_step(resume)
    end = target_steps(training, resume)
    return (step, end) if end is not None and step >= end else None


def final_save(output_dir: str | Path) -> dict[str, Any] | None:
    """The run summary when the run's final save is in place (`run_summary.json`, written after the
    model, and every folder it lists), else None."""
    path = Path(output_dir) / SUMMARY_FILE
    if not path.is_file():
        return None
    summary = json.loads(path.read_text(encoding="utf-8"))
    return summary if all(Path(f).is_dir() for f in (summary.get("saved") or {}).values()) else None


def final_outputs(script: ProofcheckScriptArguments, model_args: Any, output_dir: str | Path) -> dict[str, str]:
    """The folders `save_outputs` writes: `merged` and/or (LoRA only) `adapter` in `output_dir`."""
    wanted = (("merged", script.save_merged), ("adapter", model_args.use_peft and script.save_adapter))
    return {name: str(Path(output_dir) / name) for name, on in wanted if on}


def save_from_checkpoint(checkpoint: str, script: ProofcheckScriptArguments, training: Any, model_args: Any,
                         data: TrainingData) -> dict[str, str]:
    """Write the final save `save_outputs` would have written at the checkpoint's step (merged model
    and/or LoRA adapter, each with its tokenizer and prompt card) from the checkpoint's files: for a
    run killed after its last checkpoint and before its final save. One process, no trainer."""
    from transformers import AutoTokenizer

    from proofcheck.train.checkpoints import copy_model_files

    saved = final_outputs(script, model_args, training.output_dir)
    try:
        if model_args.use_peft and not (Path(checkpoint) / "adapter_config.json").is_file():
            raise ValueError(f"{checkpoint} holds no LoRA adapter, and this run trains one (use_peft)")
        if "adapter" in saved:
            copy_model_files(checkpoint, saved["adapter"])
        if "merged" in saved and model_args.use_peft:
            merge_adapter(Path(checkpoint), Path(saved["merged"]), AutoTokenizer.from_pretrained(checkpoint),
                          model_args)
        elif "merged" in saved:
            copy_model_files(checkpoint, saved["merged"])
    except ValueError as e:
        raise ConfigError(f"resume_from_checkpoint: the final save is missing and cannot be written from the "
                          f"checkpoint: {e}") from e
    write_cards(saved, data, training)
    return saved


def write_cards(saved: dict[str, str], data: TrainingData, training: Any) -> None:
    """The prompt card of every saved folder: the prompt the model was trained on, for `score verifier`
    to compare, and how it generated, for serve / verify / score to default to."""
    for folder in saved.values():
        write_prompt_card(folder, data.with_reference, prompt_sha256(style=data.prompt_style),
                          prompt_style=data.prompt_style,
                          chat_template_kwargs=getattr(training, "chat_template_kwargs", None),
                          max_completion_length=training.max_completion_length)


def summary_from_checkpoint(training: Any, model_args: Any, data: TrainingData, checkpoint: str,
                            saved: dict[str, str]) -> dict[str, Any]:
    """`make_summary`'s record for a run whose end is `checkpoint` and that trained nothing in this
    launch: history from the checkpoint, no timings or memory (nothing ran)."""
    from proofcheck.train.checkpoints import MARKER, load_history

    marker = json.loads((Path(checkpoint) / MARKER).read_text(encoding="utf-8"))
    history = load_history(checkpoint)
    rewards, evals = history["rewards"], history["eval_history"]
    return {
        "output_dir": str(training.output_dir), "global_step": marker["step"], "start_step": marker["step"],
        "steps_this_run": 0, "resumed_from": checkpoint, "wall_time_s": None, "train_runtime_s": None,
        "first_reward": rewards[0][1] if rewards else None, "final_reward": rewards[-1][1] if rewards else None,
        "rewards": [{"step": s, "reward": r} for s, r in rewards], "eval": evals[-1] if evals else None,
        "step_diagnostics": history["step_diagnostics"], "uncertainty": None,
        "eval_history": evals, "curve": history["curve"], "step_split_s": None, "saved": saved,
        "generation": generation_backend(training), "peft": bool(model_args.use_peft),
        "world_size": marker.get("world_size"), "memory": None,
        "precision": {"train_bf16": bool(training.bf16), "vllm_dtype": None}, "budget": None, "data": data.summary(),
    }


def keep_finished_run(script: ProofcheckScriptArguments, training: Any, model_args: Any, data: TrainingData,
                      checkpoint: str, step: int, end: int) -> dict[str, Any]:
    """A resume with nothing left to train: say so, touch no checkpoint, history or saved model, and
    write the final save and summary only when they are missing. Returns the run summary.

    Runs before any model is loaded or process group formed, on every rank of a launch: the main
    process (RANK 0) writes, the others return at once.
    """
    name = Path(checkpoint).name
    _say(f"[proofcheck] resume: {name} is at step {step} and the run ends at step {end}: nothing to train; "
         "checkpoints, history and saved model left as they are")
    summary = final_save(training.output_dir)
    if summary is not None:
        _say(f"[proofcheck] resume: the final save is in place ({SUMMARY_FILE}: step {summary['global_step']}, "
             f"saved {summary.get('saved') or 'nothing'})")
    else:
        _say(f"[proofcheck] resume: the final save is missing: writing it from {name} (the held-out "
             "evaluation after the last step, if the run had one, ran after that save and is not redone)")
        saved = final_outputs(script, model_args, training.output_dir)
        if _is_main():
            saved = save_from_checkpoint(checkpoint, script, training, model_args, data)
        summary = summary_from_checkpoint(training, model_args, data, checkpoint, saved)
        if _is_main():
            write_json_atomic(Path(training.output_dir) / SUMMARY_FILE, summary)
    print(f"[proofcheck] rank {os.environ.get('RANK', '0')}: nothing to train at step {step}", flush=True)
    return summary


def generation_backend(training: Any) -> str:
    return f"vllm-{training.vllm_mode}" if training.use_vllm else "transformers"


def _model_init_kwargs(training: Any, model_args: Any) -> dict[str, Any]:
    kw = {"revision": model_args.model_revision, "trust_remote_code": training.trust_remote_code,
          "attn_implementation": model_args.attn_implementation, "dtype": model_args.dtype}
    kw.update(training.model_init_kwargs or {})
    return kw


def merge_adapter(adapter_dir: Path, merged_dir: Path, tokenizer: Any, model_args: Any) -> None:
    """Load base + adapter on CPU, merge LoRA into the weights and save a plain model + tokenizer.

    Reloading from the saved adapter works the same after DDP, ZeRO-3 or FSDP training (the
    adapter file is already gathered), at the cost of one more load of the base model. Only the
    main process calls it, so the load runs with any ZeRO-3 configuration hidden from
    transformers (`distributed.zero3_disabled`): under it `from_pretrained` would enter
    `deepspeed.zero.Init`, a collective the other ranks, waiting at a barrier, never join.
    """
    from peft import AutoPeftModelForCausalLM

    from proofcheck.train.distributed import zero3_disabled

    dtype = model_args.dtype if model_args.dtype not in (None, "auto") else "auto"
    with zero3_disabled():  # one process loads: not inside ZeRO-3's zero.Init, a collective
        model = AutoPeftModelForCausalLM.from_pretrained(str(adapter_dir), dtype=dtype,
                                                         revision=model_args.model_revision)
    merged = model.merge_and_unload()
    merged.save_pretrained(str(merged_dir))
    tokenizer.save_pretrained(str(merged_dir))


def save_outputs(trainer: Any, script: ProofcheckScriptArguments, model_args: Any) -> dict[str, str]:
    """Save `<output_dir>/merged` and/or `<output_dir>/adapter`; returns what was written where."""
    out = Path(trainer.args.output_dir)
    acc = trainer.accelerator
    saved: dict[str, str] = {}
    if model_args.use_peft:
        adapter_dir = out / "adapter"
        trainer.save_model(str(adapter_dir))  # collective under ZeRO-3/FSDP; writes the tokenizer too
        acc.wait_for_everyone()
        if script.save_merged:
            if acc.is_main_process:
                merge_adapter(adapter_dir, out / "merged", trainer.processing_class, model_args)
            saved["merged"] = str(out / "merged")
        if script.save_adapter:
            saved["adapter"] = str(adapter_dir)
        elif acc.is_main_process:
            shutil.rmtree(adapter_dir)
    elif script.save_merged:
        trainer.save_model(str(out / "merged"))
        saved["merged"] = str(out / "merged")
    acc.wait_for_everyone()
    return saved


def shutdown_colocated_vllm(trainer: Any) -> None:
    """Stop a colocated vLLM engine now, while torch.distributed is still up.

    Left to the interpreter's exit, vLLM tears down its process groups after `trainer.end()`
    destroyed the default group and prints `Invalid process group specified`.
    """
    llm = getattr(getattr(trainer, "vllm_generation", None), "llm", None)
    if llm is not None:
        llm.llm_engine.engine_core.shutdown()


def make_summary(trainer: Any, data: TrainingData, history: Any, eval_cb: Any, saved: dict[str, str],
                 resume: str | None, train_metrics: dict[str, Any], step_split: dict[str, float] | None = None
                 ) -> dict[str, Any]:
    """The JSON written to `<output_dir>/run_summary.json`."""
    rewards = history.rewards
    return {
        "output_dir": str(trainer.args.output_dir),
        "global_step": trainer.state.global_step,
        "start_step": history.start_step or 0,
        "steps_this_run": trainer.state.global_step - (history.start_step or 0),
        "resumed_from": resume,
        "wall_time_s": history.wall_time_s,
        "train_runtime_s": train_metrics.get("train_runtime"),
        "first_reward": rewards[0][1] if rewards else None,
        "final_reward": rewards[-1][1] if rewards else None,
        "rewards": [{"step": s, "reward": r} for s, r in rewards],
        "step_diagnostics": history.diagnostics,  # per step: accept rates, level mix, zero-spread groups, length
        "uncertainty": pool.history if (pool := getattr(trainer, "uncertainty", None)) is not None else None,
        "eval": eval_cb.history[-1] if eval_cb is not None and eval_cb.history else None,
        "eval_history": eval_cb.history if eval_cb is not None else [],
        "curve": eval_cb.curve if eval_cb is not None else [],
        "step_split_s": step_split,
        "saved": saved,
        "generation": generation_backend(trainer.args),
        "peft": bool(getattr(trainer.model, "peft_config", None)),
        "world_size": trainer.accelerator.num_processes,
        "memory": memory_record(trainer),
        "precision": precision_record(trainer),
        "budget": trainer.budget.plan() if getattr(trainer, "budget", None) is not None else None,
        "data": data.summary(),
    }


def precision_record(trainer: Any) -> dict[str, Any]:
    """The dtypes the run computed in: training's bf16 autocast, and the colocated vLLM engine's own
    `model_config.dtype` (read from the engine, not from our settings)."""
    llm = getattr(getattr(trainer, "vllm_generation", None), "llm", None)
    vllm_dtype = str(llm.llm_engine.model_config.dtype).removeprefix("torch.") if llm is not None else None
    return {"train_bf16": bool(trainer.args.bf16), "vllm_dtype": vllm_dtype}


def restore_history(checkpoint: str, history: Any, eval_cb: Any) -> None:
    """Start the run's reward and evaluation history from what `checkpoint` saved, so the summary of
    a resumed run covers the whole run (entries after the checkpoint's step, from a run that went on
    past it, are dropped: the resumed run redoes those steps)."""
    from proofcheck.train.checkpoints import checkpoint_step, load_history

    saved = load_history(checkpoint)
    step = checkpoint_step(checkpoint)  # resume checked it is complete
    history.rewards = [(s, r) for s, r in saved["rewards"] if s <= step]
    history.diagnostics = [d for d in saved["step_diagnostics"] if d["step"] <= step]
    if eval_cb is not None:
        eval_cb.history = [e for e in saved["eval_history"] if e["step"] <= step]
        eval_cb.curve = [e for e in saved.get("curve", []) if e["step"] <= step]
        eval_cb.timeline = [("full", float(e.get("seconds") or 0.0)) for e in eval_cb.history]  # the budget's estimate


def memory_record(trainer: Any) -> dict[str, Any] | None:
    """Peak GPU memory of this process and the colocated vLLM engine's KV cache size, on CUDA
    (None elsewhere): compared with `--plan`'s estimate (`benchmarks/gpu_check.py` reads the peak; the KV cache
    only on a GPU node with vLLM)."""
    import torch

    if not torch.cuda.is_available():
        return None
    llm = getattr(getattr(trainer, "vllm_generation", None), "llm", None)
    cache = llm.llm_engine.vllm_config.cache_config if llm is not None else None
    return {"max_memory_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
            "max_memory_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2),
            "vllm_kv_blocks": getattr(cache, "num_gpu_blocks", None) if cache is not None else None,
            "vllm_block_size": getattr(cache, "block_size", None) if cache is not None else None}


def peft_config(script: ProofcheckScriptArguments, model_args: Any) -> Any:
    """TRL's LoRA config from ModelConfig, restricted to the top `lora_layers` layers when set."""
    from trl import get_peft_config

    config = get_peft_config(model_args)
    if config is not None and script.lora_layers is not None:
        from transformers import AutoConfig

        n = AutoConfig.from_pretrained(model_args.model_name_or_path).num_hidden_layers
        config.layers_to_transform = top_layers(n, script.lora_layers)
    return config


def build_trainer(script: ProofcheckScriptArguments, training: Any, model_args: Any,
                  data: TrainingData | None = None, rewards: list[Any] | None = None) -> tuple[Any, Any, Any, Any]:
    """GRPOTrainer with our callbacks: returns (trainer, history, eval callback or None, step timer).

    Loads the model (and starts vLLM in colocate mode); call only after validation.
    """
    from proofcheck.train.callbacks import RunHistoryCallback, StepTimer, VerifierEvalCallback
    from proofcheck.train.checkpoints import CheckpointCallback

    data = data if data is not None else build_training_data(script)
    rewards = rewards if rewards is not None else build_rewards(script)
    if training.use_vllm and training.vllm_mode == "colocate":
        from proofcheck.train.vllm_cpu_fix import apply_vllm_cpu_fix

        # vLLM computes in the dtype training resolved (`bf16: auto` -> proofcheck.precision)
        apply_vllm_cpu_fix(dtype="bfloat16" if training.bf16 else "float32",
                           min_num_seqs=min(256, script.eval_max_samples * script.eval_passes))
    training.model_init_kwargs = _model_init_kwargs(training, model_args)
    eval_ds = to_dataset(data.eval) if data.eval and training.eval_strategy != "no" else None
    from proofcheck.train.uncertainty import trainer_class

    # GRPOTrainer with the uncertainty pool's sampler and, on CPU, completion-only log-probs (train/logprobs.py)
    trainer_cls = trainer_class()
    trainer = trainer_cls(model=model_args.model_name_or_path, reward_funcs=rewards, args=training,
                          train_dataset=to_dataset(data.train), eval_dataset=eval_ds,
                          peft_config=peft_config(script, model_args))
    trainer.completion_logits = script.completion_logits
    for fn in rewards:  # one truncation rule: a completion cut by max_completion_length is invalid
        if hasattr(fn, "configure_truncation"):
            fn.configure_truncation(trainer.eos_token_ids, training.max_completion_length)
    history = RunHistoryCallback()
    trainer.add_callback(history)
    eval_cb = None
    if data.eval and script.eval_max_samples > 0:
        eval_cb = VerifierEvalCallback(trainer, data.eval, passes=script.eval_passes,
                                       every_steps=script.eval_every_steps,
                                       max_new_tokens=script.eval_max_new_tokens,
                                       temperature=script.eval_temperature, batch_size=script.eval_batch_size,
                                       seed=training.seed, at_start=script.eval_at_start,
                                       constrain_format=script.eval_constrain_format,
                                       curve_samples=script.eval_curve_samples)
        trainer.add_callback(eval_cb)
    timer = StepTimer(trainer)
    trainer.add_callback(timer)
    if eval_cb is not None:
        timer.exclude(eval_cb, "evaluate")  # an evaluation inside a step is not the step's time
    if script.uncertainty_pool:  # after the timer: its seconds are the pool's own (`uncertainty` in the summary)
        from proofcheck.train.uncertainty import UncertaintyPool

        trainer.uncertainty = UncertaintyPool(
            trainer, data.train, pool=script.uncertainty_pool, passes=script.uncertainty_passes,
            every=script.uncertainty_every, prompts_per_step=training.generation_batch_size // training.num_generations,
            balanced=script.balanced_batches, seed=training.seed, max_new_tokens=training.max_completion_length,
            temperature=training.temperature, batch_size=script.eval_batch_size)
        trainer.add_callback(trainer.uncertainty)
    trainer.add_callback(CheckpointCallback(trainer, history, eval_cb))  # after the history and eval callbacks
    if script.time_budget_s is not None:
        from proofcheck.train.budget import TimeBudgetCallback

        trainer.budget = TimeBudgetCallback(script.time_budget_s, eval_cb, trainer.accelerator)
        trainer.add_callback(trainer.budget)
    return trainer, history, eval_cb, timer


def start_style_mismatch(model: str | None, style: str) -> str | None:
    """A warning when the starting model's folder (e.g. an SFT warm-up) was trained with another prompt style."""
    from proofcheck.prompt_card import card_style, read_prompt_card

    card = read_prompt_card(model) if model and Path(model).is_dir() else None
    if card is None or card_style(card) == style:
        return None
    return (f"{model} was trained with the {card_style(card)} prompt style and this run trains with {style} "
            f"(set prompt_style: {card_style(card)} in the recipe to continue in its style)")


def train(script: ProofcheckScriptArguments, training: Any, model_args: Any,
          rewards: list[Any] | None = None) -> dict[str, Any]:
    """Run GRPO end to end; returns the run summary (also written to output_dir on the main process).

    `rewards`: reward callables to use instead of `script.reward_funcs` (programmatic use); the
    weights are still `training.reward_weights`.
    """
    data = build_training_data(script)  # validated before any model is loaded
    rewards = rewards if rewards is not None else build_rewards(script)
    resume = resolve_resume(training)
    if (ended := finished_at(resume, training)) is not None:
        return keep_finished_run(script, training, model_args, data, resume, *ended)
    trainer, history, eval_cb, timer = build_trainer(script, training, model_args, data, rewards)
    acc = trainer.accelerator
    if resume:
        restore_history(resume, history, eval_cb)
    if msg := start_style_mismatch(getattr(model_args, "model_name_or_path", None), data.prompt_style):
        acc.print(f"[proofcheck] warning: {msg}")
    acc.print(f"[proofcheck] train rows {len(data.train)} {data.train_counts}, eval rows {len(data.eval)}, "
              f"generation {generation_backend(training)}, processes {acc.num_processes}")
    if acc.is_main_process:  # written again last: present only once this training's final save is
        (Path(training.output_dir) / SUMMARY_FILE).unlink(missing_ok=True)
    result = trainer.train(resume_from_checkpoint=resume)
    saved = save_outputs(trainer, script, model_args)
    if acc.is_main_process:
        write_cards(saved, data, training)
    summary = make_summary(trainer, data, history, eval_cb, saved, resume, dict(result.metrics), timer.split())
    if acc.is_main_process:
        write_json_atomic(Path(training.output_dir) / SUMMARY_FILE, summary)
    print(f"[proofcheck] rank {acc.process_index}: done at step {trainer.state.global_step}; "
          f"saved {saved or 'nothing'}", flush=True)
    acc.wait_for_everyone()
    shutdown_colocated_vllm(trainer)
    trainer.end()  # finish trackers and destroy the process group (gloo/NCCL) cleanly
    return summary
