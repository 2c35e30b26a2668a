"""Resuming is idempotent (issue 37): real TRL GRPOTrainer on the tiny model, one process, LoRA.

A run of 4 steps (a checkpoint every 2) is resumed with `--resume_from_checkpoint last` twice: each
resume trains nothing and leaves every file as it was (no checkpoint-5, the same run_summary.json
with its reward history, the same model files). A resume whose final save was lost writes it from
the last checkpoint, identical to the one the training wrote; a resume from checkpoint-2 of 4 ends
at step 4. The SFT warm-up run twice into one folder trains once. The two-rank version of the
requeue is in tests/integration/test_distributed_rehearsal.py.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

REWARD_MODULE = '''
"""A dense test reward reached by dotted path (pc_resume_rewards:DigitShare)."""


class DigitShare:
    """Share of digit characters in the completion: varies in every group, so the weights move."""

    def __init__(self):
        self.__name__ = "digits"

    def __call__(self, completions, **kwargs):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [sum(ch.isdigit() for ch in t) / max(1, len(t)) for t in texts]
'''


def argv(model: Path, out: Path, *extra: str) -> list[str]:
    """4 steps of 4 generations of 16 tokens, LoRA, a checkpoint every 2 steps, held-out evaluation at the end."""
    return ["--model_name_or_path", str(model), "--output_dir", str(out), "--use_cpu", "true", "--bf16", "false",
            "--report_to", "none", "--synthetic_count", "24", "--include_reference_solution", "false",
            "--eval_fraction", "0.2", "--eval_max_samples", "2", "--eval_passes", "2", "--eval_max_new_tokens", "8",
            "--eval_every_steps", "0", "--max_steps", "4", "--per_device_train_batch_size", "4",
            "--num_generations", "4", "--max_completion_length", "16", "--learning_rate", "1e-3",
            "--logging_steps", "1", "--save_strategy", "steps", "--save_steps", "2", "--save_total_limit", "5",
            "--seed", "0", "--use_peft", "true", "--lora_r", "8", "--lora_alpha", "16",
            "--lora_target_modules", "q_proj", "v_proj", "--save_merged", "true", "--save_adapter", "true",
            "--reward_funcs", "format", "pc_resume_rewards:DigitShare", "--reward_weights", "0.1", "1.0", *extra]


def run(model: Path, out: Path, *extra: str) -> dict:
    from proofcheck.train.args import parse
    from proofcheck.train.run import train

    return train(*parse(argv(model, out, *extra)))


def snapshot(out: Path) -> dict[str, tuple[str, int]]:
    """Every file under `out`: (sha256, mtime): a rewrite with the same bytes shows too."""
    return {str(p.relative_to(out)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(out.rglob("*")) if p.is_file()}


def checkpoints(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("checkpoint-*"))


@pytest.fixture(scope="module")
def reward_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("rewards")
    (d / "pc_resume_rewards.py").write_text(REWARD_MODULE, encoding="utf-8")
    return d


@pytest.fixture(autouse=True)
def rewards_importable(reward_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every launch builds its rewards (before it knows whether it trains)."""
    monkeypatch.syspath_prepend(str(reward_dir))


