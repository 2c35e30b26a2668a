"""The supervised stage of a recipe: the entry for `python` and `accelerate launch` (`proofcheck train` runs it for a
recipe with `stage: sft`).

    accelerate launch [--config_file configs/accelerate/zero3.yaml] train/supervised.py \\
        --config configs/sft/qwen3-8b-lora-1gpu.yaml [--flag value ...]

Parses TRL's SFTConfig + ModelConfig + SftScriptArguments (train/sft_config.py) from the YAML recipe and CLI
overrides, then trains with `AnswerOnlySFTTrainer` (train/sft_trainer.py: TRL's SFTTrainer, the vocabulary projected
at the answer tokens only on the CPU; on GPUs TRL's own fused head) on distilled rows (`sft_files`) and/or synthetic
tasks with gold verifications, and saves `<output_dir>/merged` and/or `adapter` with the prompt card, as GRPO does
(train/saving.py), so GRPO (`--model_name_or_path <output_dir>/merged`) and serving start from it.
`--plan [--plan_accelerate configs/accelerate/X.yaml] [--plan_gpu_gib 80]` prints the memory plan per GPU without
loading anything (train/sft_plan.py). Exit codes: 0 done, 2 configuration or data error (nothing loaded).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent  # run as a script, train/ would shadow top-level modules (see grpo.py)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]


def make_parser() -> Any:
    from trl import ModelConfig, SFTConfig, TrlParser

    from proofcheck.train.sft_config import SftScriptArguments

    return TrlParser((SftScriptArguments, SFTConfig, ModelConfig), prog="train/supervised.py")


def parse(argv: list[str], *, require_data: bool = True) -> tuple[Any, Any, Any]:
    """(SftScriptArguments, SFTConfig, ModelConfig) from argv; every error a ConfigError naming the recipe."""
    from proofcheck.train.args import _config_path, check_yaml_keys, known_keys, resolve_auto_bf16
    from proofcheck.train.config import ConfigError
    from proofcheck.train.sft_config import check_sft_paths

    parser = make_parser()
    config = _config_path(argv)
    where = f"{config}: " if config else ""
    if config:
        check_yaml_keys(config, known_keys(parser))
    try:
        script, training, model = parser.parse_args_and_config(resolve_auto_bf16(argv, config))
        if require_data:
            check_sft_paths(script)
    except (ConfigError, ValueError, TypeError) as e:
        raise ConfigError(f"{where}{e}") from e
    return script, training, model


def load_rows(script: Any) -> list[dict[str, Any]]:
    """The training rows: every `sft_files` row's prompt and completion, then the synthetic tasks' rows."""
    from proofcheck.data.loaders import DataError, iter_json_objects
    from proofcheck.train.sft import sft_rows

    rows, problems = [], []
    for path in script.sft_files:
        for lineno, value, problem in iter_json_objects(path):
            if problem is not None:
                problems.append(problem)
            elif not (isinstance(value.get("prompt"), list) and isinstance(value.get("completion"), list)):
                problems.append(f"{path}:{lineno}: prompt/completion: must be lists of chat messages (write the file "
                                "with `proofcheck data distill`)")
            else:
                rows.append({"prompt": value["prompt"], "completion": value["completion"]})
    if problems:
        raise DataError(problems)
    if script.synthetic_count:
        from proofcheck.data.families import family_choice
        from proofcheck.data.synth import balanced_tasks

        tasks = balanced_tasks(script.synthetic_count, seed=script.synthetic_seed,
                               families=family_choice(",".join(script.synthetic_families)))
        rows += sft_rows(tasks, script.prompt_style)
    if not rows:
        raise DataError([f"{', '.join(script.sft_files)}: no rows (did the distillation keep any verification? "
                         "see its summary.json)"])
    return rows


def train_sft(script: Any, training: Any, model_args: Any) -> dict[str, Any]:
    """Train and save (module docstring); returns the run summary (also <output_dir>/run_summary.json)."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import get_peft_config

    from proofcheck.io import write_json_atomic
    from proofcheck.prompt_card import write_prompt_card
    from proofcheck.protocol import prompt_sha256
    from proofcheck.train.config import top_layers
    from proofcheck.train.saving import save_outputs
    from proofcheck.train.sft_trainer import AnswerOnlySFTTrainer

    rows = load_rows(script)
    tok = AutoTokenizer.from_pretrained(model_args.model_name_or_path, revision=model_args.model_revision)
    training.model_init_kwargs = {**(training.model_init_kwargs or {}), "revision": model_args.model_revision,
                                  "dtype": model_args.dtype or "auto",
                                  **({"attn_implementation": model_args.attn_implementation}
                                     if model_args.attn_implementation else {})}
    peft_config = get_peft_config(model_args)
    if peft_config is not None and script.lora_layers:
        from transformers import AutoConfig

        layers = AutoConfig.from_pretrained(model_args.model_name_or_path).num_hidden_layers
        peft_config.layers_to_transform = top_layers(layers, script.lora_layers)
    trainer = AnswerOnlySFTTrainer(model=model_args.model_name_or_path, args=training, processing_class=tok,
                                   train_dataset=Dataset.from_list(rows), peft_config=peft_config,
                                   focal_gamma=script.focal_gamma, length_window=script.length_window)
    print(f"[proofcheck] sft: {len(rows)} rows; loss: "
          f"{trainer.answer_only_reason or 'answer-only vocabulary projection'}", flush=True)
    result = trainer.train(resume_from_checkpoint=training.resume_from_checkpoint)
    saved = save_outputs(trainer, script, model_args)
    summary = {"stage": "sft", "rows": len(rows), "sft_files": script.sft_files,
               "synthetic_count": script.synthetic_count, "global_step": trainer.state.global_step,
               "train_loss": result.training_loss, "saved": saved,
               "loss_path": trainer.answer_only_reason or "answer-only"}
    if trainer.accelerator.is_main_process:
        for folder in saved.values():
            write_prompt_card(folder, script.include_reference_solution,
                              prompt_sha256(style=script.prompt_style), prompt_style=script.prompt_style,
                              written_by="proofcheck train/supervised.py")
        write_json_atomic(Path(training.output_dir) / "run_summary.json", summary)
    trainer.accelerator.wait_for_everyone()
    return summary


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv or "--help-all" in argv:
        make_parser().print_help()
        return 0
    from proofcheck.data.loaders import DataError
    from proofcheck.train.config import ConfigError
    from proofcheck.train.plan import split_plan_args

    plan, argv = split_plan_args(argv)
    try:
        script, training, model = parse(argv, require_data=plan is None)
        if plan is not None:
            from proofcheck.train.sft_plan import print_sft_plan

            return print_sft_plan(script, training, model, plan)
        train_sft(script, training, model)
    except (ConfigError, DataError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
