"""Our script arguments for the supervised stage (`train/supervised.py`), next to TRL's `SFTConfig` and
`ModelConfig`: one config path, as for GRPO (`train/config.py`). `TrlParser` reads the three dataclasses from
`--config configs/sft/<recipe>.yaml` plus CLI overrides; `__post_init__` checks what the values alone decide and
raises `ConfigError` with the fix; `check_sft_paths` that the data files exist. Light (dataclasses only), so
`--help` answers at once.

The data is either SFT rows (`sft_files`: JSONL of conversational `prompt` / `completion` rows, as
`proofcheck data distill` writes them, with their provenance) or synthetic tasks with gold verifications
(`synthetic_count`: the CPU warm-up's data), or both.

Example:
    >>> SftScriptArguments(synthetic_count=8).stage
    'sft'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from proofcheck.protocol import DEFAULT_PROMPT_STYLE, PROMPT_STYLES
from proofcheck.train.config import ConfigError, _help


@dataclass
class SftScriptArguments:
    """What the supervised stage trains on and what it saves."""

    stage: str = field(default="sft", metadata=_help(
        "The recipe's stage: `sft` (this file's). `proofcheck train` reads it to launch train/supervised.py "
        "instead of train/grpo.py."))
    sft_files: list[str] = field(default_factory=list, metadata=_help(
        "SFT rows: JSONL files of conversational `prompt` / `completion` rows, e.g. the `sft.jsonl` that "
        "`proofcheck data distill` writes (verifications kept by the meta-verifier, with their provenance)."))
    synthetic_count: int = field(default=0, metadata=_help(
        "Synthetic tasks with exact labels and gold verifications (proofcheck.data.synth) to add, in valid/flawed "
        "pairs of synthetic_families; 0 = none. The CPU warm-up's data."))
    synthetic_families: list[str] = field(default_factory=lambda: ["chain"], metadata=_help(
        "Proof families of the synthetic tasks (chain, prose, linear, expand, parity, inequality) or `all`."))
    synthetic_seed: int = field(default=1000, metadata=_help("Seed of the synthetic draw."))
    prompt_style: str = field(default=DEFAULT_PROMPT_STYLE, metadata=_help(
        "Verifier prompt style of the synthetic rows (`full` or `compact`), written into the saved models' "
        "proofcheck_prompt.json; distilled rows carry the prompts they were sampled with (distill's --prompt-style: "
        "use the same)."))
    include_reference_solution: bool = field(default=False, metadata=_help(
        "Whether the prompts showed the reference solution (distill's --with-reference); recorded in the card. "
        "Synthetic rows never show it (it would give the answer away)."))
    focal_gamma: float = field(default=0.0, metadata=_help(
        "Weight each answer token's loss by (1 - p)^focal_gamma (a focal loss); 0 = the plain mean."))
    length_window: int = field(default=0, metadata=_help(
        "> 0: batches of similar length in random order (rows sorted by length within windows of this many "
        "batches, the batches shuffled), in place of train_sampling_strategy; 0 = the SFTConfig's sampling. "
        "group_by_length walks each 50-batch megabatch from the longest rows to the shortest."))
    lora_layers: int | None = field(default=None, metadata=_help(
        "With use_peft: adapt only the top N layers (the memory plan counts them)."))
    save_merged: bool = field(default=True, metadata=_help("Save <output_dir>/merged (LoRA merged into the weights)."))
    save_adapter: bool = field(default=True, metadata=_help("With use_peft: also keep <output_dir>/adapter."))

    def __post_init__(self) -> None:
        errs = []
        if self.stage != "sft":
            errs.append(f"stage={self.stage!r}: a supervised recipe has `stage: sft`; a GRPO recipe has no stage "
                        "(run it with train/grpo.py)")
        if self.prompt_style not in PROMPT_STYLES:
            errs.append(f"prompt_style={self.prompt_style!r}: choose one of {', '.join(PROMPT_STYLES)}")
        if self.synthetic_count < 0:
            errs.append(f"synthetic_count={self.synthetic_count}: must be >= 0")
        if self.focal_gamma < 0:
            errs.append(f"focal_gamma={self.focal_gamma}: must be >= 0 (0 = the plain mean loss, e.g. 2 for a focal "
                        "loss)")
        if self.length_window < 0:
            errs.append(f"length_window={self.length_window}: must be >= 0 (0 = the SFTConfig's sampling, e.g. 8)")
        if self.lora_layers is not None and self.lora_layers < 1:
            errs.append(f"lora_layers={self.lora_layers}: must be >= 1, or unset for every layer")
        if not (self.save_merged or self.save_adapter):
            errs.append("save_merged and save_adapter are both false: nothing would be saved; set save_merged: true")
        if errs:
            raise ConfigError("; ".join(errs))


def check_sft_paths(script: SftScriptArguments) -> None:
    """Raise ConfigError unless there is data and every file of `sft_files` exists."""
    if not script.sft_files and not script.synthetic_count:
        raise ConfigError("no training data: set sft_files (e.g. runs/distill/sft.jsonl from `proofcheck data "
                          "distill`) or synthetic_count (synthetic tasks with gold verifications)")
    missing = [f for f in script.sft_files if not Path(f).is_file()]
    if missing:
        raise ConfigError(f"sft_files: no such file: {', '.join(missing)} (write it with `proofcheck data distill "
                          "--out DIR`: DIR/sft.jsonl)")
