"""The held-out evaluation and the save under several ranks, where a CPU cannot run the real thing
(DeepSpeed ZeRO-3, FSDP2, vLLM sleep mode and tensor parallelism need CUDA).

Each rank runs `VerifierEvalCallback.evaluate` in its own thread against fakes that behave like the
real collectives: every collective call (a gather, a TP-group gather, a broadcast, the per-layer
all-gather that a forward of a sharded model makes) is a rendezvous of all ranks of its group,
and a rank that arrives at a different collective than the others, or never arrives, fails the
test (`RankMismatch`, or a barrier timeout where a real run would hang). The expected call counts
come from the row and rank counts (ceil(rows / ranks) rows each, batched), not from the code.
The vLLM engine fake follows vLLM's sleep rules: after `sleep(level=2)` it schedules nothing until
every tag is awake, and the weights it holds are discarded until they are loaded again.
"""

from __future__ import annotations

import math
import sys
import threading
import types
from types import SimpleNamespace
from typing import Any

import pytest

from proofcheck.train.callbacks import VerifierEvalCallback
from proofcheck.train.distributed import shard

VALID = "<assessment>fine</assessment><errors>None</errors><first_error_step>-1</first_error_step>"


class RankMismatch(AssertionError):
    pass


class Rendezvous:
    """All `n` ranks of a group exchange one object per collective call, in the same order."""

    def __init__(self, n: int, timeout: float = 20.0) -> None:
        self.n = n
        self.barrier = threading.Barrier(n, timeout=timeout)
        self.slots: dict[int, tuple[str, Any]] = {}

    def exchange(self, pos: int, what: str, obj: Any) -> list[Any]:
        self.slots[pos] = (what, obj)
        self.barrier.wait()
        got = [self.slots[p] for p in range(self.n)]
        self.barrier.wait()  # everyone has read before the next call writes
        if len({w for w, _ in got}) > 1:
            raise RankMismatch(f"ranks in different collectives: {[w for w, _ in got]}")
        return [o for _, o in got]


class FakeCollectives:
    """`proofcheck.train.distributed.Collectives` over threads, recording each rank's calls."""

    def __init__(self, rank: int, world: Rendezvous, tp_groups: dict[int, tuple[Rendezvous, int]] | None = None):
        self.rank, self.world_rdv, self.tp = rank, world, tp_groups or {}
        self.calls: list[str] = []

    @property
    def world(self) -> int:
        return self.world_rdv.n

    def gather(self, obj: Any) -> list[Any]:
        self.calls.append("gather")
        return self.world_rdv.exchange(self.rank, "gather", obj)

    def gather_group(self, obj: Any, group: Any, size: int) -> list[Any]:
        self.calls.append("gather_group")
        rdv, pos = self.tp[self.rank]
        assert rdv is group and rdv.n == size
        return rdv.exchange(pos, "gather_group", obj)

    def group_rank(self, group: Any) -> int:
        return self.tp[self.rank][1]

    def broadcast(self, obj: Any) -> Any:
        self.calls.append("broadcast")
        return self.world_rdv.exchange(self.rank, "broadcast", obj)[0]

    def barrier(self) -> None:
        self.calls.append("barrier")
        self.world_rdv.exchange(self.rank, "barrier", None)


class FakeTokenizer:
    """Prompt -> ids by its length; any ids decode to the same valid verdict."""

    eos_token_id = 2
    pad_token_id = 0
    padding_side = "right"

    def apply_chat_template(self, messages: list[dict], tokenize: bool = True, **kw: Any) -> Any:
        text = " ".join(m["content"] for m in messages)
        return {"input_ids": [5 + len(text) % 50, 7, 9]} if tokenize else text

    def __call__(self, texts: list[str], **kw: Any) -> Any:
        import torch

        ids = torch.tensor([[5, 7, 9]] * len(texts))
        return SimpleNamespace(to=lambda device: {"input_ids": ids, "attention_mask": torch.ones_like(ids)})

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return VALID


