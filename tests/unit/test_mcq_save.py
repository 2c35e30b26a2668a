"""MCQ saves: the snapshot policy, the journal, and resuming from snapshot + journal (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofcheck.bench.mcq_backends import BackendSettings
from proofcheck.bench.mcq_run import ResumeMismatch, RunConfig, SnapshotPolicy, prepare_month

DATA = Path(__file__).resolve().parents[1] / "data" / "lmb"
MONTH = "209901"  # six items

POLICY = SnapshotPolicy(min_items=50, growth=0.5, interval_s=30.0)


@pytest.mark.parametrize(("new", "snapshotted", "since_s", "due"), [
    (0, 0, 0.0, False),
    (49, 0, 0.0, False),     # below min_items
    (50, 0, 0.0, True),
    (50, 100, 0.0, True),    # 0.5 * 100 = 50
    (50, 400, 0.0, False),   # needs 200 once 400 are snapshotted
    (200, 400, 0.0, True),
    (1, 400, 29.9, False),
    (1, 400, 30.0, True),    # slow run: time says so
    (0, 400, 60.0, False),   # nothing new, nothing to write
])
def test_snapshot_policy(new: int, snapshotted: int, since_s: float, due: bool) -> None:
    assert POLICY.due(new, snapshotted, since_s) is due


# Snapshot sizes of a 10,000-item month written without pause, by hand: the first after 50 items
# (min_items), then each time the new items reach max(50, half of what is snapshotted), rounded up
# to whole items: 50, 100, 150, 225, 338 (225 + 113), ... The next after 8675 would need 4338 more.
SNAPSHOTS_BY_HAND = [50, 100, 150, 225, 338, 507, 761, 1142, 1713, 2570, 3855, 5783, 8675]


def test_snapshot_bytes_stay_linear() -> None:
    """Records written by all snapshots of a 10,000-item month stay under 4x the month."""
    snapshotted, new, sizes = 0, 0, []
    for _ in range(10_000):
        new += 1
        if POLICY.due(new, snapshotted, 0.0):
            snapshotted += new
            new = 0
            sizes.append(snapshotted)
    assert sizes == SNAPSHOTS_BY_HAND
    assert sum(sizes) == 25_869 < 4 * 10_000  # a geometric series with ratio 1.5 sums to 3x its last term


def config(tmp_path: Path, **kw) -> RunConfig:
    settings = BackendSettings(backend="vllm", model="m", base_url="http://127.0.0.1:1/v1")
    return RunConfig(months=[MONTH], settings=settings, data_dir=DATA, results_dir=tmp_path, **kw)


def record(run, i: int, answer: str | None, error: str | None = None) -> dict:
    correct = run.shuffled[i][1]
    return {"id": run.items[i].id, "index": i, "correct_answer": correct, "model_answer": answer,
            "is_correct": answer == correct, "error": error, "samples": None}


def test_journal_then_resume(tmp_path: Path) -> None:
    run, pending = prepare_month(config(tmp_path), MONTH)
    assert pending == list(range(6))
    run.start(complete=False)
    run.add(record(run, 0, "A"))
    run.add(record(run, 1, None, error="HTTP 500"))  # failed: journaled, re-run on resume
    run.add(record(run, 2, "B"))
    # a crash here: the results file is the start snapshot, the journal holds the three items
    doc = json.loads(run.path.read_text(encoding="utf-8"))
    assert doc["detailed_results"] == [] and doc["test_info"]["complete"] is False
    lines = run.journal_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["seed"] == 42
    with open(run.journal_path, "a", encoding="utf-8") as f:
        f.write('{"id": "torn')  # the record being written when the machine died

    again, pending = prepare_month(config(tmp_path, resume=True), MONTH)
    assert sorted(again.records) == sorted([run.items[0].id, run.items[2].id])
    assert pending == [1, 3, 4, 5]
    again.start(complete=False)  # the kept records move into the snapshot, the journal starts afresh
    assert len(json.loads(again.path.read_text(encoding="utf-8"))["detailed_results"]) == 2
    assert len(again.journal_path.read_text(encoding="utf-8").splitlines()) == 1
    for i in pending:
        again.add(record(again, i, "C"))
    final = again.finish()
    assert final["test_info"]["complete"] is True and len(final["detailed_results"]) == 6
    assert not again.journal_path.exists()
    assert json.loads(again.path.read_text(encoding="utf-8")) == final


def test_fresh_run_drops_an_old_journal(tmp_path: Path) -> None:
    run, _ = prepare_month(config(tmp_path), MONTH)
    run.start(complete=False)
    run.add(record(run, 0, "A"))
    fresh, pending = prepare_month(config(tmp_path), MONTH)  # no --resume: start over
    assert pending == list(range(6))
    fresh.start(complete=False)
    again, pending = prepare_month(config(tmp_path, resume=True), MONTH)
    assert pending == list(range(6))  # the first run's item did not leak into the fresh one


def test_resume_refuses_a_journal_of_another_seed(tmp_path: Path) -> None:
    run, _ = prepare_month(config(tmp_path, seed=1), MONTH)
    run.start(complete=False)
    run.add(record(run, 0, "A"))
    run.path.unlink()  # only the journal is left
    with pytest.raises(ResumeMismatch, match=r"journal\.jsonl: made with seed=1, this run has seed=42"):
        prepare_month(config(tmp_path, resume=True), MONTH)
