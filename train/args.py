"""Parse `train/grpo.py`'s arguments: TRL's `GRPOConfig` + `ModelConfig` + our script arguments.

`TrlParser` reads `--config recipe.yaml` (values become defaults) and CLI flags (they win).
Around it we add what a user needs before anything heavy happens:
- `--help` is answered from our arguments and `ModelConfig` only (both import in ~0.3 s);
  `GRPOConfig` subclasses transformers' `TrainingArguments`, whose import pulls in torch
  (~5 s here), so its ~200 options are listed by `--help-all` instead;
- an unknown key in the YAML is reported with the file name and the closest known key;
- every configuration error (ours, TRL's `__post_init__` checks such as `num_generations`
  not dividing the generation batch, wrong CLI flags) becomes one `ConfigError` naming the
  config file, before any model is loaded.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Any

from proofcheck.train.config import ConfigError, ProofcheckScriptArguments, check_compatible, check_paths

HELP_EPILOG = """\
All GRPOConfig / TrainingArguments options are accepted too (in the YAML or as --flags), e.g.
--output_dir, --learning_rate, --max_steps, --per_device_train_batch_size, --num_generations,
--max_completion_length, --reward_weights, --use_vllm, --vllm_mode colocate|server, --use_cpu,
--bf16 true|false|auto, --report_to, --save_steps, --resume_from_checkpoint PATH|last, --seed.
Run `python train/grpo.py --help-all` to list them all (imports torch: a few seconds).

Examples:
  accelerate launch train/grpo.py --config configs/grpo/tiny-cpu.yaml
  accelerate launch --config_file configs/accelerate/zero3.yaml train/grpo.py \\
      --config configs/grpo/qwen3-8b-8gpu-zero3.yaml --learning_rate 5e-7"""


def _config_path(argv: list[str]) -> str | None:
    for i, a in enumerate(argv):
        if a == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--config="):
            return a.split("=", 1)[1]
    return None


def quick_help(prog: str = "train/grpo.py") -> str:
    """The fast `--help` text: our script arguments and ModelConfig, plus a pointer to the rest."""
    import argparse

    from trl import TrlParser
    from trl.trainer.model_config import ModelConfig

    parser = TrlParser((ProofcheckScriptArguments, ModelConfig), prog=prog, epilog=HELP_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="GRPO training of a proof verifier with TRL's GRPOTrainer.")
    parser.add_argument("--config", help="YAML recipe (configs/grpo/*.yaml); CLI flags override its values")
    return parser.format_help()


def make_parser(prog: str = "train/grpo.py") -> Any:
    """The full TrlParser over (ProofcheckScriptArguments, GRPOConfig, ModelConfig). Imports torch."""
    from trl import GRPOConfig, ModelConfig, TrlParser

    return TrlParser((ProofcheckScriptArguments, GRPOConfig, ModelConfig), prog=prog, epilog=HELP_EPILOG)


def known_keys(parser: Any) -> set[str]:
    """Every option name the parser accepts (the `dest` of each action), plus TrlParser's `env`."""
    return {a.dest for a in parser._actions} | {"env"}


def check_yaml_keys(path: str, keys: set[str]) -> None:
    """Raise ConfigError listing unknown keys of the YAML at `path` (with the closest known key)."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--config {path}: no such file (recipes live in configs/grpo/)")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a YAML mapping of option: value")
    unknown = [k for k in data if k not in keys]
    if unknown:
        lines = []
        for k in unknown:
            close = difflib.get_close_matches(str(k), sorted(keys), n=1)
            lines.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ConfigError(f"{path}: unknown key(s): {', '.join(lines)}. Fix the spelling or remove them; "
                          "`python train/grpo.py --help-all` lists every option.")


def _flag_value(argv: list[str], name: str) -> tuple[int, str] | None:
    """(index of the value, value) of the last `--name V` / `--name=V` in argv, or None."""
    found = None
    for i, a in enumerate(argv):
        if a == f"--{name}" and i + 1 < len(argv):
            found = (i + 1, argv[i + 1])
        elif a.startswith(f"--{name}="):
            found = (i, a.split("=", 1)[1])
    return found


def _yaml_value(config: str | None, key: str) -> Any:
    import yaml

    if not config or not Path(config).is_file():
        return None
    data = yaml.safe_load(Path(config).read_text(encoding="utf-8"))
    return data.get(key) if isinstance(data, dict) else None


def resolve_auto_bf16(argv: list[str], config: str | None) -> list[str]:
    """`bf16: auto` (in the YAML) or `--bf16 auto` -> `--bf16 true|false` by `proofcheck.precision`,
    before TRL parses (its bool field refuses `auto`). The CLI wins over the YAML, as for every key;
    `PROOFCHECK_DTYPE` overrides the automatic rule. The device is the CPU when `use_cpu` is set."""
    cli = _flag_value(argv, "bf16")
    value = cli[1] if cli else _yaml_value(config, "bf16")
    if str(value).strip().lower() != "auto":
        return argv
    from proofcheck.precision import choose_dtype

    use_cpu = _flag_value(argv, "use_cpu")
    on_cpu = str(use_cpu[1] if use_cpu else _yaml_value(config, "use_cpu")).strip().lower() in ("true", "1", "yes")
    choice = choose_dtype(device="cpu" if on_cpu else "auto")
    print(f"[proofcheck] bf16: auto -> {str(choice.bf16).lower()} ({choice.reason})", file=sys.stderr, flush=True)
    out = list(argv)
    if cli is None:
        return [*out, "--bf16", str(choice.bf16).lower()]
    i, _ = cli
    out[i] = f"--bf16={str(choice.bf16).lower()}" if out[i].startswith("--bf16=") else str(choice.bf16).lower()
    return out


def parse(argv: list[str] | None = None, *, require_data: bool = True) -> tuple[ProofcheckScriptArguments, Any, Any]:
    """Parse argv into (script_args, GRPOConfig, ModelConfig); raise ConfigError on any bad value.

    `require_data=False` skips the check that data files exist (to check a recipe elsewhere).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    config = _config_path(argv)
    where = f"{config}: " if config else ""
    if config:
        check_yaml_keys(config, known_keys(parser))
    try:
        argv = resolve_auto_bf16(argv, config)
        script, training, model = parser.parse_args_and_config(argv)
    except ConfigError as e:
        raise ConfigError(f"{where}{e}") from e
    except (ValueError, TypeError) as e:
        msg = str(e)
        if "num_generations" in msg:
            msg += (" Fix: make per_device_train_batch_size x number of processes x steps_per_generation "
                    "(default: gradient_accumulation_steps) a multiple of num_generations, or set "
                    "generation_batch_size to such a multiple.")
        raise ConfigError(f"{where}{msg}") from e
    if isinstance(training.resume_from_checkpoint, str) and training.resume_from_checkpoint.lower() in (
            "true", "last", "latest"):
        training.resume_from_checkpoint = "last"
    try:
        check_compatible(script, training, model)
        if require_data:
            check_paths(script, model)
    except ConfigError as e:
        raise ConfigError(f"{where}{e}") from e
    return script, training, model
