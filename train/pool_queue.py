"""The uncertainty pool's bookkeeping in chunks: which rows the sampler serves, and the state a resume needs.

A chunk is one generation batch of TRL's `RepeatSampler` layout: `prompts_per_chunk` prompts (TRL's global
`generation_batch_size // num_generations`, the same count on every process), served for
`num_iterations x steps_per_generation` micro-batches (`micro_per_chunk`) of every process. The Trainer fetches
an optimizer step's `gradient_accumulation_steps` micro-batches before the step begins, and accelerate's
DataLoader fetches one more ahead, so when step s begins the chunks up to the one holding step s + 1's first
micro-batch are drawn. `ChunkPlan` says so in numbers; `PoolQueues` serves each chunk from the newest queue
that applies to it, then from the dataset's own order, and keeps what a checkpoint must save so that a resumed
run draws the same chunks as an uninterrupted one. No torch, no model: tested as plain Python.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

_SNAPSHOTS = 8  # chunks back a checkpoint may need (the chunk of the step after the save, drawn ahead)


@dataclass(frozen=True)
class ChunkPlan:
    """Chunk arithmetic of one run.

    >>> plan = ChunkPlan(prompts_per_chunk=4, micro_per_chunk=1, grad_accum=1, max_steps=10)
    >>> plan.chunk_of_step(3), plan.drawn_at_begin(2), plan.chunks_until(0, 2)
    (2, 3, 4)
    """

    prompts_per_chunk: int
    micro_per_chunk: int   # num_iterations x steps_per_generation
    grad_accum: int
    max_steps: int

    @classmethod
    def of(cls, training: Any) -> ChunkPlan:
        """The plan of a `GRPOConfig` (after its `__post_init__`, which sets `generation_batch_size` for the
        world size and `steps_per_generation`)."""
        return cls(training.generation_batch_size // training.num_generations,
                   training.num_iterations * training.steps_per_generation, training.gradient_accumulation_steps,
                   training.max_steps)

    def chunk_of_step(self, step: int) -> int:
        """The chunk holding optimizer step `step`'s first micro-batch (steps from 1, chunks from 0)."""
        return (step - 1) * self.grad_accum // self.micro_per_chunk

    def drawn_at_begin(self, step: int) -> int:
        """How many chunks are drawn when step `step` begins: its own micro-batches, and one ahead."""
        return self.chunk_of_step(step + 1) + 1

    def trained_chunks(self) -> int | None:
        """How many chunks the run trains on (up to `max_steps`' last micro-batch); None without `max_steps`.
        The DataLoader still draws one more ahead of the last step: it never trains."""
        return (self.max_steps * self.grad_accum - 1) // self.micro_per_chunk + 1 if self.max_steps > 0 else None

    def chunks_until(self, first: int, next_refresh_step: int) -> int:
        """How many chunks from chunk `first` a refresh serves when the next one comes at the beginning of the
        step after `next_refresh_step`, counting only chunks that train before `max_steps` (if set)."""
        end = self.drawn_at_begin(next_refresh_step + 1)
        if (trained := self.trained_chunks()) is not None:
            end = min(end, trained)
        return max(0, end - first)


class PoolQueues:
    """The queues of ranked rows (each serving the chunks from the one it was made for) and the fallback order.

    >>> q = PoolQueues(order=[0, 1, 2, 3])
    >>> q.add(0, [9, 8, 7])
    >>> q.chunk(0, 2), q.chunk(1, 2), q.draws[-1]
    ([9, 8], [7, 0], {'chunk': 1, 'queued': 1, 'fallback': 1, 'rows': [7, 0]})
    """

    def __init__(self, order: list[int]) -> None:
        self.order = order
        self.queues: list[tuple[int, deque[int]]] = []  # (the first chunk it serves, its rows)
        self.fallback = 0      # the next position in `order`
        self.drawn = 0         # chunks drawn so far (the next chunk's index)
        self.skip_until = 0    # a resumed run: chunks before this one are skipped batches, never trained
        self._resumed = False
        self.snapshots: dict[int, dict[str, Any]] = {}
        self.draws: list[dict[str, int]] = []  # per chunk served: rows from the queue and from the fallback

    def add(self, first: int, rows: list[int]) -> None:
        """A refresh's ranked rows, served from chunk `first` on (they replace older queues there)."""
        self.queues.append((first, deque(rows)))

    def _state(self) -> dict[str, Any]:
        return {"queues": [[f, list(q)] for f, q in self.queues], "fallback": self.fallback}

    def epoch_start(self, chunks_per_epoch: int) -> int:
        """The index of the first chunk of the epoch the sampler is starting."""
        if self._resumed:
            self._resumed = False
            self.drawn = self.skip_until // chunks_per_epoch * chunks_per_epoch
        return self.drawn

    def chunk(self, k: int, size: int) -> list[int]:
        """The `size` rows of chunk `k`: the newest queue that applies to it first, then the fallback order."""
        if k != self.drawn:
            raise RuntimeError(f"chunk {k} drawn after {self.drawn} chunks: the sampler skipped or repeated one")
        self.drawn = k + 1
        if k < self.skip_until:
            return [self.order[0]] * size
        self.snapshots[k] = self._state()
        self.snapshots.pop(k - _SNAPSHOTS, None)
        current = [(f, q) for f, q in self.queues if f <= k]
        self.queues = current[-1:] + [(f, q) for f, q in self.queues if f > k]
        queue = current[-1][1] if current else deque()
        out = [queue.popleft() for _ in range(min(size, len(queue)))]
        queued = len(out)
        while len(out) < size:
            out.append(self.order[self.fallback % len(self.order)])
            self.fallback += 1
        self.draws.append({"chunk": k, "queued": queued, "fallback": size - queued, "rows": list(out)})
        return out

    def state_at(self, k: int) -> dict[str, Any]:
        """What regenerates chunks `k`, `k + 1`, ... as they are or will be drawn now (JSON-ready): the state
        before chunk `k` was drawn, with the queues made since for later chunks."""
        if k == self.drawn:
            return {"chunk": k, **self._state()}
        if k not in self.snapshots:
            raise RuntimeError(f"no pool state for chunk {k} ({self.drawn} drawn): it was drawn too long ago")
        snap = self.snapshots[k]
        later = [[f, list(q)] for f, q in self.queues if f > k]
        return {"chunk": k, "queues": snap["queues"] + later, "fallback": snap["fallback"]}

    def restore(self, saved: dict[str, Any]) -> None:
        """Start from `state_at`'s record: the next epoch the sampler starts skips to chunk `saved["chunk"]`."""
        self.queues = [(int(f), deque(int(i) for i in q)) for f, q in saved["queues"]]
        self.fallback = int(saved["fallback"])
        self.skip_until = int(saved["chunk"])
        self._resumed = True
