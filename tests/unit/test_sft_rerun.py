"""The SFT warm-up run again into a finished `--out` trains nothing (train/sft.py, issue 37).

No model here: the model path does not exist, so a warm-up that tried to train would fail loading it.
The integration test (tests/integration/test_resume_idempotent.py) runs the real warm-up twice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofcheck.train.sft import PLAN_FILE, WarmupExists, main, warmup, warmup_settings

MODEL = "no-such-model"
SETTINGS = {"steps": 3, "seed": 0, "learning_rate": 1e-3, "batch_size": 8, "lora_r": 0, "lora_layers": None,
            "prompt_style": "full"}


def finished(out: Path, settings: dict | None) -> Path:
    """An --out as a finished warm-up leaves it: the model, then the plan (with its settings, when recorded)."""
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"trained")
    plan = {"steps": 3, "max_steps": 3} | ({"settings": settings} if settings is not None else {})
    (out / PLAN_FILE).write_text(json.dumps(plan))
    return out


@pytest.mark.parametrize("recorded", [warmup_settings(MODEL, 16, None, **SETTINGS), None])
def test_a_finished_warmup_is_left_as_it_is(tmp_path: Path, recorded: dict | None) -> None:
    out = finished(tmp_path / "sft", recorded)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    said: list[str] = []
    assert warmup(MODEL, out, tasks=16, log=said.append, **SETTINGS) == out
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert any("holds a finished warm-up (3 steps): nothing to train" in m for m in said)


@pytest.mark.parametrize(("change", "says"), [
    ({"steps": 5}, "steps: 3 there, 5 now"),
    ({"learning_rate": 2e-3}, "learning_rate: 0.001 there, 0.002 now"),
    ({"prompt_style": "compact"}, "prompt_style: 'full' there, 'compact' now"),
])
def test_other_settings_for_a_finished_warmup_are_an_error(tmp_path: Path, change: dict, says: str) -> None:
    out = finished(tmp_path / "sft", warmup_settings(MODEL, 16, None, **SETTINGS))
    with pytest.raises(WarmupExists, match=says):
        warmup(MODEL, out, tasks=16, log=lambda m: None, **{**SETTINGS, **change})


def test_a_warmup_in_the_old_batch_order_is_not_taken_for_this_one(tmp_path: Path) -> None:
    """Before the batch order was recorded, warm-ups took transformers' group_by_length order (held-out 0.765
    against 0.811 at 64 steps): their plans lack `batch_order` and are not reused."""
    old = {k: v for k, v in warmup_settings(MODEL, 16, None, **SETTINGS).items() if k != "batch_order"}
    out = finished(tmp_path / "sft", old)
    with pytest.raises(WarmupExists, match="batch_order: None there, 'sorted by length within windows of 8"):
        warmup(MODEL, out, tasks=16, log=lambda m: None, **SETTINGS)


def test_given_tasks_are_recorded_by_their_content() -> None:
    tasks = [{"problem": "p", "steps": ["s"], "gold_verification": "v"}]
    same = warmup_settings(MODEL, [dict(t) for t in tasks], None, **SETTINGS)
    assert warmup_settings(MODEL, tasks, None, **SETTINGS) == same
    assert warmup_settings(MODEL, [{**tasks[0], "problem": "q"}], None, **SETTINGS) != same


def test_the_cli_exits_2_naming_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = finished(tmp_path / "sft", warmup_settings(MODEL, 16, None, **SETTINGS))
    assert main(["--model", MODEL, "--out", str(out), "--tasks", "16", "--steps", "4", "--batch-size", "8"]) == 2
    err = capsys.readouterr().err
    assert "other settings (steps: 3 there, 4 now)" in err and "choose another --out" in err
