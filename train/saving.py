"""The final save of a GRPO run: the merged model and/or the LoRA adapter, each with its tokenizer
and prompt card, so `serve/` loads either."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from proofcheck.prompt_card import write_calibration, write_prompt_card
from proofcheck.protocol import prompt_sha256
from proofcheck.train.config import ProofcheckScriptArguments
from proofcheck.train.data import TrainingData


def final_outputs(script: ProofcheckScriptArguments, model_args: Any, output_dir: str | Path) -> dict[str, str]:
    """The folders `save_outputs` writes: `merged` and/or (LoRA only) `adapter` in `output_dir`."""
    wanted = (("merged", script.save_merged), ("adapter", model_args.use_peft and script.save_adapter))
    return {name: str(Path(output_dir) / name) for name, on in wanted if on}


def save_outputs(trainer: Any, script: ProofcheckScriptArguments, model_args: Any) -> dict[str, str]:
    """Save `<output_dir>/merged` and/or `<output_dir>/adapter`; returns what was written where."""
    out = Path(trainer.args.output_dir)
    acc = trainer.accelerator
    saved: dict[str, str] = {}
    if model_args.use_peft:
        adapter_dir = out / "adapter"
        trainer.save_model(str(adapter_dir))  # collective under ZeRO-3/FSDP; writes the tokenizer too
        acc.wait_for_everyone()
        if script.save_merged:
            if acc.is_main_process:
                merge_adapter(adapter_dir, out / "merged", trainer.processing_class, model_args)
            saved["merged"] = str(out / "merged")
        if script.save_adapter:
            saved["adapter"] = str(adapter_dir)
        elif acc.is_main_process:
            shutil.rmtree(adapter_dir)
    elif script.save_merged:
        trainer.save_model(str(out / "merged"))
        saved["merged"] = str(out / "merged")
    acc.wait_for_everyone()
    return saved


def merge_adapter(adapter_dir: Path, merged_dir: Path, tokenizer: Any, model_args: Any) -> None:
    """Load base + adapter on CPU, merge LoRA into the weights and save a plain model + tokenizer.

    Reloading from the saved adapter works the same after DDP, ZeRO-3 or FSDP training (the
    adapter file is already gathered), at the cost of one more load of the base model. Only the
    main process calls it, so the load runs with any ZeRO-3 configuration hidden from
    transformers (`distributed.zero3_disabled`): under it `from_pretrained` would enter
    `deepspeed.zero.Init`, a collective the other ranks, waiting at a barrier, never join.
    """
    from peft import AutoPeftModelForCausalLM

    from proofcheck.train.distributed import zero3_disabled

    dtype = model_args.dtype if model_args.dtype not in (None, "auto") else "auto"
    with zero3_disabled():  # one process loads: not inside ZeRO-3's zero.Init, a collective
        model = AutoPeftModelForCausalLM.from_pretrained(str(adapter_dir), dtype=dtype,
                                                         revision=model_args.model_revision)
    merged = model.merge_and_unload()
    merged.save_pretrained(str(merged_dir))
    tokenizer.save_pretrained(str(merged_dir))


def write_cards(saved: dict[str, str], data: TrainingData, training: Any, eval_cb: Any = None) -> None:
    """The prompt card of every saved folder: the prompt the model was trained on, for `score verifier`
    to compare, and how it generated, for serve / verify / score to default to; with the final held-out
    evaluation (`eval_cb`), the k-pass rule calibrated on it (`held_out_calibration`)."""
    record = held_out_calibration(eval_cb)
    for folder in saved.values():
        write_prompt_card(folder, data.with_reference, prompt_sha256(style=data.prompt_style),
                          prompt_style=data.prompt_style,
                          chat_template_kwargs=getattr(training, "chat_template_kwargs", None),
                          max_completion_length=training.max_completion_length)
        if record is not None:
            write_calibration(folder, record)


def held_out_calibration(eval_cb: Any) -> dict[str, Any] | None:
    """The card's calibration record (`proofcheck.calibration`) from the run's last held-out evaluation
    (its k passes on every held-out proof), as `proofcheck calibrate` derives it; None without one, or
    when the held-out set cannot calibrate (a single class). Tokens were not recorded there: the cheapest
    rule is counted in passes per proof."""
    import sys

    from proofcheck.calibration import METHOD, ProofPasses, calibration_record, calibration_table, choose

    results = getattr(eval_cb, "last_results", None) if eval_cb is not None else None
    if not results:
        return None
    try:
        proofs = [ProofPasses(bool(r["is_correct"]), [t["outcome"] for t in r["trials"]], None, str(r["proof_id"]))
                  for r in results]
        table = calibration_table(proofs)
    except (KeyError, ValueError) as e:
        print(f"[proofcheck] no k-pass calibration in the model card: {e}", file=sys.stderr)
        return None
    max_k = max(r["k"] for r in table)
    measured_on = {"data": "this run's held-out evaluation set (eval rows)", "n_proofs": len(proofs),
                   "n_correct": sum(p.is_correct for p in proofs), "n_incorrect": sum(not p.is_correct for p in proofs),
                   "max_k": max_k, "method": METHOD, "step": getattr(eval_cb, "_last_step", None),
                   "by": "proofcheck train (final held-out evaluation)", "temperature": getattr(eval_cb, "temperature",
                                                                                              None),
                   "max_tokens": getattr(eval_cb, "max_new_tokens", None)}
    return calibration_record(table, choose(table), measured_on)
