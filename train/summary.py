"""`run_summary.json`: the record a GRPO run writes last, from the trainer or, for a run that had
nothing left to train, from its last checkpoint; `final_save` reads it back when the final save is complete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proofcheck.allocator import loaded_allocator
from proofcheck.train.data import TrainingData

SUMMARY_FILE = "run_summary.json"


def final_save(output_dir: str | Path) -> dict[str, Any] | None:
    """The run summary when the run's final save is in place (`run_summary.json`, written after the
    model, and every folder it lists), else None."""
    path = Path(output_dir) / SUMMARY_FILE
    if not path.is_file():
        return None
    summary = json.loads(path.read_text(encoding="utf-8"))
    return summary if all(Path(f).is_dir() for f in (summary.get("saved") or {}).values()) else None


def generation_backend(training: Any) -> str:
    return f"vllm-{training.vllm_mode}" if training.use_vllm else "transformers"


def pool_record(pool: Any) -> dict[str, Any] | None:
    """The uncertainty pool's refreshes and where the prompts it served came from (None: no pool)."""
    if pool is None:
        return None
    trained = pool.plan.trained_chunks()
    draws = [d for d in pool.queues.draws if trained is None or d["chunk"] < trained]  # not the one drawn ahead
    return {"refreshes": pool.history, "chunks": len(draws), "queued_rows": sum(d["queued"] for d in draws),
            "fallback_rows": sum(d["fallback"] for d in draws), "resumed_from": pool.restored_from}


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
        "uncertainty": pool_record(getattr(trainer, "uncertainty", None)),
        "grader_failure_rows": getattr(trainer, "grader_failure_rows", 0),  # rows left without advantage
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
        "allocator": loaded_allocator(),
        "budget": trainer.budget.plan() if getattr(trainer, "budget", None) is not None else None,
        "data": data.summary(),
    }


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


def precision_record(trainer: Any) -> dict[str, Any]:
    """The dtypes the run computed in: training's bf16 autocast, and the colocated vLLM engine's own
    `model_config.dtype` (read from the engine, not from our settings)."""
    llm = getattr(getattr(trainer, "vllm_generation", None), "llm", None)
    vllm_dtype = str(llm.llm_engine.model_config.dtype).removeprefix("torch.") if llm is not None else None
    return {"train_bf16": bool(trainer.args.bf16), "vllm_dtype": vllm_dtype,
            "flush_denormal": trainer.flush_denormal}


def memory_record(trainer: Any) -> dict[str, Any] | None:
    """Peak GPU memory of this process and the colocated vLLM engine's KV cache size, on CUDA
    (None elsewhere): compared with `--plan`'s estimate (`benchmarks/gpu_check` reads the peak; the KV cache
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
