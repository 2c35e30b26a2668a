"""A real GRPO run (TRL, tiny model, plain transformers generation) with `bf16: auto` and a time
budget: the dtype is resolved by proofcheck.precision before TRL parses it, and the budget stops
training after the first step, with the final evaluation and the save still done."""

from __future__ import annotations

from pathlib import Path

from proofcheck.precision import choose_dtype, flush_denormals


def test_time_budget_stops_early_and_bf16_auto_follows_the_machine(tiny_model: Path, tmp_path: Path) -> None:
    from proofcheck.train.args import parse
    from proofcheck.train.run import train

    out = tmp_path / "run"
    args = ["--model_name_or_path", str(tiny_model), "--output_dir", str(out), "--use_cpu", "true",
            "--bf16", "auto", "--report_to", "none", "--synthetic_count", "24", "--include_reference_solution",
            "false", "--eval_fraction", "0.2", "--eval_max_samples", "2", "--eval_passes", "2",
            "--eval_max_new_tokens", "8", "--max_steps", "20", "--per_device_train_batch_size", "4",
            "--num_generations", "4", "--max_completion_length", "16", "--save_strategy", "no", "--seed", "0",
            "--use_vllm", "false",
            # this process started well over a second ago: the first step already leaves no room
            "--time_budget_s", "1"]
    script, training, model = parse(args)
    assert training.bf16 == choose_dtype(device="cpu").bf16
    summary = train(script, training, model)
    assert summary["global_step"] == 1
    assert summary["budget"]["stopped_early_at"] == 1 and summary["budget"]["time_budget_s"] == 1
    assert summary["eval_history"][-1]["step"] == 1          # the final evaluation still ran
    assert (out / "merged" / "config.json").is_file()        # and the model was saved
    assert summary["precision"] == {"train_bf16": choose_dtype(device="cpu").bf16, "vllm_dtype": None,
                                    "flush_denormal": True}
    flush_denormals(False)   # the run set this thread's mode; the tests after it in this process get the default back
