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
    return CheckpointCallback(SimpleNamespace(accelerator=acc), SimpleNamespace(rewards=rewards, diagnostics=[]),
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
                                    "curve": [], "step_diagnostics": []}


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
    from proofcheck.train.resume import resolve_resume

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
    from proofcheck.train.resume import restore_history

    folder = save(tmp_path, 2, callback(Acc(), [(1, 0.1), (2, 0.2)], [{"step": 0, "seconds": 30.0}, {"step": 2}],
                                        [{"step": 0}, {"step": 1}, {"step": 2}]))
    history, eval_cb = SimpleNamespace(rewards=[], diagnostics=[]), SimpleNamespace(history=[], curve=[], timeline=[])
    restore_history(str(folder), history, eval_cb)
    assert history.rewards == [(1, 0.1), (2, 0.2)] and [e["step"] for e in eval_cb.history] == [0, 2]
    assert [e["step"] for e in eval_cb.curve] == [0, 1, 2]
    assert eval_cb.timeline == [("full", 30.0), ("full", 0.0)]  # the time budget's estimate of a full evaluation


def state(folder: Path, epochs: int, max_steps: int) -> None:
    (folder / "trainer_state.json").write_text(json.dumps({"num_train_epochs": epochs, "max_steps": max_steps}))


@pytest.mark.parametrize(("step", "max_steps", "saved_state", "epochs", "expected"), [
    (4, 4, None, 3.0, (4, 4)),        # the last checkpoint of the run: nothing left
    (5, 4, None, 3.0, (5, 4)),        # past the end (max_steps lowered)
    (2, 4, None, 3.0, None),          # below the end: train to step 4
    (3, -1, (3, 3), 3.0, (3, 3)),     # counted in epochs: the end the checkpoint's trainer computed
    (2, -1, (3, 3), 3.0, None),
    (3, -1, (3, 3), 5.0, None),       # epochs changed: the end is unknown before the data loader exists
    (3, -1, None, 3.0, None),         # no trainer state: unknown
])
def test_finished_at_compares_the_checkpoint_with_the_runs_end(tmp_path: Path, step: int, max_steps: int,
                                                               saved_state: tuple | None, epochs: float,
                                                               expected: tuple | None) -> None:
    from proofcheck.train.resume import finished_at

    folder = save(tmp_path, step, callback(Acc(), [], []), {"model.safetensors": b"w"})
    if saved_state is not None:
        state(folder, *saved_state)
    training = SimpleNamespace(max_steps=max_steps, num_train_epochs=epochs)
    assert finished_at(str(folder), training) == expected
    assert finished_at(None, training) is None


def finished_run(out: Path, files: dict[str, bytes] | None = None) -> Path:
    """An output_dir as a run of 4 steps (save_steps 2) leaves it, without its final save."""
    cb = callback(Acc(), [(1, 0.1), (2, 0.2)], [{"step": 0}])
    save(out, 2, cb, files)
    cb.history.rewards += [(3, 0.3), (4, 0.4)]
    cb.eval_cb.history.append({"step": 4})
    return save(out, 4, cb, files)


def run_args(out: Path, *, peft: bool = False) -> tuple:
    script = SimpleNamespace(save_merged=True, save_adapter=False)
    training = SimpleNamespace(output_dir=str(out), max_steps=4, num_train_epochs=3.0, bf16=False, use_vllm=False,
                               vllm_mode="colocate", max_completion_length=16)
    data = SimpleNamespace(with_reference=False, prompt_style="compact", summary=lambda: {"train": 8})
    return script, training, SimpleNamespace(use_peft=peft), data


def snapshot(out: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(out)): (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}


def test_a_finished_run_resumed_again_touches_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from proofcheck.train.resume import keep_finished_run

    folder = finished_run(tmp_path)
    (tmp_path / "merged").mkdir()
    (tmp_path / "merged" / "model.safetensors").write_bytes(b"final")
    summary = {"global_step": 4, "rewards": [{"step": 4, "reward": 0.4}], "saved": {"merged": str(tmp_path / "merged")}}
    (tmp_path / "run_summary.json").write_text(json.dumps(summary))
    before = snapshot(tmp_path)
    for _ in range(2):
        assert keep_finished_run(*run_args(tmp_path), str(folder), 4, 4) == summary
    assert snapshot(tmp_path) == before
    said = capsys.readouterr().out
    assert "checkpoint-4 is at step 4 and the run ends at step 4: nothing to train" in said
    assert "the final save is in place" in said and "writing it" not in said


def test_a_lost_final_save_is_written_from_the_last_checkpoint(tmp_path: Path) -> None:
    from proofcheck.prompt_card import CARD_FILE
    from proofcheck.train.resume import keep_finished_run

    files = {"config.json": b"{}", "model.safetensors": b"w" * 10, "tokenizer.json": b"t", "optimizer.pt": b"o",
             "scheduler.pt": b"s", "rng_state_0.pth": b"r", "trainer_state.json": b"{}", "training_args.bin": b"a",
             "global_step4/zero_pp_rank_0_mp_rank_00_model_states.pt": b"z"}
    folder = finished_run(tmp_path, files)
    checkpoints = {k: v[0] for k, v in snapshot(tmp_path).items()}
    summary = keep_finished_run(*run_args(tmp_path), str(folder), 4, 4)
    merged = tmp_path / "merged"
    assert sorted(p.name for p in merged.iterdir()) == sorted(
        ["config.json", "model.safetensors", "tokenizer.json", "training_args.bin", CARD_FILE])
    assert (merged / "model.safetensors").read_bytes() == b"w" * 10
    assert json.loads((tmp_path / "run_summary.json").read_text()) == summary
    assert summary["global_step"] == 4 and summary["steps_this_run"] == 0 and summary["start_step"] == 4
    assert summary["rewards"] == [{"step": s, "reward": s / 10} for s in (1, 2, 3, 4)]
    assert [e["step"] for e in summary["eval_history"]] == [0, 4] and summary["saved"] == {"merged": str(merged)}
    assert {k: v[0] for k, v in snapshot(tmp_path).items() if k.startswith("checkpoint-")} == checkpoints


@pytest.mark.parametrize(("files", "peft", "says"), [
    ({"global_step4/shard.pt": b"z", "optimizer.pt": b"o", "config.json": b"{}"}, False, "no gathered model weights"),
    ({"model.safetensors": b"w", "config.json": b"{}"}, True, "holds no LoRA adapter"),
])
def test_a_lost_final_save_that_the_checkpoint_cannot_give_fails_loudly(tmp_path: Path, files: dict, peft: bool,
                                                                         says: str) -> None:
    from proofcheck.train.resume import keep_finished_run

    folder = finished_run(tmp_path, files)
    with pytest.raises(ConfigError, match=says):
        keep_finished_run(*run_args(tmp_path, peft=peft), str(folder), 4, 4)
    assert not (tmp_path / "run_summary.json").exists()


def test_other_ranks_of_a_finished_run_write_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from proofcheck.train.resume import keep_finished_run

    folder = finished_run(tmp_path, {"config.json": b"{}", "model.safetensors": b"w"})
    monkeypatch.setenv("RANK", "1")
    before = snapshot(tmp_path)
    summary = keep_finished_run(*run_args(tmp_path), str(folder), 4, 4)
    assert summary["global_step"] == 4 and summary["saved"] == {"merged": str(tmp_path / "merged")}
    assert snapshot(tmp_path) == before
