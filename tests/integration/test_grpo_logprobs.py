"""`completion_logits` (train/logprobs.py) gives TRL's GRPO log-probabilities, entropies, loss and gradients.

Real TRL GRPOTrainer (our subclass, `train/trainer.py` `trainer_class`) on tiny models, CPU: one generation batch
built as TRL's `_generate_and_score_completions` returns it (prompts of different lengths left-padded, completions
of different lengths right-padded, one a single token, a group's rows scattered as TRL's shuffle leaves them),
then the same weights and batch through TRL's own path (`completion_logits = False`: the fused LM head over every
position) and ours; in fp32 and in bf16 autocast; on the Qwen2 tiny model and on models whose head transforms
the logits (Gemma 2's final soft cap, Cohere's logit scale), with TRL's `cast_lm_head_to_fp32`; the path that
mixes prompts (an attention mask) with gradients; with LoRA dropout (every row its own masks); and a whole
training run (gradient accumulation, 4 steps per generation, 2 iterations, a KL term) whose gradients and
losses equal TRL's step by step.

Stated tolerance, fp32: per-token log-probabilities and entropies within 1e-5 absolute; the loss within
1e-6 relative; every trainable parameter's gradient within 1e-4 of the largest gradient entry (max abs
difference / max abs value). The two paths add the same terms in other orders (the prompt's padding columns
dropped, chunks of a group's rows), so they agree to rounding, not bit for bit. bf16 autocast: every matmul
rounds to bf16 (8 bits of mantissa) in both paths, in other orders, so log-probabilities agree within 0.05
absolute + 2% relative (an error proportional to the logits' size: the soft-capped model's are large) and
gradients within 5% of the largest entry; a head transform left out (the soft cap, the scale)
moves them by far more than that (asserted). On-policy with one iteration GRPO's loss value does not depend on
the log-probabilities (the ratio is exp(logp - logp.detach()) = 1): the gradients and the log-probabilities
themselves are what can differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

PROMPTS = ["Is 2 + 2 = 4 correct?", "Check the proof: 3 * 5 = 15, so 15 - 5 = 10.", "x", "Why?"]
FP32 = {"logp": 1e-5, "grad": 1e-4, "loss": 1e-6}
BF16 = {"logp": 5e-2, "grad": 5e-2, "loss": 5e-2, "rel": 2e-2}


@pytest.fixture(scope="module")
def head_models(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny models (random weights, the tiny tokenizer) whose heads transform the logits as TRL's fused head
    must: Gemma 2 soft-caps them (final_logit_softcapping; its untied head scaled up so that the cap bends
    the logits), Cohere scales them (logit_scale)."""
    import torch
    from transformers import AutoTokenizer, CohereConfig, CohereForCausalLM, Gemma2Config, Gemma2ForCausalLM

    tok = AutoTokenizer.from_pretrained(tiny_model)
    common = {"vocab_size": len(tok), "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "pad_token_id": tok.pad_token_id,
              "eos_token_id": tok.eos_token_id, "bos_token_id": tok.bos_token_id or tok.eos_token_id}
    out = {}
    for name, config in (("gemma2-softcap", Gemma2Config(**common, final_logit_softcapping=0.5,
                                                        attn_logit_softcapping=None, query_pre_attn_scalar=32,
                                                        tie_word_embeddings=False)),
                         ("cohere-scale", CohereConfig(**common, logit_scale=4.0))):
        torch.manual_seed(0)
        model = (Gemma2ForCausalLM if name.startswith("gemma") else CohereForCausalLM)(config)
        if name.startswith("gemma"):
            with torch.no_grad():
                model.lm_head.weight.mul_(10.0)  # logits of about one unit: the soft cap at 0.5 bends them
        folder = tmp_path_factory.mktemp(name)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        out[name] = folder
    return out


def _zero(completions: list[str], **kw: Any) -> list[float]:
    return [0.0] * len(completions)


def _text_sum(completions: list[str], **kw: Any) -> list[float]:
    """A reward with spread in every group (sampled completions differ): advantages that move the policy."""
    return [float(sum(map(ord, c)) % 7) for c in completions]


def _trainer(model: Path, tmp_path: Path, peft: bool, bf16: bool = False, lora_dropout: float = 0.0,
             reward: Any = _zero, **config: Any) -> Any:
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig

    from proofcheck.train.trainer import trainer_class

    settings = {"per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 12, "beta": 0.0,
                "temperature": 0.7, "seed": 0, "gradient_checkpointing": False,  # the CPU recipes' setting
                **config}
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=bf16, report_to="none", **settings)
    # random LoRA B as well as A (not the no-op start), so every adapter weight gets a gradient
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False,
                      layers_to_transform=[1], lora_dropout=lora_dropout) if peft else None
    trainer = trainer_class()(model=str(model), reward_funcs=[reward],
                              args=args, train_dataset=Dataset.from_list([{"prompt": p} for p in PROMPTS * 2]),
                              peft_config=lora)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    return trainer


