"""What each rank of a distributed run does outside TRL's own step, decided in one place.

A collective (DeepSpeed ZeRO-3's or FSDP's per-layer all-gather inside `generate`, `gather_object`,
a tensor-parallel group's prompt gather) hangs when the ranks do not all call it the same number of
times. The held-out evaluation and the final save run outside TRL's step, so the rules they follow
live here, each small enough to check with recorded calls (tests/unit/test_distributed_eval.py):

- `shard`: every rank evaluates the same number of rows (its own, then repeats of one as padding),
  so it makes the same number of `generate` calls and sends the same number of prompts;
- `hf_generate_synced`: `synced_gpus=True` whenever parameters are sharded (ZeRO-3, FSDP 1 or 2):
  transformers turns it on by itself only for ZeRO-3 and FSDP-flagged modules, which accelerate's
  FSDP2 `fully_shard` does not flag;
- `Collectives`: the gathers the evaluation makes, behind one object a test replaces;
- `colocated_engine_ready` / `restore_engine_sleep`: vLLM sleep mode (TRL sleeps the engine at level
  2 after every generation): wake the weights (by re-syncing them: level 2 discarded them) and the KV
  cache before generating, and put the engine back to sleep after;
- `seeded_rng`: the evaluation's sampling seed without touching any RNG state the run owns;
- `zero3_disabled`: a `from_pretrained` on one rank outside ZeRO-3's `zero.Init` (a collective).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Shard:
    """The row indices one rank evaluates: `indices[:real]` are its own rows, the rest repeat one
    of them (or row 0) so that every rank holds `len(indices)` rows; padding results are dropped."""

    indices: list[int]
    real: int


def shard(n_rows: int, rank: int, world: int) -> Shard:
    """Rows `rank::world`, padded to ceil(n_rows / world) on every rank.

    >>> shard(5, 0, 2), shard(5, 1, 2)
    (Shard(indices=[0, 2, 4], real=3), Shard(indices=[1, 3, 1], real=2))
    >>> shard(1, 1, 2)
    Shard(indices=[0], real=0)
    """
    own = list(range(rank, n_rows, world))
    per = math.ceil(n_rows / world) if n_rows else 0
    filler = own[0] if own else 0
    return Shard(own + [filler] * (per - len(own)), len(own))


def batches(items: list[Any], size: int) -> list[list[Any]]:
    """`items` in consecutive batches of `size` (the last may be shorter); equal-length inputs give
    equal batch counts, so padded shards make the same number of `generate` calls."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def hf_generate_synced(dist: Any, world: int) -> bool:
    """Whether HF `generate` must run with `synced_gpus=True`: parameters sharded across >1 rank.

    `dist` is TRL's `DistributedBackend` (`is_zero3`, `is_fsdp`). With sharded parameters every
    forward step all-gathers each layer, so a rank whose sequences finished must keep stepping
    until every rank has finished.
    """
    return world > 1 and bool(getattr(dist, "is_zero3", False) or getattr(dist, "is_fsdp", False))


class Collectives:
    """The collective calls of the held-out evaluation (accelerate / torch.distributed).

    Tests substitute an object with the same methods that records who calls what.
    """

    def __init__(self, accelerator: Any) -> None:
        self.acc = accelerator

    @property
    def rank(self) -> int:
        return self.acc.process_index

    @property
    def world(self) -> int:
        return self.acc.num_processes

    def gather(self, obj: Any) -> list[Any]:
        """One object from every rank, in rank order, on every rank."""
        if self.world == 1:
            return [obj]
        from accelerate.utils import gather_object

        return gather_object([obj])

    def gather_group(self, obj: Any, group: Any, size: int) -> list[Any]:
        """One object from every rank of a process subgroup (a tensor-parallel group), in group order."""
        import torch.distributed as dist

        out: list[Any] = [None] * size
        dist.all_gather_object(out, obj, group=group)
        return out

    def group_rank(self, group: Any) -> int:
        import torch.distributed as dist

        return dist.get_rank(group=group)

    def broadcast(self, obj: Any) -> Any:
        """The main process's `obj` on every rank."""
        if self.world == 1:
            return obj
        from accelerate.utils import broadcast_object_list

        box = [obj]
        broadcast_object_list(box, from_process=0)
        return box[0]

    def barrier(self) -> None:
        if self.world > 1:
            self.acc.wait_for_everyone()


def colocated_engine_ready(trainer: Any) -> bool:
    """Make the trainer's colocated vLLM engine hold the current weights and a KV cache.

    Returns True when the engine was asleep (sleep mode): the caller puts it back with
    `restore_engine_sleep` once it has generated. Every rank must call this (the weight sync
    gathers parameters under ZeRO-3 / FSDP).

    Under sleep mode TRL sleeps the engine at level 2 after each generation, which discards the
    weights and the KV cache, and vLLM schedules nothing until every tag is awake. Level 2 means
    waking is not enough for the weights: they are pushed again from the training model (TRL's
    `sync_weights` wakes them first), even when the step number says they are current.
    """
    vg = trainer.vllm_generation
    asleep = bool(vg.enable_sleep_mode)
    if (asleep and getattr(vg, "_llm_weights_sleeping", False)) or \
            trainer.state.global_step != trainer._last_loaded_step:
        vg.sync_weights()
        trainer._last_loaded_step = trainer.state.global_step
    if asleep:
        vg.llm.wake_up(tags=["kv_cache"])
    return asleep


def restore_engine_sleep(trainer: Any) -> None:
    """Put a sleep-mode engine back to sleep (level 2, as TRL leaves it between generations) and
    tell TRL its weights are gone, so its next generation re-pushes them."""
    vg = trainer.vllm_generation
    vg.llm.sleep(level=2)
    vg._llm_weights_sleeping = True


@contextmanager
def seeded_rng(seed: int, device: Any = None) -> Iterator[None]:
    """Seed the CPU RNG (and the CUDA RNG of `device` when it is a CUDA device) for the block, and
    restore every state it touched afterwards.

    `torch.manual_seed` inside `torch.random.fork_rng(devices=[])` would reseed every CUDA device
    and restore none of them: the training run's CUDA sampling would change for good.
    """
    import torch

    cuda_index = None
    if device is not None and getattr(device, "type", str(device)) == "cuda":
        cuda_index = device.index if device.index is not None else torch.cuda.current_device()
    with torch.random.fork_rng(devices=[] if cuda_index is None else [cuda_index]):
        torch.random.default_generator.manual_seed(seed)
        if cuda_index is not None:
            with torch.cuda.device(cuda_index):
                torch.cuda.manual_seed(seed)
        yield


@contextmanager
def zero3_disabled() -> Iterator[None]:
    """Hide an active DeepSpeed ZeRO-3 configuration from transformers for the block.

    Under ZeRO-3 the trainer registers its DeepSpeed config globally, and `from_pretrained` then
    builds the model inside `deepspeed.zero.Init`, which partitions every parameter with a
    collective. A load on the main process only (the LoRA merge) would wait there for ranks that
    wait at a barrier. Inside this block the load is a plain one; the config is restored after.
    """
    from transformers.integrations import deepspeed as hf_ds

    saved = hf_ds._hf_deepspeed_config_weak_ref
    hf_ds.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        hf_ds._hf_deepspeed_config_weak_ref = saved