class FakeModel:
    """`generate` of a model whose forward, when `sharded`, all-gathers every layer: one rendezvous
    per decoding step. Without `synced_gpus` a rank stops when its own sequences end (here after
    rank + 1 steps, as ranks finish at different lengths); with it, all ranks step to the limit."""

    def __init__(self, rank: int, world: Rendezvous | None) -> None:
        self.rank, self.world = rank, world
        self.training = True
        self.device = "cpu"
        self.generation_config = SimpleNamespace(eos_token_id=2)
        self.generate_calls: list[dict] = []

    def eval(self) -> None:
        self.training = False

    def train(self) -> None:
        self.training = True

    def generate(self, input_ids: Any, attention_mask: Any, synced_gpus: bool, num_return_sequences: int,
                 max_new_tokens: int, **kw: Any) -> Any:
        import torch

        self.generate_calls.append({"rows": input_ids.shape[0], "synced_gpus": synced_gpus})
        if self.world is not None:
            for _ in range(max_new_tokens if synced_gpus else self.rank + 1):
                self.world.exchange(self.rank, "layer all-gather", None)
        n = input_ids.shape[0] * num_return_sequences
        return torch.cat([input_ids.repeat_interleave(num_return_sequences, 0), torch.full((n, 2), 2)], dim=1)


class FakeLLM:
    """A vLLM `LLM` with vLLM's sleep semantics (level 2 discards the weights and the KV cache; the
    scheduler runs only when every tag is awake)."""

    def __init__(self) -> None:
        self.asleep: set[str] = set()
        self.weights_loaded = True
        self.requests: list[list[tuple[list[int], int]]] = []
        self.text = VALID  # every pass's answer

    def sleep(self, level: int = 1) -> None:
        assert level == 2
        self.asleep = {"weights", "kv_cache"}
        self.weights_loaded = False

    def wake_up(self, tags: list[str] | None = None) -> None:
        self.asleep -= set(tags or ("weights", "kv_cache"))

    def generate(self, prompts: list[dict], params: list[Any], use_tqdm: bool = False) -> list[Any]:
        if self.asleep:
            raise RankMismatch(f"vLLM would wait forever: {sorted(self.asleep)} asleep, the scheduler is paused")
        if not self.weights_loaded:
            raise AssertionError("generating with the weights that sleep level 2 discarded")
        self.requests.append([(p["prompt_token_ids"], sp.seed) for p, sp in zip(prompts, params, strict=True)])
        return [SimpleNamespace(outputs=[SimpleNamespace(text=self.text, finish_reason="stop")] * sp.n) for sp in params]


class FakeVLLMGeneration:
    """TRL's VLLMGeneration as far as the evaluation uses it (`sync_weights` as TRL 1.16 writes it)."""

    def __init__(self, sleep_mode: bool, tp: int = 1, tp_group: Any = None) -> None:
        self.llm = FakeLLM()
        self.enable_sleep_mode = sleep_mode
        self.tensor_parallel_size, self.tp_group = tp, tp_group
        self._llm_weights_sleeping = False
        self.syncs = 0
        if sleep_mode:  # TRL sleeps the engine right after creating it
            self.llm.sleep(level=2)
            self._llm_weights_sleeping = True

    def sync_weights(self) -> None:
        if self.enable_sleep_mode:
            self.llm.wake_up(tags=["weights"])
            self._llm_weights_sleeping = False
        self.llm.weights_loaded = True
        self.syncs += 1


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[dict] = []

    def generate(self, prompts: list[list[int]], n: int, max_tokens: int, **kw: Any) -> dict:
        self.calls.append({"prompts": prompts, "n": n, **kw})
        return {"completion_ids": [[7, 2]] * (len(prompts) * n)}


class FakeTrainer:
    def __init__(self, rank: int, world: int, *, backend: str, model: FakeModel, vg: Any = None,
                 dist: Any = None) -> None:
        self.args = SimpleNamespace(use_vllm=backend != "transformers", vllm_mode=backend.removeprefix("vllm-"),
                                    ds3_gather_for_generation=True)
        self.state = SimpleNamespace(global_step=0)
        self._last_loaded_step = -1
        self.model = self.model_wrapped = model
        self.processing_class = FakeTokenizer()
        self.chat_template_kwargs: dict = {}
        self.accelerator = SimpleNamespace(process_index=rank, num_processes=world)
        self.vllm_generation = vg
        self._dist = dist
        self.logged: list[dict] = []

    def log(self, logs: dict) -> None:
        self.logged.append(logs)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    from proofcheck.train.config import ProofcheckScriptArguments
    from proofcheck.train.data import build_training_data

    return build_training_data(ProofcheckScriptArguments(synthetic_count=16, eval_fraction=0.0,
                                                         include_reference_solution=False)).train


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """`vllm.SamplingParams` without importing vLLM (~15 s here): the evaluation builds real params."""
    mod = types.ModuleType("vllm")
    mod.SamplingParams = lambda **kw: SimpleNamespace(**kw)
    sub = types.ModuleType("vllm.sampling_params")
    sub.StructuredOutputsParams = lambda **kw: SimpleNamespace(**kw)
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sub)


