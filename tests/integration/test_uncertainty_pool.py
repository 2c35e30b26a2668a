"""The uncertainty pool (train/uncertainty.py, train/pool_queue.py) in real GRPO runs on the tiny model: every
step trains on queued proofs from the first cycle on, and a run resumed after a crash trains on the prompts of
an uninterrupted one. Two ranks: tests/integration/test_distributed_rehearsal.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from grpo_runs import argv


def trained(seen: list[list[str]]) -> list[set[str]]:
    """The prompts of each training step (4 generations) among SeenIds' batches (the pool's have 2 passes)."""
    return [set(ids) for ids in seen if len(ids) == 4]


POOL_ARGS = ("--uncertainty_pool", "6", "--uncertainty_passes", "2", "--uncertainty_every", "2",
             "--eval_max_samples", "0", "--max_steps", "6", "--save_strategy", "steps", "--save_steps", "3",
             "--reward_funcs", "meta_verifier", "format", "pc_test_rewards:DigitShare", "pc_test_rewards:SeenIds",
             "pc_test_rewards:CrashAt", "--reward_weights", "1.0", "0.1", "1.0", "0.0", "0.0")


def test_uncertainty_pool_serves_its_choice_to_the_trainer(tiny_model: Path, tmp_path: Path,
                                                             test_rewards: Path) -> None:
    """With uncertainty_pool, every 2 steps the pool is verified on the trainer's generation and every step
    trains on its queued proofs, in rank order, none from the fallback order (issue 48: the first cycle was one
    batch short). The Trainer draws steps 3 and 4 before the refresh at step 3 begins, so the refresh before
    step 1 queues steps 1-4 and the one at step 3 steps 5-6; none comes after step 4 (it would serve no step)."""
    import pc_test_rewards

    from proofcheck.train.args import parse
    from proofcheck.train.run import train

    pc_test_rewards.SEEN.clear()
    summary = train(*parse(argv(tiny_model, tmp_path / "pool", *POOL_ARGS)))
    pool = summary["uncertainty"]
    refreshes = pool["refreshes"]
    assert [e["step"] for e in refreshes] == [0, 2]
    assert [(e["from_chunk"], e["wanted"], e["queued"]) for e in refreshes] == [(0, 4, 4), (4, 2, 2)]
    assert all(e["pool"] == 6 and 0.0 <= e["signal_share"] <= 1.0 for e in refreshes)
    assert pool["chunks"] == 6 and pool["queued_rows"] == 6 and pool["fallback_rows"] == 0
    assert len(set(refreshes[0]["selected"]) | set(refreshes[1]["selected"])) == 6  # the pool moved on
    assert trained(pc_test_rewards.SEEN) == [{pid} for pid in refreshes[0]["selected"] + refreshes[1]["selected"]]
    # the refresh at step 3's beginning is not step time (the one before step 1 is in no step)
    assert [s > 0 for s in summary["step_split_s"]["excluded_s"]] == [False, False, True, False, False, False]


def test_a_resumed_pool_trains_on_the_prompts_of_an_uninterrupted_run(tiny_model: Path, tmp_path: Path,
                                                                      test_rewards: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Crash in step 5, resume from checkpoint-3: steps 4-6 train on the prompts the uninterrupted run trained
    on, from the pool state saved with the checkpoint (the queue made at step 3's begin included), with no
    pool verification wasted on the resume (issue 48: the refresh ran again and the skip drained its queue)."""
    import pc_test_rewards

    from proofcheck.train.args import parse
    from proofcheck.train.run import train

    pc_test_rewards.SEEN.clear()
    whole = train(*parse(argv(tiny_model, tmp_path / "whole", *POOL_ARGS)))
    uninterrupted = trained(pc_test_rewards.SEEN)
    assert len(uninterrupted) == 6

    out = tmp_path / "crashed"
    monkeypatch.setenv("PC_CRASH_AT_STEP", "5")
    with pytest.raises(RuntimeError, match="crash in step 5"):
        train(*parse(argv(tiny_model, out, *POOL_ARGS)))
    assert (out / "checkpoint-3" / "proofcheck_uncertainty.json").is_file()
    monkeypatch.delenv("PC_CRASH_AT_STEP")
    pc_test_rewards.SEEN.clear()
    resumed = train(*parse(argv(tiny_model, out, *POOL_ARGS, "--resume_from_checkpoint", "last")))
    assert resumed["resumed_from"] == str(out / "checkpoint-3")
    assert trained(pc_test_rewards.SEEN) == uninterrupted[3:]
    def chosen(summary: dict) -> list[tuple[int, list[str]]]:
        return [(e["step"], e["selected"]) for e in summary["uncertainty"]["refreshes"]]

    assert chosen(resumed) == chosen(whole)  # the crashed run's history, restored; none made again
    assert len(pc_test_rewards.SEEN) == 3  # steps 4-6: no pool verification in this launch
    assert resumed["uncertainty"]["fallback_rows"] == 0


def test_by_split_draw_keeps_pairs_and_resumes_with_its_share(tiny_model: Path, tmp_path: Path,
                                                              test_rewards: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`uncertainty_draw: by_split` (balanced batches, 2 prompts a step): each refresh verifies half valid, half
    flawed at first, records how many of each split and the next refresh's flawed share, queues valid/flawed
    pairs, and a run resumed after a crash draws what the uninterrupted one drew (the share and each class's
    place are saved with the checkpoint)."""
    import pc_test_rewards

    from proofcheck.train.args import parse
    from proofcheck.train.run import train

    args = (*POOL_ARGS, "--per_device_train_batch_size", "8", "--balanced_batches", "true",
            "--shuffle_dataset", "false", "--uncertainty_pool", "8", "--uncertainty_draw", "by_split")
    pc_test_rewards.SEEN.clear()
    whole = train(*parse(argv(tiny_model, tmp_path / "whole", *args)))
    refreshes = whole["uncertainty"]["refreshes"]
    assert refreshes[0]["flawed"] == 4 and refreshes[0]["pool"] == 8
    assert all(0.25 <= e["next_flawed_share"] <= 0.75 and 0 <= e["split_flawed"] <= e["flawed"] for e in refreshes)
    assert whole["uncertainty"]["fallback_rows"] == 0

    out = tmp_path / "crashed"
    monkeypatch.setenv("PC_CRASH_AT_STEP", "5")
    with pytest.raises(RuntimeError, match="crash in step 5"):
        train(*parse(argv(tiny_model, out, *args)))
    monkeypatch.delenv("PC_CRASH_AT_STEP")
    resumed = train(*parse(argv(tiny_model, out, *args, "--resume_from_checkpoint", "last")))
    assert [(e["step"], e["selected"]) for e in resumed["uncertainty"]["refreshes"]] == \
        [(e["step"], e["selected"]) for e in refreshes]
