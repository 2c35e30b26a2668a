"""`proofcheck train`: `accelerate launch` on the installed train/grpo.py, shown in `proofcheck --help`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from proofcheck.cli import build_parser
from proofcheck.commands.train import grpo_script

REPO = Path(__file__).resolve().parents[2]
RECIPE = str(REPO / "configs" / "grpo" / "tiny-cpu.yaml")


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proofcheck.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def test_listed_in_the_top_level_help() -> None:
    text = build_parser().format_help()
    assert "train" in text and "accelerate launch" in text and "train/grpo.py" in text


def test_the_command_it_runs() -> None:
    r = cli("train", "--config", RECIPE, "--num-processes", "2", "--print-command", "--max_steps", "3",
            "--output_dir", "runs/x")
    assert r.returncode == 0, r.stderr
    cmd = r.stdout.split()
    assert cmd[1:3] == ["-m", "accelerate.commands.launch"] and cmd[3:5] == ["--num_processes", "2"]
    assert Path(cmd[5]) == grpo_script() and grpo_script().is_file() and grpo_script().name == "grpo.py"
    assert cmd[6:] == ["--config", RECIPE, "--max_steps", "3", "--output_dir", "runs/x"]  # handed on in order


def test_accelerate_really_starts_the_packaged_entry() -> None:
    """Through accelerate to train/grpo.py, which lists every training option and exits 0 (nothing loaded)."""
    r = cli("train", "--config", RECIPE, "--help-all", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "--num_generations" in r.stdout and "--include_reference_solution" in r.stdout


def test_a_missing_recipe_is_a_usage_error() -> None:
    r = cli("train", "--config", "configs/grpo/no-such.yaml")
    assert r.returncode == 2 and "no such file" in r.stderr
