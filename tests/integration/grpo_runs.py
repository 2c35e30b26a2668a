"""What the GRPO integration tests share: a small run's command line (`argv`) and the text of the test rewards
reached by dotted path (`pc_test_rewards:Class`, written to a tmp folder by conftest.py's `test_rewards`)."""

from __future__ import annotations

from pathlib import Path

REWARD_MODULE = '''
"""Test rewards reached by dotted path (pc_test_rewards:Class)."""

TAGS = ("<assessment>", "</assessment>", "<errors>", "</errors>", "<first_error_step>", "</first_error_step>")


def _text(c):
    return c[-1]["content"] if isinstance(c, list) else c


class DigitShare:
    """Share of digit characters in the completion: dense, so every group has reward variance."""

    def __init__(self):
        self.__name__ = "digits"

    def __call__(self, completions, **kwargs):
        return [sum(ch.isdigit() for ch in _text(c)) / max(1, len(_text(c))) for c in completions]


SEEN: list = []


class CrashAt:
    """Raises while step PC_CRASH_AT_STEP trains (after the checkpoints before it), else 0."""

    def __init__(self):
        self.__name__ = "crash"

    def __call__(self, completions, trainer_state=None, **kwargs):
        import os

        step = trainer_state.global_step + 1
        if step == int(os.environ.get("PC_CRASH_AT_STEP", "0")):
            raise RuntimeError(f"crash in step {step}")
        return [0.0] * len(completions)


class SeenIds:
    """Records the proof_ids of every batch it rewards (0 reward): which prompts each step trained on (batches
    of num_generations = 4 completions), and the uncertainty pool's verifications (batches of its passes)."""

    def __init__(self):
        self.__name__ = "seen"

    def __call__(self, completions, **kwargs):
        SEEN.append(list(kwargs["proof_id"]))
        return [0.0] * len(completions)


class TagShare:
    """Share of the protocol's six tags present in the completion (a shaped format reward)."""

    def __init__(self):
        self.__name__ = "tags"

    def __call__(self, completions, **kwargs):
        return [sum(t in _text(c) for t in TAGS) / len(TAGS) for c in completions]
'''


def argv(model: Path, out: Path, *extra: str) -> list[str]:
    """A small, fast run: 24 synthetic tasks, 3 steps, 4 generations of 16 tokens."""
    return ["--model_name_or_path", str(model), "--output_dir", str(out), "--use_cpu", "true", "--bf16", "false",
            "--report_to", "none", "--synthetic_count", "24", "--include_reference_solution", "false",
            "--eval_fraction", "0.2", "--eval_max_samples", "2", "--eval_passes", "2", "--eval_max_new_tokens", "8",
            "--max_steps", "3", "--per_device_train_batch_size", "4", "--num_generations", "4",
            "--max_completion_length", "16", "--learning_rate", "1e-3", "--logging_steps", "1",
            "--save_strategy", "no", "--seed", "0",
            "--reward_funcs", "meta_verifier", "format", "pc_test_rewards:DigitShare",
            "--reward_weights", "1.0", "0.1", "1.0", *extra]