def _batch(trainer: Any) -> dict[str, Any]:
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


def _ids_mask(batch: dict[str, Any]) -> tuple[Any, Any]:
    import torch

    return (torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1),
            torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1))


def _run(trainer: Any, batch: dict[str, Any], completion_logits: bool) -> tuple[Any, Any, Any, dict[str, Any]]:
    import torch

    trainer.completion_logits = completion_logits
    trainer.model.zero_grad(set_to_none=True)
    ids, mask = _ids_mask(batch)
    with torch.no_grad():
        logps, ents, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, batch["completion_ids"].size(1), compute_entropy=True)
    loss = trainer.compute_loss(trainer.model, batch)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    return logps, ents, loss.detach(), grads


def _assert_grads_close(grads: dict[str, Any], ref: dict[str, Any], tol: float) -> None:
    assert grads.keys() == ref.keys() and grads
    for name, g in grads.items():
        scale = ref[name].abs().max()
        assert scale > 0, name  # a gradient that reaches this weight
        assert (g - ref[name]).abs().max() <= tol * scale, name


def _counting(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """Counters of calls to completion_logps and to shared_prompt_hidden (one per group's prompt forward)."""
    import proofcheck.train.logprobs as lp

    calls, shared = [], []
    real, real_shared = lp.completion_logps, lp.shared_prompt_hidden
    monkeypatch.setattr(lp, "completion_logps", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(lp, "shared_prompt_hidden", lambda *a, **k: shared.append(1) or real_shared(*a, **k))
    return calls, shared


# TRL 1.16 refuses cast_lm_head_to_fp32 with a tied head under PEFT (it looks for `embed_tokens` on the PEFT
# model's inner model): the fp32 head is checked on full fine-tuning
CASES = [(model, bf16, False, peft) for model in ("qwen2", "gemma2-softcap", "cohere-scale")
         for bf16 in (False, True) for peft in (True, False)] + \
        [(model, True, True, False) for model in ("qwen2", "cohere-scale")]


@pytest.mark.parametrize(("model", "bf16", "fp32_head", "peft"), CASES,
                         ids=[f"{m}-{'bf16' if b else 'fp32'}{'-fp32head' if h else ''}-{'lora' if p else 'full'}"
                              for m, b, h, p in CASES])
def test_completion_logits_match_trl(tiny_model: Path, head_models: dict[str, Path], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch, model: str, bf16: bool, fp32_head: bool,
                                     peft: bool) -> None:
    import torch

    from proofcheck.train.logprobs import HeadSpec, completion_logps

    tol = BF16 if bf16 else FP32
    calls, shared = _counting(monkeypatch)
    trainer = _trainer(tiny_model if model == "qwen2" else head_models[model], tmp_path, peft, bf16=bf16,
                       cast_lm_head_to_fp32=fp32_head)
    head = HeadSpec.of(trainer.accelerator.unwrap_model(trainer.model).config, fp32_head)
    assert (head.softcap is not None) == (model == "gemma2-softcap") and (head.scale != 1.0) == (model == "cohere-scale")
    batch = _batch(trainer)
    ref_logps, ref_ents, ref_loss, ref_grads = _run(trainer, batch, completion_logits=False)
    assert not calls  # TRL's own path
    logps, ents, loss, grads = _run(trainer, batch, completion_logits=True)
    assert len(calls) == 2  # ours, in the no-grad call and in compute_loss
    assert len(shared) == 4  # each call forwards each group's prompt once

    mask = batch["completion_mask"].bool()
    assert ref_logps[mask].abs().min() > 0.5 or model != "qwen2"  # real log-probabilities, not ~0
    torch.testing.assert_close(logps[mask], ref_logps[mask], atol=tol["logp"], rtol=tol.get("rel", 0))
    torch.testing.assert_close(ents[mask], ref_ents[mask], atol=tol["logp"], rtol=tol.get("rel", 0))
    assert (logps[~mask] == 0).all() and (ents[~mask] == 0).all()
    torch.testing.assert_close(loss, ref_loss, atol=0, rtol=tol["loss"])
    _assert_grads_close(grads, ref_grads, tol["grad"])
    if head != HeadSpec(fp32=fp32_head):  # the transform matters: leaving it out is far outside the tolerance
        ids, am = _ids_mask(batch)
        with torch.no_grad():
            bare, _ = completion_logps(trainer.model, trainer.model.get_output_embeddings(), ids, am,
                                       batch["completion_ids"].size(1), rows=4, temperature=trainer.temperature,
                                       autocast=trainer.accelerator.autocast, compute_entropy=False)
        assert (bare[mask] - ref_logps[mask]).abs().max() > 10 * tol["logp"]


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_the_mixed_prompt_path_matches_trl_with_gradients(tiny_model: Path, tmp_path: Path, bf16: bool) -> None:
    """Chunks that mix two prompts (left padding, a materialised attention mask, no shared prompt): the
    log-probabilities and the gradient of their weighted sum equal TRL's."""
    import torch

    from proofcheck.train.logprobs import HeadSpec, completion_logps

    tol = BF16 if bf16 else FP32
    trainer = _trainer(tiny_model, tmp_path, peft=True, bf16=bf16)
    batch = _batch(trainer)
    ids, am = _ids_mask(batch)
    keep, mask = batch["completion_ids"].size(1), batch["completion_mask"].bool()
    weights = torch.randn(mask.shape, generator=torch.Generator().manual_seed(1))

    def grads_of(logps: Any) -> dict[str, Any]:
        trainer.model.zero_grad(set_to_none=True)
        (logps * weights * mask).sum().backward()
        return {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.requires_grad}

    trainer.completion_logits = False
    ref, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, am, keep)
    ref_grads = grads_of(ref)
    ours, _ = completion_logps(trainer.model, trainer.model.get_output_embeddings(), ids, am, keep, rows=8,
                               temperature=trainer.temperature, autocast=trainer.accelerator.autocast,
                               compute_entropy=False, head=HeadSpec())
    torch.testing.assert_close(ours[mask], ref.detach()[mask], atol=tol["logp"], rtol=0)
    _assert_grads_close(grads_of(ours), ref_grads, tol["grad"])


def test_lora_dropout_gives_every_row_its_own_masks(tiny_model: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL's default lora_dropout is 0.05 and GRPO keeps dropout on unless disable_dropout: every row then draws
    its own masks in TRL's batch. Ours forwards each row with its own prompt (never one prompt forward, one mask,
    for a whole group); with dropout off (eval mode) both paths agree exactly as in fp32."""
    import torch

    calls, shared = _counting(monkeypatch)
    trainer = _trainer(tiny_model, tmp_path, peft=True, lora_dropout=0.3)
    batch = _batch(trainer)
    ids, am = _ids_mask(batch)
    keep, mask = batch["completion_ids"].size(1), batch["completion_mask"].bool()
    trainer.completion_logits = True
    with torch.no_grad():
        first, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, am, keep)
        second, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, am, keep)
    assert len(calls) == 2 and not shared  # the per-row path
    assert (first[mask] - second[mask]).abs().max() > 1e-3  # dropout is drawn: two calls differ
    trainer.model.eval()  # dropout off: the shared prompt is back, and the values are TRL's
    with torch.no_grad():
        ours, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, am, keep)
        trainer.completion_logits = False
        ref, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, am, keep)
    assert shared
    torch.testing.assert_close(ours[mask], ref[mask], atol=FP32["logp"], rtol=0)


class GradRecorder:
    """A TrainerCallback that keeps every trainable gradient right before each optimizer step."""

    def __init__(self) -> None:
        from transformers import TrainerCallback

        self.steps: list[dict[str, Any]] = []
        recorder = self

        class Callback(TrainerCallback):
            def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
                recorder.steps.append({n: p.grad.detach().clone() for n, p in model.named_parameters()
                                       if p.requires_grad and p.grad is not None})

        self.callback = Callback()


@pytest.mark.parametrize("peft", [True, False], ids=["lora", "full"])
def test_a_training_run_is_trls_step_by_step(tiny_model: Path, tmp_path: Path, peft: bool) -> None:
    """Three optimizer steps of a real run with gradient accumulation 2, 4 steps per generation (old
    log-probabilities computed), 2 iterations and a KL term (beta > 0: the reference model's log-probabilities,
    LoRA's adapter off or a full copy), through TRL's path and ours: the same gradients and losses at every step.
    Both runs sample the same completions (same seed; no forward draws random numbers, and weights equal to
    rounding cannot flip a sampled token in practice); SGD, so that a gradient difference is not amplified by
    Adam's normalisation."""
    import torch

    runs = {}
    for ours in (False, True):
        torch.manual_seed(0)
        trainer = _trainer(tiny_model, tmp_path / str(ours), peft, reward=_text_sum, per_device_train_batch_size=4,
                           gradient_accumulation_steps=2, steps_per_generation=4, num_iterations=2, beta=0.1,
                           max_steps=3, optim="sgd", learning_rate=0.05, logging_steps=1, save_strategy="no")
        trainer.completion_logits = ours
        recorder = GradRecorder()
        trainer.add_callback(recorder.callback)
        trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        kl = [h["kl"] for h in trainer.state.log_history if "kl" in h]
        runs[ours] = (recorder.steps, losses, kl)
    (ref_steps, ref_losses, ref_kl), (steps, losses, kl) = runs[False], runs[True]
    assert len(steps) == len(ref_steps) == 3 and len(losses) == 3
    assert max(ref_kl) > 0  # the KL term is live after the first update
    for got, ref in zip(steps, ref_steps, strict=True):
        _assert_grads_close(got, ref, FP32["grad"])
    assert losses == pytest.approx(ref_losses, rel=1e-4, abs=1e-7)
    assert kl == pytest.approx(ref_kl, rel=1e-3, abs=1e-7)