@pytest.fixture
def plain_unwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL's unwrap_model_for_generation on a fake accelerator: yield the model itself."""
    from contextlib import contextmanager

    import trl.models.utils as trl_utils

    @contextmanager
    def unwrap(model: Any, accelerator: Any, **kw: Any):
        yield model

    monkeypatch.setattr(trl_utils, "unwrap_model_for_generation", unwrap)


def run_ranks(world: int, make: Any, timeout: float = 60.0) -> list[Any]:
    """Run `make(rank)`'s evaluation on `world` threads; re-raise the first failure."""
    out: list[Any] = [None] * world
    errors: list[BaseException] = []

    def target(rank: int) -> None:
        try:
            out[rank] = make(rank)
        except BaseException as e:  # noqa: BLE001 - a thread's failure is re-raised below
            errors.append(e)

    threads = [threading.Thread(target=target, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a rank is still waiting in a collective: the run would hang"
    if errors:
        raise errors[0]
    return out


@pytest.mark.parametrize(("n_rows", "world"), [(100, 8), (10, 4), (3, 2), (1, 2), (8, 8), (7, 1), (0, 3)])
def test_shard_gives_every_rank_the_same_count_and_every_row_once(n_rows: int, world: int) -> None:
    parts = [shard(n_rows, r, world) for r in range(world)]
    per = -(-n_rows // world)  # ceil, by hand
    assert all(len(p.indices) == per for p in parts)
    real = sorted(i for p in parts for i in p.indices[:p.real])
    assert real == list(range(n_rows))


@pytest.mark.parametrize(("sharding", "world", "n_rows", "batch"), [
    ("zero3", 4, 10, 2),   # ZeRO-3: 10 rows on 4 ranks -> 3,3,2,2 own rows -> 2 generate calls each
    ("fsdp2", 3, 7, 2),    # FSDP2: accelerate's fully_shard does not flag modules for transformers
    ("zero3", 8, 100, 4),  # the case: 13 rows each, 4 calls (some ranks would make 3)
])
def test_sharded_hf_generation_makes_equal_synced_calls(rows: list[dict], plain_unwrap: None, sharding: str,
                                                         world: int, n_rows: int, batch: int) -> None:
    rows = (rows * 7)[:n_rows]
    dist = SimpleNamespace(is_zero3=sharding == "zero3", is_fsdp=sharding == "fsdp2",
                           summon_full_params=lambda *a, **k: __import__("contextlib").nullcontext())
    rdv = Rendezvous(world)
    models = [FakeModel(r, rdv) for r in range(world)]
    colls = [FakeCollectives(r, rdv) for r in range(world)]

    def one(rank: int) -> Any:
        trainer = FakeTrainer(rank, world, backend="transformers", model=models[rank], dist=dist)
        cb = VerifierEvalCallback(trainer, rows, passes=2, max_new_tokens=3, batch_size=batch,
                                  collectives=colls[rank])
        return cb.evaluate(5), cb.last_results

    got = run_ranks(world, one)
    calls = math.ceil(math.ceil(n_rows / world) / batch)
    assert [len(m.generate_calls) for m in models] == [calls] * world
    assert all(c["synced_gpus"] for m in models for c in m.generate_calls)
    assert [c.calls for c in colls] == [["gather"]] * world
    for entry, results in got:  # every rank logs the same, complete evaluation
        assert entry["n_proofs"] == n_rows and entry["n_passes"] == 2 * n_rows
        assert [r["proof_id"] for r in results] == [r["proof_id"] for r in rows]


def test_unsharded_single_process_generation_is_not_synced(rows: list[dict], plain_unwrap: None) -> None:
    model = FakeModel(0, None)
    trainer = FakeTrainer(0, 1, backend="transformers", model=model,
                          dist=SimpleNamespace(is_zero3=False, is_fsdp=False,
                                               summon_full_params=lambda *a, **k: __import__("contextlib").nullcontext()))
    VerifierEvalCallback(trainer, rows[:5], passes=2, max_new_tokens=3, batch_size=2,
                         collectives=FakeCollectives(0, Rendezvous(1))).evaluate(0)
    assert [c["synced_gpus"] for c in model.generate_calls] == [False, False, False]
    assert model.training  # train mode restored


@pytest.mark.parametrize("loaded_step", [-1, 0])  # step moved since the last sync / step numbers already match
def test_colocate_eval_wakes_a_sleeping_engine_and_puts_it_back(rows: list[dict], fake_vllm: None,
                                                                loaded_step: int) -> None:
    vg = FakeVLLMGeneration(sleep_mode=True)
    trainer = FakeTrainer(0, 1, backend="vllm-colocate", model=FakeModel(0, None), vg=vg)
    trainer._last_loaded_step = loaded_step  # with 0, the step matches but sleep level 2 discarded the weights
    cb = VerifierEvalCallback(trainer, rows[:3], passes=2, collectives=FakeCollectives(0, Rendezvous(1)))
    entry = cb.evaluate(0)
    assert entry["n_passes"] == 6 and entry["valid_rate"] == 1.0 and entry["generation"] == "vllm-colocate"
    assert vg.syncs == 1 and len(vg.llm.requests) == 1
    # as it found it: asleep, and TRL told to push the weights again before its next generation
    assert vg.llm.asleep == {"weights", "kv_cache"} and vg._llm_weights_sleeping
    assert trainer._last_loaded_step == 0


def test_colocate_eval_without_sleep_mode_syncs_only_when_the_step_moved(rows: list[dict], fake_vllm: None) -> None:
    vg = FakeVLLMGeneration(sleep_mode=False)
    trainer = FakeTrainer(0, 1, backend="vllm-colocate", model=FakeModel(0, None), vg=vg)
    cb = VerifierEvalCallback(trainer, rows[:3], passes=2, collectives=FakeCollectives(0, Rendezvous(1)))
    cb.evaluate(0)
    cb.evaluate(0)
    assert vg.syncs == 1 and len(vg.llm.requests) == 2 and not vg.llm.asleep


def test_colocate_uneven_rows_one_equal_request_per_rank(rows: list[dict], fake_vllm: None) -> None:
    world, n = 2, 5
    rdv = Rendezvous(world)
    vgs = [FakeVLLMGeneration(sleep_mode=True) for _ in range(world)]

    def one(rank: int) -> Any:
        trainer = FakeTrainer(rank, world, backend="vllm-colocate", model=FakeModel(rank, None), vg=vgs[rank])
        cb = VerifierEvalCallback(trainer, rows[:n], passes=2, seed=100, collectives=FakeCollectives(rank, rdv))
        return cb.evaluate(0)

    entries = run_ranks(world, one)
    assert [len(vg.llm.requests) for vg in vgs] == [1, 1]
    assert [len(vg.llm.requests[0]) for vg in vgs] == [3, 3]  # ceil(5 / 2), padded
    assert [seed for _, seed in vgs[0].llm.requests[0]] == [100, 102, 104]  # seed + row index, by hand
    assert all(e["n_proofs"] == n for e in entries)


def test_tensor_parallel_group_submits_the_same_prompts_and_seeds(rows: list[dict], fake_vllm: None) -> None:
    """4 ranks, TP 2: groups [0, 1] and [2, 3] each share one engine, which needs the same requests
    from both of its ranks (TRL gathers prompts across the group the same way)."""
    world, tp, n = 4, 2, 7
    rdv = Rendezvous(world)
    groups = {0: Rendezvous(tp), 2: Rendezvous(tp)}
    tp_of = {r: (groups[r - r % tp], r % tp) for r in range(world)}
    vgs = [FakeVLLMGeneration(sleep_mode=True, tp=tp, tp_group=tp_of[r][0]) for r in range(world)]
    colls = [FakeCollectives(r, rdv, tp_of) for r in range(world)]

    def one(rank: int) -> Any:
        trainer = FakeTrainer(rank, world, backend="vllm-colocate", model=FakeModel(rank, None), vg=vgs[rank])
        cb = VerifierEvalCallback(trainer, rows[:n], passes=2, collectives=colls[rank])
        return cb.evaluate(0), cb.last_results

    got = run_ranks(world, one)
    reqs = [vg.llm.requests[0] for vg in vgs]
    assert reqs[0] == reqs[1] and reqs[2] == reqs[3] and reqs[0] != reqs[2]
    assert len(reqs[0]) == tp * math.ceil(n / world)
    assert {seed for _, seed in reqs[0] + reqs[2]} == set(range(n))  # every row generated, seed = row index
    for entry, results in got:
        assert entry["n_proofs"] == n and sorted(r["proof_id"] for r in results) == sorted(r["proof_id"] for r in rows[:n])


def test_server_mode_eval_uses_the_trainers_server_from_the_main_process(rows: list[dict]) -> None:
    world, n = 3, 5
    rdv = Rendezvous(world)
    client = FakeClient()
    vgs = [SimpleNamespace(vllm_client=client if r == 0 else None, syncs=0) for r in range(world)]
    for vg in vgs:
        vg.sync_weights = lambda vg=vg: setattr(vg, "syncs", vg.syncs + 1)
    colls = [FakeCollectives(r, rdv) for r in range(world)]

    def one(rank: int) -> Any:
        trainer = FakeTrainer(rank, world, backend="vllm-server", model=FakeModel(rank, None), vg=vgs[rank])
        trainer.state.global_step = 50
        cb = VerifierEvalCallback(trainer, rows[:n], passes=4, max_new_tokens=8, collectives=colls[rank])
        return cb.evaluate(50)

    entries = run_ranks(world, one)
    assert len(client.calls) == 1 and client.calls[0]["n"] == 4
    assert len(client.calls[0]["prompts"]) == world * math.ceil(n / world)
    assert [vg.syncs for vg in vgs] == [1, 1, 1]  # the weight push is collective: every rank takes part
    assert [c.calls for c in colls] == [["gather", "broadcast", "gather"]] * world
    assert all(e["n_proofs"] == n and e["valid_rate"] == 1.0 and e["generation"] == "vllm-server" for e in entries)


def test_learning_curve_points_verify_only_the_curve_rows_and_stay_out_of_the_history(
        rows: list[dict], fake_vllm: None) -> None:
    """Full evaluations (start, end) verify every row and give the curve its point from the first
    `curve_samples` rows; periodic ones verify only those rows and add a curve point only."""
    vg = FakeVLLMGeneration(sleep_mode=False)
    trainer = FakeTrainer(0, 1, backend="vllm-colocate", model=FakeModel(0, None), vg=vg)
    cb = VerifierEvalCallback(trainer, rows[:4], passes=2, collectives=FakeCollectives(0, Rendezvous(1)),
                              curve_samples=2)
    cb.evaluate(0)
    cb.evaluate(3, curve_only=True)
    cb.evaluate(6)
    assert [len(r) for r in vg.llm.requests] == [4, 2, 4]
    assert [h["step"] for h in cb.history] == [0, 6] and [h["n_proofs"] for h in cb.history] == [4, 4]
    assert [(c["step"], c["n_proofs"], c["n_passes"]) for c in cb.curve] == [(0, 2, 4), (3, 2, 4), (6, 2, 4)]
    assert [scope for scope, _ in cb.timeline] == ["full", "curve", "full"]
    # stopped early by the time budget: a curve point at step 9, then the final evaluation at step 9
    cb.evaluate(9, curve_only=True)
    cb.evaluate(9)
    assert [c["step"] for c in cb.curve] == [0, 3, 6, 9] and [h["step"] for h in cb.history] == [0, 6, 9]


def test_later_full_evaluations_carry_the_paired_change_since_the_first(rows: list[dict]) -> None:
    """The first full evaluation is the base; a curve-only one neither gets nor moves it; a later full one
    carries `paired_gain` over the same proofs (all accepts, then all rejects: TNR 0 -> 1 on every flawed proof)."""
    vg = FakeVLLMGeneration(sleep_mode=False)
    trainer = FakeTrainer(0, 1, backend="vllm-colocate", model=FakeModel(0, None), vg=vg)
    cb = VerifierEvalCallback(trainer, rows[:8], passes=2, collectives=FakeCollectives(0, Rendezvous(1)),
                              curve_samples=4)
    first = cb.evaluate(0)
    assert "paired_gain" not in first and first["rough_tnr"] == 0.0
    vg.llm.text = VALID.replace("<first_error_step>-1", "<first_error_step>1")
    assert "paired_gain" not in cb.evaluate(3, curve_only=True)
    later = cb.evaluate(6)
    assert 2 <= sum(not r["is_correct"] for r in rows[:8]) <= 6  # both classes, for the bootstrap
    assert later["rough_tnr"] == 1.0 and later["paired_gain"] == {
        "since_step": 0, "n_proofs": 8, "rough_bal_f1_gain": 0.0, "rough_bal_f1_gain_se": 0.0,
        "rough_tnr_gain": 1.0, "rough_tnr_gain_se": 0.0}
