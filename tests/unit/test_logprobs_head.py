"""train/logprobs.py without a model: the head transform read from a config as TRL 1.16's fused head reads it,
and when the completion-only path steps aside for TRL's own."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

import pytest

from proofcheck.train.logprobs import HeadSpec, sharded_parameters, why_not


def config(**fields: Any) -> Any:
    text = NS(model_type=fields.pop("model_type", "llama"), **fields)
    return NS(get_text_config=lambda: text)


@pytest.mark.parametrize(("fields", "expected"), [
    ({}, HeadSpec()),                                                      # Llama, Qwen2: no transform
    ({"logit_scale": 0.0625}, HeadSpec(scale=0.0625)),                     # Cohere
    ({"logit_scale": None, "output_multiplier": 2.0}, HeadSpec(scale=2.0)),
    ({"lm_head_multiplier": 0.5}, HeadSpec(scale=0.5)),                    # Falcon-H1
    ({"logits_scaling": 8.0, "model_type": "granite"}, HeadSpec(scale=0.125)),   # Granite divides
    ({"logits_scaling": 8.0, "model_type": "hyperclovax"}, HeadSpec(scale=8.0)),  # HyperCLOVA X multiplies
    ({"final_logit_softcapping": 30.0}, HeadSpec(softcap=30.0)),           # Gemma 2 / 3
    ({"final_logit_softcapping": None}, HeadSpec()),
])
def test_head_spec_reads_the_config_as_trl(fields: dict[str, Any], expected: HeadSpec) -> None:
    assert HeadSpec.of(config(**fields)) == expected


def test_head_spec_applies_scale_then_softcap_then_temperature() -> None:
    import torch

    lm_head = torch.nn.Linear(2, 3, bias=False)
    with torch.no_grad():
        lm_head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    hidden = torch.tensor([[2.0, -1.0]])
    z = torch.tensor([[2.0, -1.0, 1.0]]) * 3.0
    z = 4.0 * torch.tanh(z / 4.0) / 0.5
    got = HeadSpec(scale=3.0, softcap=4.0).log_softmax(lm_head, hidden, temperature=0.5)
    torch.testing.assert_close(got, z.log_softmax(-1))


@pytest.mark.parametrize(("args", "reason"), [
    (("cpu", False, False, {"pixel_values": None}), None),
    (("cuda", False, False, {}), "the device is cuda, not the CPU"),
    (("cpu", True, False, {}), "the model has a MoE aux loss"),
    (("cpu", False, True, {}), "an entropy bonus needs the entropy's gradient"),
    (("cpu", False, False, {"pixel_values": 1}), "the batch has multimodal inputs"),
    (("cpu", False, False, {}, True), "the parameters are sharded (FSDP / ZeRO-3): every rank must run the same "
                                      "forwards"),
])
def test_the_completion_only_path_steps_aside_with_a_reason(args: tuple, reason: str | None) -> None:
    assert why_not(*args) == reason


@pytest.mark.parametrize(("kind", "stage", "sharded"), [
    ("NO", None, False), ("MULTI_GPU", None, False), ("FSDP", None, True), ("DEEPSPEED", 2, False),
    ("DEEPSPEED", 3, True),
])
def test_sharded_parameters(kind: str, stage: int | None, sharded: bool) -> None:
    from accelerate.utils import DistributedType

    plugin = NS(zero_stage=stage) if stage is not None else None
    acc = NS(distributed_type=DistributedType[kind], state=NS(deepspeed_plugin=plugin))
    assert sharded_parameters(acc) is sharded
