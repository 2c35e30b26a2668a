"""Checkpoints a resume can trust, and the run history that travels with them.

transformers writes `checkpoint-<step>/` file by file (model shards on every rank under ZeRO-3 /
FSDP, optimizer, scheduler, RNG, `trainer_state.json`) and then rotates old ones; nothing marks
the end. A run killed during a save (a full fine-tune checkpoint of an 8B model is ~130 GB)
leaves a folder that looks like the newest checkpoint and cannot be loaded, or, worse, loads
half-written state. Here:

- after every rank has finished its part of a save, the main process writes
  `proofcheck_history.json` (the training rewards and held-out evaluations so far) and then,
  atomically, `proofcheck_complete.json`, which lists every file of the checkpoint with its size;
- a checkpoint is complete when that marker exists and every file it lists has its size;
- `last_complete` picks the newest complete checkpoint and says which newer ones it skipped;
- a checkpoint folder about to be written again (a resume from an older checkpoint reaches its
  step) loses its marker first, so a kill during the rewrite cannot leave a stale marker behind;
- `checkpoint_step` and `target_steps` tell whether a resume has anything left to train (transformers'
  Trainer checks the end only after a step, so a resume from the last checkpoint would train one
  more), and `copy_model_files` takes the saved model out of a checkpoint for a run whose final
  save was lost.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from proofcheck.io import write_json_atomic

MARKER = "proofcheck_complete.json"
HISTORY = "proofcheck_history.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_folders(output_dir: str | Path) -> list[tuple[int, Path]]:
    """`(step, folder)` of every `checkpoint-<step>` folder in `output_dir`, newest first."""
    d = Path(output_dir)
    if not d.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in d.iterdir() if p.is_dir() and (m := _CHECKPOINT.match(p.name))]
    return sorted(found, reverse=True)


def incomplete_reason(folder: str | Path) -> str | None:
    """None when `folder` is a complete checkpoint, else why not (for the user)."""
    folder = Path(folder)
    marker = folder / MARKER
    if not marker.is_file():
        return f"no {MARKER} (its save was interrupted, or it was not written by train/grpo.py)"
    try:
        files = json.loads(marker.read_text(encoding="utf-8"))["files"]
    except (ValueError, KeyError, TypeError) as e:
        return f"unreadable {MARKER}: {e}"
    for name, size in files.items():
        p = folder / name
        if not p.is_file():
            return f"{name} is missing"
        if p.stat().st_size != size:
            return f"{name} has {p.stat().st_size} bytes, the save wrote {size}"
    return None


def last_complete(output_dir: str | Path, say: Callable[[str], None] = print) -> Path | None:
    """The newest complete checkpoint in `output_dir`, or None; each newer incomplete one is named
    through `say` with the reason it was skipped."""
    for step, folder in checkpoint_folders(output_dir):
        reason = incomplete_reason(folder)
        if reason is None:
            return folder
        say(f"[proofcheck] resume: skipping {folder.name} (step {step}): incomplete, {reason}")
    return None


def load_history(folder: str | Path) -> dict[str, Any]:
    """The run history saved with a checkpoint: `{"rewards": [[step, reward], ...], "eval_history": [...]}`
    (empty lists for a checkpoint saved without one)."""
    p = Path(folder) / HISTORY
    if not p.is_file():
        return {"rewards": [], "eval_history": [], "curve": [], "step_diagnostics": []}
    data = json.loads(p.read_text(encoding="utf-8"))
    return {"rewards": [tuple(r) for r in data.get("rewards", [])], "eval_history": data.get("eval_history", []),
            "curve": data.get("curve", []), "step_diagnostics": data.get("step_diagnostics", [])}


def checkpoint_step(folder: str | Path) -> int:
    """The global step a complete checkpoint was saved at (from its marker)."""
    return int(json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))["step"])


def target_steps(training: Any, folder: str | Path) -> int | None:
    """The step a run resumed from `folder` ends at: `max_steps` when set (> 0); for a run counted in
    epochs, the `max_steps` the checkpoint's trainer state computed, if the epoch count is unchanged;
    None when it cannot be known before the trainer has built its data loader."""
    if training.max_steps > 0:
        return int(training.max_steps)
    state = Path(folder) / "trainer_state.json"
    if not state.is_file():
        return None
    saved = json.loads(state.read_text(encoding="utf-8"))
    if saved.get("num_train_epochs") != training.num_train_epochs or not saved.get("max_steps"):
        return None
    return int(saved["max_steps"])


# What a checkpoint holds beside the model `Trainer.save_model` writes: optimizer, scheduler, RNG and
# trainer state, our marker and history, DeepSpeed's and FSDP's sharded states.
TRAINING_STATE = ("optimizer.pt", "scheduler.pt", "scaler.pt", "trainer_state.json", "rng_state*.pth", MARKER,
                  HISTORY, "proofcheck_uncertainty.json", "latest", "zero_to_fp32.py", "global_step*", "pytorch_model_fsdp*", "optimizer_*")
_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin", "model*.safetensors", "pytorch_model*.bin")


def copy_model_files(folder: str | Path, dest: str | Path) -> None:
    """Copy the model `Trainer.save_model` wrote into checkpoint `folder` (weights or LoRA adapter,
    config, tokenizer) to `dest`, without the training state. Raises ValueError when the checkpoint
    holds no gathered weights (a ZeRO-3 run without `zero3_save_16bit_model`, FSDP's sharded state)."""
    folder = Path(folder)
    if not any(any(folder.glob(pattern)) for pattern in _WEIGHTS):
        raise ValueError(f"{folder} holds no gathered model weights (only sharded training state); save with "
                         "zero3_save_16bit_model: true (ZeRO-3) or fsdp_state_dict_type: FULL_STATE_DICT (FSDP)")
    shutil.copytree(folder, dest, ignore=shutil.ignore_patterns(*TRAINING_STATE), dirs_exist_ok=True)


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != MARKER}


class CheckpointCallback(TrainerCallback):
    """Marks each checkpoint complete once every rank has written its part, with the run history.

    Add it after the history and evaluation callbacks (an evaluation at a save step is then in the
    saved history). `on_save` runs on every rank right after the trainer's save: one barrier, then
    the main process writes the history and the marker.
    """

    def __init__(self, trainer: Any, history: Any, eval_cb: Any = None) -> None:
        self.trainer = trainer
        self.history = history
        self.eval_cb = eval_cb

    def _folder(self, args: Any, state: Any) -> Path:
        return Path(args.output_dir) / f"checkpoint-{state.global_step}"

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if control.should_save and self.trainer.accelerator.is_main_process:
            (self._folder(args, state) / MARKER).unlink(missing_ok=True)  # about to be written again

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        acc = self.trainer.accelerator
        acc.wait_for_everyone()  # every rank's shards, optimizer and RNG files are on disk
        if not acc.is_main_process:
            return
        folder = self._folder(args, state)
        if not folder.is_dir():
            return
        write_json_atomic(folder / HISTORY, {
            "rewards": [list(r) for r in self.history.rewards],
            "step_diagnostics": self.history.diagnostics,
            "eval_history": self.eval_cb.history if self.eval_cb is not None else [],
            "curve": self.eval_cb.curve if self.eval_cb is not None else []})
        write_json_atomic(folder / MARKER, {"step": state.global_step, "world_size": acc.num_processes,
                                            "files": _files(folder)})
