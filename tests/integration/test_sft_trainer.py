"""`AnswerOnlySFTTrainer` (train/sft_trainer.py) against TRL's own SFTTrainer loss on the tiny model: the rows TRL
prepares are the warm-up's (the prompt rendered as the verifier sees it, the loss on the answer only), and the
answer-only loss and its gradients equal TRL's fused-head loss on the same batch, with and without LoRA; the warm-up
(`train.sft.warmup`) trains with it and records the trainer and its steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch


def trainer_for(tiny_model: Path, tmp_path: Path, lora: bool, rows: int = 8):
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from proofcheck.data.synth import balanced_tasks
    from proofcheck.train.sft import LORA_MODULES, sft_rows
    from proofcheck.train.sft_trainer import AnswerOnlySFTTrainer, warmup_config

    tok = AutoTokenizer.from_pretrained(tiny_model)
    data = sft_rows(balanced_tasks(rows, seed=3), "compact")
    net = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    peft = LoraConfig(r=4, lora_alpha=8, target_modules=LORA_MODULES, lora_dropout=0.0, task_type="CAUSAL_LM",
                      init_lora_weights=False) if lora else None  # non-zero B: the adapter's gradients are real
    trainer = AnswerOnlySFTTrainer(model=net, args=warmup_config(tmp_path, steps=1, seed=0, learning_rate=1e-3,
                                                                 batch_size=4, bf16=False),
                                   train_dataset=Dataset.from_list(data), processing_class=tok, peft_config=peft)
    return trainer, tok, data


def test_trl_prepares_the_warmup_rows_with_the_loss_on_the_answer_only(tiny_model: Path, tmp_path: Path) -> None:
    from proofcheck.train.sft import encode

    trainer, tok, data = trainer_for(tiny_model, tmp_path, lora=False)
    for i, row in enumerate(data):
        ids, prompt = encode(tok, row)
        got = trainer.train_dataset[i]
        assert got["input_ids"] == ids
        assert got["labels"] == [-100] * prompt + ids[prompt:]


@pytest.mark.parametrize("lora", [False, True])
def test_the_answer_only_loss_and_gradients_equal_trl_s(tiny_model: Path, tmp_path: Path, lora: bool) -> None:
    from trl import SFTTrainer

    trainer, _, _ = trainer_for(tiny_model, tmp_path, lora)
    assert trainer.answer_only_reason is None
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(4)])
    model = trainer.model.train()
    params = [p for p in model.parameters() if p.requires_grad]

    def loss_and_grads(compute):
        loss = compute(model, dict(batch))
        return loss.detach(), torch.autograd.grad(loss, params)

    ours, g_ours = loss_and_grads(trainer.compute_loss)
    theirs, g_theirs = loss_and_grads(lambda m, b: SFTTrainer.compute_loss(trainer, m, b))
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    for a, b in zip(g_ours, g_theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert trainer._metrics["train"]["mean_token_accuracy"]  # TRL's metrics logged by our path too


def test_the_warmup_trains_on_sfttrainer_and_says_so(tiny_model: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from proofcheck.train.sft import warmup

    said: list[str] = []
    out = warmup(tiny_model, tmp_path / "sft", tasks=8, steps=3, batch_size=4, dtype="float32", log=said.append)
    plan = json.loads((out / "sft_plan.json").read_text())
    assert plan["trainer"] == "AnswerOnlySFTTrainer" and plan["steps"] == 3 and len(plan["step_s"]) == 3
    assert [m.split(" loss ")[0] for m in said if " loss " in m] == [f"[proofcheck] sft step {i}/3" for i in (1, 2, 3)]
    before, after = load_file(tiny_model / "model.safetensors"), load_file(out / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before)
