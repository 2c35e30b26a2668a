"""`completion_logits` (train/logprobs.py) gives TRL's GRPO log-probabilities, entropies, loss and gradients.

Real TRL GRPOTrainer (our subclass, `train/uncertainty.py` `trainer_class`) on the tiny model, CPU, fp32: one
generation batch built as TRL's `_generate_and_score_completions` returns it (prompts of different lengths
left-padded, completions of different lengths right-padded, one a single token, a group's rows scattered as
TRL's shuffle leaves them), then the same weights and
batch through TRL's own path (`completion_logits = False`: the fused LM head over every position) and ours.

Stated tolerance (fp32): per-token log-probabilities and entropies within 1e-5 absolute; the loss within
1e-6 relative; every trainable parameter's gradient within 1e-4 of the largest gradient entry (max abs
difference / max abs value). The two paths add the same terms in other orders (the prompt's padding columns
dropped, chunks of a group's rows), so they agree to rounding, not bit for bit. On-policy with one iteration
GRPO's loss value does not depend on the log-probabilities (the ratio is exp(logp - logp.detach()) = 1): the
gradients and the log-probabilities themselves are what can differ. In bf16 autocast the two differ by bf16
rounding; `benchmarks/train_real.py --profile` prints that difference for SmolLM2.
"""

from __future__ import annotations

import pytest

PROMPTS = ["Is 2 + 2 = 4 correct?", "Check the proof: 3 * 5 = 15, so 15 - 5 = 10.", "x", "Why?"]


def _trainer(tiny_model, tmp_path, peft: bool):
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig

    from proofcheck.train.uncertainty import trainer_class

    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                      per_device_train_batch_size=8, num_generations=4, max_completion_length=12, beta=0.0,
                      temperature=0.7, seed=0, gradient_checkpointing=False)  # the CPU recipes' setting
    # random LoRA B as well as A (not the no-op start), so every adapter weight gets a gradient
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False,
                      layers_to_transform=[1]) if peft else None
    trainer = trainer_class()(model=str(tiny_model), reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                              args=args, train_dataset=Dataset.from_list([{"prompt": p} for p in PROMPTS * 2]),
                              peft_config=lora)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    return trainer


def _batch(trainer):
    import torch

    tok = trainer.processing_class
    g = torch.Generator().manual_seed(0)
    prompts = [tok(p)["input_ids"] for p in PROMPTS[:2]]
    lengths = [12, 5, 1, 9, 3, 7, 12, 2]
    width_p, width_c, n = max(map(len, prompts)), max(lengths), len(lengths)
    out = {"prompt_ids": torch.full((n, width_p), tok.pad_token_id), "prompt_mask": torch.zeros((n, width_p), dtype=torch.long),
           "completion_ids": torch.full((n, width_c), tok.pad_token_id),
           "completion_mask": torch.zeros((n, width_c), dtype=torch.long)}
    for i, length in enumerate(lengths):
        p = prompts[i % 2]  # a group's rows scattered, as TRL's shuffle of the generation batch leaves them
        out["prompt_ids"][i, width_p - len(p):] = torch.tensor(p)
        out["prompt_mask"][i, width_p - len(p):] = 1
        out["completion_ids"][i, :length] = torch.randint(0, len(tok), (length,), generator=g)
        out["completion_mask"][i, :length] = 1
    assert len(prompts[0]) != len(prompts[1])  # left padding in one group
    out["advantages"] = torch.randn(n, generator=g)
    out["num_items_in_batch"] = out["completion_mask"].sum()
    return out


def _run(trainer, batch, completion_logits: bool):
    import torch

    trainer.completion_logits = completion_logits
    trainer.model.zero_grad(set_to_none=True)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    with torch.no_grad():
        logps, ents, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, batch["completion_ids"].size(1), compute_entropy=True)
    loss = trainer.compute_loss(trainer.model, batch)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    return logps, ents, loss.detach(), grads


@pytest.mark.parametrize("peft", [True, False], ids=["lora-top-layer", "full"])
def test_completion_logits_match_trl(tiny_model, tmp_path, monkeypatch, peft):
    import torch

    import proofcheck.train.logprobs as lp

    calls = []
    real = lp.completion_logps
    monkeypatch.setattr(lp, "completion_logps", lambda *a, **k: calls.append(1) or real(*a, **k))
    shared, real_shared = [], lp.shared_prompt_hidden
    monkeypatch.setattr(lp, "shared_prompt_hidden", lambda *a, **k: shared.append(1) or real_shared(*a, **k))
    trainer = _trainer(tiny_model, tmp_path, peft)
    batch = _batch(trainer)
    ref_logps, ref_ents, ref_loss, ref_grads = _run(trainer, batch, completion_logits=False)
    assert not calls  # TRL's own path
    logps, ents, loss, grads = _run(trainer, batch, completion_logits=True)
    assert len(calls) == 2  # ours, in the no-grad call and in compute_loss
    assert len(shared) == 4  # each call forwards each group's prompt once

    mask = batch["completion_mask"].bool()
    assert ref_logps[mask].abs().min() > 0.5  # real log-probabilities (tiny vocabulary, random weights)
    torch.testing.assert_close(logps[mask], ref_logps[mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(ents[mask], ref_ents[mask], atol=1e-5, rtol=0)
    assert (logps[~mask] == 0).all() and (ents[~mask] == 0).all()
    with torch.no_grad():  # chunks mixing two prompts (left padding): the path with an attention mask
        mixed, _ = real(trainer.model, trainer.model.get_output_embeddings(),
                        torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1),
                        torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1),
                        batch["completion_ids"].size(1), rows=8, temperature=trainer.temperature,
                        autocast=trainer.accelerator.autocast, compute_entropy=False)
    torch.testing.assert_close(mixed[mask], ref_logps[mask], atol=1e-5, rtol=0)
    trainer.share_prompt = False  # every row's prompt forwarded with it (the path before the shared prompt)
    row_logps, _, row_loss, row_grads = _run(trainer, batch, completion_logits=True)
    assert len(shared) == 4
    torch.testing.assert_close(row_logps[mask], ref_logps[mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(row_loss, ref_loss, atol=0, rtol=1e-6)
    for name, g in row_grads.items():
        assert (g - ref_grads[name]).abs().max() <= 1e-4 * ref_grads[name].abs().max(), name
    torch.testing.assert_close(loss, ref_loss, atol=0, rtol=1e-6)
    assert grads.keys() == ref_grads.keys() and grads
    for name, g in grads.items():
        scale = ref_grads[name].abs().max()
        assert scale > 0, name  # a gradient that reaches this weight
        assert (g - ref_grads[name]).abs().max() <= 1e-4 * scale, name

