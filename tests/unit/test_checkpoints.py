"""Checkpoints a resume can trust (train/checkpoints.py) and the history a resume carries on.

The folders are written by hand here the way transformers lays a checkpoint out; the integration
rehearsal (tests/integration/test_distributed_rehearsal.py) kills real two-rank runs mid-save.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from proofcheck.train.checkpoints import (
    HISTORY,
    MARKER,
    CheckpointCallback,
    incomplete_reason,
    last_complete,
    load_history,
)
from proofcheck.train.config import ConfigError


class Acc:
    def __init__(self, main: bool = True) -> None:
        self.is_main_process = main
        self.num_processes = 2
        self.barriers = 0

    def wait_for_everyone(self) -> None:
        self.barriers += 1


def save(out: Path, step: int, cb: CheckpointCallback, files: dict[str, bytes] | None = None) -> Path:
    """What the trainer writes for a checkpoint, then the callback's on_save."""
    folder = out / f"checkpoint-{step}"
    cb.on_step_end(SimpleNamespace(output_dir=str(out)), SimpleNamespace(global_step=step),
                   SimpleNamespace(should_save=True))
    for name, data in (files or {"model.safetensors": b"w" * 10, "optimizer.pt": b"o" * 7,
                                 "trainer_state.json": b"{}"}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    cb.on_save(SimpleNamespace(output_dir=str(out)), SimpleNamespace(global_step=step), SimpleNamespace())
    return folder


def callback(acc: Acc, rewards: list, evals: list, curve: list | None = None) -> CheckpointCallback:
    return CheckpointCallback(SimpleNamespace(accelerator=acc), SimpleNamespace(rewards=rewards),
                              SimpleNamespace(history=evals, curve=curve or []))


def test_marker_after_the_barrier_lists_every_file(tmp_path: Path) -> None:
    acc = Acc()
    folder = save(tmp_path, 2, callback(acc, [(1, 0.5), (2, 0.25)], [{"step": 2, "valid_rate": 0.5}]))
    assert acc.barriers == 1
    marker = json.loads((folder / MARKER).read_text())
    assert marker["step"] == 2 and marker["files"] == {HISTORY: (folder / HISTORY).stat().st_size,
                                                       "model.safetensors": 10, "optimizer.pt": 7,
                                                       "trainer_state.json": 2}
    assert incomplete_reason(folder) is None
    assert load_history(folder) == {"rewards": [(1, 0.5), (2, 0.25)], "eval_history": [{"step": 2, "valid_rate": 0.5}],
                                    "curve": []}


def test_other_ranks_wait_but_write_nothing(tmp_path: Path) -> None:
    acc = Acc(main=False)
    folder = save(tmp_path, 1, callback(acc, [], []))
    assert acc.barriers == 1 and not (folder / MARKER).exists()


@pytest.mark.parametrize(("damage", "says"), [
    ("no marker", "no proofcheck_complete.json"),
    ("truncated", "model.safetensors has 4 bytes, the save wrote 10"),
    ("missing file", "optimizer.pt is missing"),
])
def test_incomplete_checkpoints_are_named_with_the_reason(tmp_path: Path, damage: str, says: str) -> None:
    folder = save(tmp_path, 3, callback(Acc(), [], []))
    if damage == "no marker":
        (folder / MARKER).unlink()
    elif damage == "truncated":
        (folder / "model.safetensors").write_bytes(b"w" * 4)
    else:
        (folder / "optimizer.pt").unlink()
    assert says in incomplete_reason(folder)


def test_last_complete_skips_newer_incomplete_ones_with_a_message(tmp_path: Path) -> None:
    cb = callback(Acc(), [], [])
    save(tmp_path, 2, cb)
    save(tmp_path, 4, cb)
    (tmp_path / "checkpoint-6").mkdir()  # killed during the save of step 6
    (tmp_path / "checkpoint-6" / "model.safetensors").write_bytes(b"half")
    said: list[str] = []
    assert last_complete(tmp_path, say=said.append) == tmp_path / "checkpoint-4"
    assert len(said) == 1 and "checkpoint-6" in said[0] and "incomplete" in said[0]


def test_a_checkpoint_written_again_loses_its_old_marker_first(tmp_path: Path) -> None:
    cb = callback(Acc(), [], [])
    folder = save(tmp_path, 4, cb)
    # a resume from an older checkpoint reaches step 4 again: the save starts, the process dies
    cb.on_step_end(SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=4),
                   SimpleNamespace(should_save=True))
    assert "no proofcheck_complete.json" in incomplete_reason(folder)


def test_resolve_resume_picks_the_newest_complete_or_refuses_an_incomplete_path(tmp_path: Path) -> None:
    from proofcheck.train.run import resolve_resume

    cb = callback(Acc(), [], [])
    save(tmp_path, 1, cb)
    (tmp_path / "checkpoint-2").mkdir()
    assert resolve_resume(SimpleNamespace(resume_from_checkpoint="last", output_dir=str(tmp_path))) == \
        str(tmp_path / "checkpoint-1")
    with pytest.raises(ConfigError, match="incomplete checkpoint"):
        resolve_resume(SimpleNamespace(resume_from_checkpoint=str(tmp_path / "checkpoint-2"),
                                       output_dir=str(tmp_path)))
    (tmp_path / "checkpoint-1" / MARKER).unlink()
    with pytest.raises(ConfigError, match="none complete"):
        resolve_resume(SimpleNamespace(resume_from_checkpoint="last", output_dir=str(tmp_path)))


def test_restore_history_keeps_what_the_checkpoint_had_up_to_its_step(tmp_path: Path) -> None:
    from proofcheck.train.run import restore_history

    folder = save(tmp_path, 2, callback(Acc(), [(1, 0.1), (2, 0.2)], [{"step": 0, "seconds": 30.0}, {"step": 2}],
                                        [{"step": 0}, {"step": 1}, {"step": 2}]))
    history, eval_cb = SimpleNamespace(rewards=[]), SimpleNamespace(history=[], curve=[], timeline=[])
    restore_history(str(folder), history, eval_cb)
    assert history.rewards == [(1, 0.1), (2, 0.2)] and [e["step"] for e in eval_cb.history] == [0, 2]
    assert [e["step"] for e in eval_cb.curve] == [0, 1, 2]
    assert eval_cb.timeline == [("full", 30.0), ("full", 0.0)]  # the time budget's estimate of a full evaluation
