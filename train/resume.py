"""Resuming a GRPO run: the checkpoint to resume from, and the idempotent end of a finished run.

A resume from a checkpoint at or past the run's last step (a requeued job that had finished, a re-run
script) trains nothing, leaves the checkpoints, history and saved model as they are and only writes
the final save when it is missing (`keep_finished_run`). A resumed run that trains starts its reward
and evaluation history from the checkpoint's (`restore_history`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from proofcheck.io import write_json_atomic
from proofcheck.train.config import ConfigError, ProofcheckScriptArguments
from proofcheck.train.data import TrainingData
from proofcheck.train.saving import final_outputs, merge_adapter, write_cards
from proofcheck.train.summary import SUMMARY_FILE, final_save, summary_from_checkpoint


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
