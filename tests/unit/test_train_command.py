"""`proofcheck train`: `accelerate launch` on the installed train/grpo.py, shown in `proofcheck --help`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from proofcheck.app.cli import build_parser
from proofcheck.app.launch import grpo_script

REPO = Path(__file__).resolve().parents[2]
RECIPE = str(REPO / "configs" / "grpo" / "tiny-cpu.yaml")


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    # a hang guard, not a time limit: at nice 19 beside a GRPO run the `--plan` import took over 120 s
    return subprocess.run([sys.executable, "-m", "proofcheck.app.cli", *args], capture_output=True, text=True,
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


def test_every_accelerate_option_goes_to_accelerate_multi_node_included() -> None:
    """The SLURM line of docs/training.md through `proofcheck train`: accelerate's options (either
    spelling, with their values) go to `accelerate launch`, the recipe's overrides to train/grpo.py."""
    r = cli("train", "--config", "qwen3-8b-8gpu-zero3", "--accelerate-config", "multi-node", "--num_machines", "2",
            "--num_processes", "16", "--machine-rank", "1", "--main_process_ip", "10.0.0.1", "--main_process_port=29500",
            "--rdzv_backend", "static", "--same_network", "--vllm_server_host", "h", "--gradient_accumulation_steps", "2",
            "--print-command")
    assert r.returncode == 0, r.stderr
    cmd = r.stdout.split()
    entry = cmd.index(str(grpo_script()))
    assert cmd[3:entry] == ["--config_file", str(REPO / "configs/accelerate/multi-node.yaml"), "--num_machines", "2",
                            "--num_processes", "16", "--machine-rank", "1", "--main_process_ip", "10.0.0.1",
                            "--main_process_port=29500", "--rdzv_backend", "static", "--same_network"]
    assert cmd[entry + 1:] == ["--config", str(REPO / "configs/grpo/qwen3-8b-8gpu-zero3.yaml"), "--vllm_server_host",
                               "h", "--gradient_accumulation_steps", "2"]  # the recipe's meaning of the shared name


def test_the_options_both_parsers_know_stay_with_the_recipe() -> None:
    """GRPO_OWNS is exactly the overlap of accelerate launch's options and train/grpo.py's."""
    from accelerate.commands.launch import launch_command_parser

    from proofcheck.app.commands.train import GRPO_OWNS, accelerate_options
    from proofcheck.train.args import make_parser

    def names(parser) -> set[str]:
        return {s[2:].replace("-", "_") for a in parser._actions for s in a.option_strings if s.startswith("--")}

    assert names(launch_command_parser()) & names(make_parser()) == GRPO_OWNS
    assert {"num_machines", "machine_rank", "main_process_ip", "main_process_port", "rdzv_backend",
            "same_network", "mixed_precision"} <= set(accelerate_options()) and not GRPO_OWNS & set(accelerate_options())


def test_plan_runs_the_entry_alone_and_loads_nothing() -> None:
    r = cli("train", "--config", "qwen3-8b-8gpu-zero3", "--accelerate-config", "configs/accelerate/zero3.yaml",
            "--plan", "--plan_gpu_gib", "141")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "accelerate.commands.launch" not in r.stderr.splitlines()[0]
    assert "8 process(es), zero3" in r.stdout and "GPU 141 GiB" in r.stdout


def test_recipes_by_name_and_unknown_names() -> None:
    from proofcheck.app.launch import resolve_config, shipped_names

    assert resolve_config("tiny-cpu", "grpo") == REPO / "configs/grpo/tiny-cpu.yaml"
    assert resolve_config("configs/accelerate/zero3.yaml", "accelerate").is_file()
    assert {"qwen3-8b-lora-1gpu", "tiny-cpu"} <= set(shipped_names("grpo"))
    r = cli("train", "--config", "no-such-recipe")
    assert r.returncode == 2 and "qwen3-8b-lora-1gpu" in r.stderr  # the error lists what is shipped


def test_the_package_ships_the_configs() -> None:
    """pyproject packages configs/ as proofcheck.configs with every YAML in it (what `--config NAME` finds
    in an installed package)."""
    import tomllib

    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert meta["package-dir"]["proofcheck.configs"] == "configs" and "proofcheck.configs" in meta["packages"]
    globs = meta["package-data"]["proofcheck.configs"]
    shipped = {p for g in globs for p in (REPO / "configs").glob(g)}
    assert shipped == set((REPO / "configs").rglob("*.yaml")) and shipped