@pytest.fixture(scope="module")
def finished(tiny_model: Path, reward_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output_dir of a run trained to its end (step 4), checkpoints at steps 2 and 4."""
    out = tmp_path_factory.mktemp("finished") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(reward_dir))
        summary = run(tiny_model, out)
        assert summary["global_step"] == 4 and checkpoints(out) == ["checkpoint-2", "checkpoint-4"]
        yield out


@pytest.fixture
def copy(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished run for a test that changes it (its summary names the original's folders)."""
    dest = tmp_path / "run"
    shutil.copytree(finished, dest)
    return dest


def test_a_finished_run_resumed_twice_trains_nothing_and_changes_nothing(
        finished: Path, tiny_model: Path, capsys: pytest.CaptureFixture) -> None:
    from proofcheck.train.checkpoints import incomplete_reason

    summary = json.loads((finished / "run_summary.json").read_text())
    assert [r["step"] for r in summary["rewards"]] == [1, 2, 3, 4]
    assert len({r["reward"] for r in summary["rewards"]}) > 1  # a real history: the check below could fail
    before = snapshot(finished)
    for extra in ([], [], ["--max_steps", "3"]):  # requeued twice, then once with an end it has passed
        again = run(tiny_model, finished, "--resume_from_checkpoint", "last", *extra)
        assert again == summary and again["global_step"] == 4
    assert snapshot(finished) == before  # no checkpoint-5, same history, same model and adapter files
    assert checkpoints(finished) == ["checkpoint-2", "checkpoint-4"]
    assert incomplete_reason(finished / "checkpoint-4") is None
    said = capsys.readouterr().out
    assert said.count("checkpoint-4 is at step 4 and the run ends at step 4: nothing to train") == 2
    assert "checkpoint-4 is at step 4 and the run ends at step 3: nothing to train" in said


def test_a_lost_final_save_is_written_from_the_last_checkpoint(finished: Path, copy: Path, tiny_model: Path) -> None:
    original = json.loads((finished / "run_summary.json").read_text())
    for lost in ("run_summary.json", "merged", "adapter"):  # killed after checkpoint-4, before the final save
        shutil.rmtree(copy / lost) if (copy / lost).is_dir() else (copy / lost).unlink()
    kept = {k: v for k, v in snapshot(copy).items() if k.startswith("checkpoint-")}
    summary = run(tiny_model, copy, "--resume_from_checkpoint", "last")
    assert summary["global_step"] == 4 and summary["steps_this_run"] == 0
    for key in ("rewards", "first_reward", "final_reward"):
        assert summary[key] == original[key], key
    # the evaluation after the last step ran after checkpoint-4 was saved: not in it, and not redone
    assert [e["step"] for e in original["eval_history"]] == [4] and summary["eval_history"] == []
    assert summary["saved"] == {"merged": str(copy / "merged"), "adapter": str(copy / "adapter")}
    assert json.loads((copy / "run_summary.json").read_text()) == summary
    for name in ("merged/model.safetensors", "merged/config.json", "adapter/adapter_model.safetensors",
                 "adapter/adapter_config.json"):
        assert (copy / name).read_bytes() == (finished / name).read_bytes(), name
    # the card: the same prompt record; the k-pass calibration came from the evaluation after the last step,
    # which the lost save lost with it (not redone, not invented)
    card, recovered = (json.loads((d / "merged/proofcheck_prompt.json").read_text()) for d in (finished, copy))
    assert "calibration" in card and "calibration" not in recovered
    assert recovered == {k: v for k, v in card.items() if k != "calibration"}
    assert {k: v for k, v in snapshot(copy).items() if k.startswith("checkpoint-")} == kept


def test_a_resume_from_checkpoint_2_of_4_ends_at_step_4(finished: Path, copy: Path, tiny_model: Path) -> None:
    from proofcheck.train.checkpoints import incomplete_reason

    original = json.loads((finished / "run_summary.json").read_text())
    summary = run(tiny_model, copy, "--resume_from_checkpoint", str(copy / "checkpoint-2"))
    assert summary["start_step"] == 2 and summary["global_step"] == 4 and summary["steps_this_run"] == 2
    assert [r["step"] for r in summary["rewards"]] == [1, 2, 3, 4]
    assert summary["rewards"][:2] == original["rewards"][:2]
    assert checkpoints(copy) == ["checkpoint-2", "checkpoint-4"]  # ended at 4: no checkpoint-5
    assert incomplete_reason(copy / "checkpoint-4") is None
    assert json.loads((copy / "run_summary.json").read_text())["global_step"] == 4


def test_the_sft_warmup_run_again_trains_nothing(tiny_model: Path, tmp_path: Path) -> None:
    from proofcheck.train.sft import warmup

    out = tmp_path / "sft"
    said: list[str] = []
    kw = {"tasks": 4, "steps": 2, "batch_size": 2, "dtype": "float32", "log": said.append}
    warmup(tiny_model, out, **kw)
    assert json.loads((out / "sft_plan.json").read_text())["steps"] == 2
    before = snapshot(out)
    warmup(tiny_model, out, **kw)
    assert snapshot(out) == before
    assert sum("sft step" in m for m in said) == 2 and "nothing to train" in said[-1]
