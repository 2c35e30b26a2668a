"""The evaluation's helpers that need no ranks: the seeded RNG it runs under, the LoRA merge outside an
active ZeRO-3 config, and the step timer keeping the evaluation out of a step's time (split from
test_distributed_eval.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from proofcheck.train import step_timer
from proofcheck.train.step_timer import StepTimer


def test_seeded_rng_restores_the_cpu_state_and_leaves_cuda_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from proofcheck.train.distributed import seeded_rng

    reseeded: list[int] = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: reseeded.append(seed))
    torch.manual_seed(123)
    reseeded.clear()
    state = torch.random.get_rng_state()
    with seeded_rng(7):
        a = torch.rand(3)
    assert torch.equal(torch.random.get_rng_state(), state)
    with seeded_rng(7):
        b = torch.rand(3)
    assert torch.equal(a, b) and reseeded == []  # no CUDA device's RNG reseeded for good


def test_lora_merge_loads_outside_an_active_zero3_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import peft
    from transformers.integrations import deepspeed as hf_ds

    from proofcheck.train.saving import merge_adapter

    class Zero3Config:  # what the trainer registers under ZeRO-3 (HfTrainerDeepSpeedConfig)
        config: dict = {}

        def is_zero3(self) -> bool:
            return True

    seen: list[bool] = []

    class Merged:
        def merge_and_unload(self) -> Any:
            return SimpleNamespace(save_pretrained=lambda path: None)

    def from_pretrained(path: str, **kw: Any) -> Merged:
        seen.append(hf_ds.is_deepspeed_zero3_enabled())  # would build the model inside zero.Init
        return Merged()

    monkeypatch.setattr(peft.AutoPeftModelForCausalLM, "from_pretrained", from_pretrained)
    cfg = Zero3Config()
    hf_ds.set_hf_deepspeed_config(cfg)
    try:
        merge_adapter(tmp_path / "adapter", tmp_path / "merged", SimpleNamespace(save_pretrained=lambda p: None),
                      SimpleNamespace(dtype="bfloat16", model_revision="main"))
        assert seen == [False]
        assert hf_ds.is_deepspeed_zero3_enabled()  # restored for the rest of the run
    finally:
        hf_ds.unset_hf_deepspeed_config()


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_step_timer_leaves_the_evaluation_out_of_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(step_timer.time, "perf_counter", clock)

    class Trainer:
        def __init__(self) -> None:
            self.vllm_generation = self

        def _generate_single_turn(self) -> None:
            clock.now += 2.0
            self.sync_weights()

        def sync_weights(self) -> None:
            clock.now += 0.5

        def _calculate_rewards(self) -> None:
            clock.now += 1.0

    class Eval:
        def __init__(self, trainer: Trainer) -> None:
            self.trainer = trainer

        def evaluate(self, step: int) -> None:
            self.trainer.sync_weights()  # the evaluation pushes weights too: not the step's sync
            clock.now += 30.0

    trainer = Trainer()
    ev = Eval(trainer)
    timer = StepTimer(trainer)
    timer.exclude(ev, "evaluate")
    ev.evaluate(0)  # before the first step (at_start)
    for step in (1, 2, 3):
        timer.on_step_begin(None, None, None)
        trainer._generate_single_turn()
        trainer._calculate_rewards()
        clock.now += 4.0
        if step == 2:
            ev.evaluate(step)  # an evaluation callback's on_step_end runs before the timer's
        timer.on_step_end(None, None, None)
    # by hand: generation 2.0 (incl. a 0.5 sync), reward 1.0, train 4.0 -> total 7.5, in every step
    assert [s["total"] for s in timer.steps] == [7.5, 7.5, 7.5]
    assert [s["weight_sync"] for s in timer.steps] == [0.5, 0.5, 0.5]
    assert [s["train"] for s in timer.steps] == [4.0, 4.0, 4.0]
