"""GRPO's per-token log-probabilities computed only where the loss reads them (CPU training).

TRL 1.16 computes a completion's log-probabilities through a fused LM head (`add_fused_lm_head`,
`ChunkedLogProbFunction`). On a device with Triton (CUDA, XPU) that head projects only the positions
whose next token is a completion token. Elsewhere (CPU) it projects **every** position of the padded
batch: the prompt, the left padding of shorter prompts and the right padding of shorter completions,
each through the 49,152-token vocabulary of SmolLM2, with its tile arithmetic in fp32 torch ops and
the projection recomputed in the backward pass. Measured on a 2-core avx512_bf16 host (bf16 autocast,
16 completions of SmolLM2-135M, LoRA on the top 10 layers; `benchmarks/train_real.py --profile`):
that head was ~60% of GRPO's training pass, and 72% of the positions it projected carried no loss.

`completion_logps` returns the same quantities as TRL's `_get_per_token_logps_and_entropies` for a
text-only batch, computed as TRL did before the fused head and as our SFT warm-up does:
- a few rows per forward (one prompt's group by default: the rows are first put in prompt order, since
  TRL shuffles them), each chunk cut to its own width: no column that is padding in every row of the
  chunk (a group shares its prompt, so no prompt padding); the group's prompt forwarded once;
- the model's own forward with `logits_to_keep`, so the vocabulary projection runs on the completion
  columns only, and the log-softmax (fp32, temperature-scaled, as TRL's) on the real completion
  tokens only;
- the entropy (a logged metric unless an entropy bonus needs its gradient) without gradient.

The head is TRL's (`trl.trainer.utils.add_fused_lm_head`): the logits are multiplied by the model's logit
scale (Cohere `logit_scale`, Falcon-H1 `lm_head_multiplier`, Granite `1 / logits_scaling`, ...), soft-capped
(Gemma 2/3 `final_logit_softcapping`), divided by the temperature; with `cast_lm_head_to_fp32` the projection
runs in fp32 outside autocast (`HeadSpec`). While dropout is active (TRL keeps the model's dropout unless
`disable_dropout`; peft's `lora_dropout` 0.05 by default), every row is forwarded with its own prompt, so each
row draws its own dropout masks as in TRL's batch, never one prompt mask for a whole group.

The loss, advantages and optimizer stay TRL's: the trainer subclass (`train/trainer.py`) calls this from its
`_get_per_token_logps_and_entropies` and returns TRL's own method wherever this does not apply (not CPU,
images, MoE aux loss, an entropy bonus, parameters sharded by FSDP or ZeRO-3: there every rank must run the
same number of forwards, and this path's count depends on the batch's prompts). `tests/integration/
test_grpo_logprobs.py` compares log-probabilities, loss and gradients with TRL's path, in fp32 and bf16, on a
model with a logit scale and a soft cap, and a whole training run with gradient accumulation, several steps
per generation, several iterations and a KL term.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HeadSpec:
    """What TRL's fused head does to the projected logits: `logits * scale`, then `softcap * tanh(z / softcap)`
    when `softcap` is set, then `/ temperature`; `fp32`: project in float32 outside autocast."""

    scale: float = 1.0
    softcap: float | None = None
    fp32: bool = False

    @classmethod
    def of(cls, config: Any, cast_lm_head_to_fp32: bool = False) -> HeadSpec:
        """The head of a model with `config`, read as TRL 1.16's `add_fused_lm_head` reads it.

        >>> from types import SimpleNamespace as NS
        >>> HeadSpec.of(NS(get_text_config=lambda: NS(logits_scaling=4.0, model_type="granite")))
        HeadSpec(scale=0.25, softcap=None, fp32=False)
        """
        text = config.get_text_config()
        scale = getattr(text, "logit_scale", None)
        for name in ("output_multiplier", "lm_head_multiplier"):
            scale = getattr(text, name, None) if scale is None else scale
        if scale is None and getattr(text, "logits_scaling", None) is not None:
            scale = text.logits_scaling if text.model_type == "hyperclovax" else 1 / text.logits_scaling
        return cls(1.0 if scale is None else float(scale), getattr(text, "final_logit_softcapping", None),
                   bool(cast_lm_head_to_fp32))

    def log_softmax(self, lm_head: Any, hidden: Any, temperature: float) -> Any:
        """fp32 log-probabilities over the vocabulary at `hidden` (rows of final hidden states)."""
        import torch

        if self.fp32:
            with torch.autocast(hidden.device.type, enabled=False):
                z = torch.nn.functional.linear(hidden.float(), lm_head.weight.float(),
                                               None if lm_head.bias is None else lm_head.bias.float())
        else:
            z = lm_head(hidden).float()
        if self.scale != 1.0:
            z = z * self.scale
        if self.softcap is not None:
            z = self.softcap * torch.tanh(z / self.softcap)
        return (z / temperature).log_softmax(-1)


def dropout_active(model: Any) -> bool:
    """Whether a forward of `model` now draws dropout masks (a dropout module with p > 0 in training mode)."""
    import torch

    return any(isinstance(m, torch.nn.Dropout) and m.p > 0 and m.training for m in model.modules())


def sharded_parameters(accelerator: Any) -> bool:
    """Whether the model's parameters are sharded across ranks (FSDP, DeepSpeed ZeRO-3): every forward is then a
    collective, and every rank must run as many as the others."""
    from accelerate.utils import DistributedType

    if accelerator.distributed_type == DistributedType.FSDP:
        return True
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    return accelerator.distributed_type == DistributedType.DEEPSPEED and plugin is not None and \
        int(plugin.zero_stage) == 3


def why_not(device_type: str, compute_aux_loss: bool, entropy_grad: bool, extra_inputs: dict[str, Any],
            sharded: bool = False) -> str | None:
    """None when `completion_logps` can stand in for TRL's fused head, else why it steps aside: it needs the
    CPU, text only (every multimodal input None), no MoE aux loss, no entropy gradient (TRL's entropy bonus)
    and unsharded parameters.

    >>> why_not("cpu", False, False, {"pixel_values": None}) is None
    True
    >>> why_not("cuda", False, False, {})
    'the device is cuda, not the CPU'
    """
    reasons = [("the device is " + device_type + ", not the CPU", device_type != "cpu"),
               ("the model has a MoE aux loss", compute_aux_loss),
               ("an entropy bonus needs the entropy's gradient", entropy_grad),
               ("the batch has multimodal inputs", any(v is not None for v in extra_inputs.values())),
               ("the parameters are sharded (FSDP / ZeRO-3): every rank must run the same forwards", sharded)]
    return next((why for why, hit in reasons if hit), None)


def chunk_span(attention_mask: Any, prompt_cols: int) -> tuple[int, int]:
    """(first, end) columns of a chunk worth computing: from its first real token (left padding of every
    row dropped) to its last real completion token; at least the last prompt column is kept, since it
    predicts the first completion token. `attention_mask`: (rows, prompt_cols + completion_cols).

    >>> import torch
    >>> chunk_span(torch.tensor([[0, 1, 1, 1, 1, 0], [0, 0, 1, 1, 0, 0]]), prompt_cols=3)
    (1, 5)
    """
    import torch

    real = attention_mask.bool().any(0)
    cols = torch.nonzero(real).flatten()
    first = min(int(cols[0]) if cols.numel() else prompt_cols - 1, prompt_cols - 1)
    done = torch.nonzero(real[prompt_cols:]).flatten()
    end = prompt_cols + (int(done[-1]) + 1 if done.numel() else 0)
    return first, end


def completion_logps(model: Any, lm_head: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int, *,
                     rows: int, temperature: float, autocast: Callable[[], Any],
                     compute_entropy: bool, share_prompt: bool = True,
                     head: HeadSpec = HeadSpec()) -> tuple[Any, Any]:
    """(log-probabilities, entropies or None) of the last `logits_to_keep` tokens of each row, both
    (batch, logits_to_keep) float32 and 0 where `attention_mask` is 0, as TRL's fused head gives them.

    `model`: the policy as the trainer calls it (DDP / PEFT wrappers included); `lm_head`: its output
    embedding. `rows`: rows per forward. `autocast`: the trainer's (`accelerator.autocast`).
    A chunk whose rows are only right-padded (a group sharing its prompt) runs without an attention mask:
    causal attention already keeps every real token from the padding after it, and the model then takes
    the causal kernel instead of a materialised mask (half the attention blocks on CPU). With `share_prompt`,
    such a chunk whose rows carry one prompt forwards that prompt once (`shared_prompt_hidden`), unless dropout
    is active (each row then draws its own masks, as in TRL's batch). `head`: the model's logit transform.
    """
    import torch
    import torch.nn.functional as F
    from torch.profiler import record_function

    prompt_cols = input_ids.size(1) - logits_to_keep
    share_prompt = share_prompt and not dropout_active(model)
    perm = by_prompt(input_ids[:, :prompt_cols], attention_mask[:, :prompt_cols])
    input_ids, attention_mask = input_ids[perm], attention_mask[perm]
    logps, entropies = [], []
    for start in range(0, input_ids.size(0), rows):
        ids, am = input_ids[start:start + rows], attention_mask[start:start + rows]
        first, end = chunk_span(am, prompt_cols)
        span = am[:, first:end]
        right_padded_only = bool((span[:, 1:] <= span[:, :-1]).all())
        mask = am[:, prompt_cols:end].bool()
        one_prompt = (share_prompt and right_padded_only and ids.size(0) > 1
                      and bool((ids[:, first:prompt_cols] == ids[:1, first:prompt_cols]).all()))
        with autocast():
            if one_prompt:
                hidden = shared_prompt_hidden(model, ids, first, prompt_cols, end)[mask]
            else:
                out = model(input_ids=ids[:, first:end], attention_mask=None if right_padded_only else span,
                            logits_to_keep=1, output_hidden_states=True, use_cache=False)
                # hidden_states[-1] is the final-norm output (transformers: the last hidden state), at the
                # positions that predict each completion token
                hidden = out.hidden_states[-1][:, prompt_cols - first - 1:end - first - 1][mask]
            with record_function("logprobs: vocab"):  # a range benchmarks/train_real.py --profile reads
                logp = head.log_softmax(lm_head, hidden, temperature)
        token_logp = logp.gather(-1, ids[:, prompt_cols:end][mask].unsqueeze(-1)).squeeze(-1)
        pad = (0, logits_to_keep - mask.size(1))
        logps.append(F.pad(token_logp.new_zeros(mask.shape).masked_scatter(mask, token_logp), pad))
        if compute_entropy:
            with torch.no_grad(), record_function("logprobs: entropy"):
                ent = -(logp.exp() * logp).sum(-1)
            entropies.append(F.pad(ent.new_zeros(mask.shape).masked_scatter(mask, ent), pad))
    back = torch.argsort(perm)  # the caller's row order
    return torch.cat(logps)[back], (torch.cat(entropies)[back] if compute_entropy else None)


def by_prompt(prompt_ids: Any, prompt_mask: Any) -> Any:
    """A row order (LongTensor) that puts rows with the same prompt next to each other, groups in the order
    of their first row, rows in their order within a group. TRL shuffles a generation batch's rows before
    `compute_loss` (`shuffle_sequence_dict`), so a group's completions arrive scattered; chunks cut from
    this order share their prompt (no left padding, one prompt forward with `share_prompt`).

    >>> import torch
    >>> ids = torch.tensor([[0, 5, 6], [7, 8, 9], [0, 5, 6], [7, 8, 9]])
    >>> by_prompt(ids, (ids > 0).long()).tolist()
    [0, 2, 1, 3]
    """
    import torch

    keys = [tuple(row[mask.bool()].tolist()) for row, mask in zip(prompt_ids, prompt_mask, strict=True)]
    first: dict[tuple[int, ...], int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    return torch.tensor(sorted(range(len(keys)), key=lambda i: first[keys[i]]), dtype=torch.long)


def shared_prompt_hidden(model: Any, ids: Any, first: int, prompt_cols: int, end: int) -> Any:
    """Final hidden states at the positions that predict completion tokens `prompt_cols..end-1` of rows that
    share one prompt (columns `first..prompt_cols-1`, no padding there), (rows, end - prompt_cols, hidden).

    The prompt runs once, not once per row: GRPO's group repeats its prompt for every completion, and the
    prompt is ~3/4 of a step's tokens on the CPU recipe. Its key/value cache, repeated for each row, is the
    context of the completions' forward. Gradients flow into the prompt's keys and values through the cache,
    so the loss and gradients are those of the full rows (tests/integration/test_grpo_logprobs.py).
    """
    import torch

    rows, width = ids.size(0), end - prompt_cols
    out = model(input_ids=ids[:1, first:prompt_cols], logits_to_keep=1, output_hidden_states=True, use_cache=True)
    last = out.hidden_states[-1][:, -1:].expand(rows, -1, -1)  # predicts the first completion token
    if width <= 1:
        return last[:, :width]
    cache = out.past_key_values
    cache.batch_repeat_interleave(rows)
    rest = model(input_ids=ids[:, prompt_cols:end - 1], past_key_values=cache, logits_to_keep=1,
                 output_hidden_states=True, use_cache=True)
    return torch.cat([last, rest.hidden_states[-1]], 1)
