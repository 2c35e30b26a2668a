"""A CPU rehearsal of the distributed training path: two real ranks under `accelerate launch
--multi_gpu --num_processes 2` (gloo, `use_cpu`), the tiny model, LoRA, vLLM colocated on both ranks.

One run, killed twice and resumed, then requeued twice after its end, covers in five launches (one
tiny-model build, four vLLM engine starts):
1. colocate on both ranks, the held-out evaluation before the first step on an evaluation set of
   3 proofs (not a multiple of 2 ranks), a checkpoint every step; SIGKILL of the whole launch
   (launcher and ranks, as a scheduler kills a job) between checkpoints: after checkpoint-1 is
   complete, while step 2 runs;
2. resumed (HF generation: no engine start needed for this part), SIGKILL during the write of
   checkpoint-2: the model files are on disk, the optimizer, trainer state and marker are not;
3. resumed again with colocate: checkpoint-2 is skipped with a message, the run continues from
   checkpoint-1 to the same final step 3, evaluates after the last step, merges LoRA under two
   ranks, and writes a summary whose reward and evaluation history covers steps 1-3 and 0-3;
4. requeued twice with `--resume_from_checkpoint last` after its end, as a scheduler requeues a
   finished job: each launch trains nothing (issue 37: the Trainer alone trained a step 4) and
   leaves every file as it was.
Then the merged model loads in vLLM and generates.

The kills are placed by a wrapper around `train/grpo.py` (this module writes it to a tmp folder)
that stops rank 0 at the chosen point, whatever the host's speed, and writes the point it reached
into a sentinel file; the test waits for the file, kills the launch's process group by its handle
and checks that the kill landed there: before the run's end. Slow: ~3-4 minutes on 2 cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from proofcheck.process import free_port

REPO = Path(__file__).resolve().parents[2]
MAX_STEPS = 3
pytestmark = pytest.mark.slow

WRAPPER = '''
"""train/grpo.py with a stall point for the rehearsal: PC_STALL=between:K stops rank 0 when step
K+1 begins (checkpoint-K complete); PC_STALL=during:K stops it inside the save of checkpoint-K, after
the model files and before the optimizer, trainer state and marker. It then writes PC_SENTINEL and
sleeps until the test kills the launch: the point it reached ("between:K", "during:K") is what the
sentinel says."""
import os
import sys
import time
from pathlib import Path

from transformers import TrainerCallback

from proofcheck.train import run

where, _, k = os.environ.get("PC_STALL", ":").partition(":")


def stall(step):
    if os.environ.get("RANK", "0") == "0":
        Path(os.environ["PC_SENTINEL"]).write_text(f"{where}:{step}")
        while True:  # until the test kills the launch
            time.sleep(60)


class Between(TrainerCallback):
    def on_step_begin(self, args, state, control, **kw):
        if state.global_step == int(k):
            stall(state.global_step)


build = run.build_trainer


def build_with_stall(*a, **kw):
    out = build(*a, **kw)
    trainer = out[0]
    if where == "between":
        trainer.add_callback(Between())
    elif where == "during":
        save_model = trainer.save_model

        def save_then_stall(*sa, **skw):
            save_model(*sa, **skw)
            if skw.get("_internal_call") and trainer.state.global_step == int(k):
                stall(trainer.state.global_step)

        trainer.save_model = save_then_stall
    return out


run.build_trainer = build_with_stall
from proofcheck.train.grpo import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
'''


def launch(wrapper: Path, out: Path, log: Path, model: Path, *extra: str, stall: str = "",
           sentinel: Path | None = None) -> subprocess.Popen:
    """Two ranks of the wrapped train/grpo.py in a new process group (killed as one by the test)."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(free_port()), str(wrapper), "--config", "configs/grpo/tiny-cpu.yaml",
           "--model_name_or_path", str(model), "--output_dir", str(out), "--bf16", "false",
           "--use_peft", "true", "--lora_r", "8", "--lora_alpha", "16", "--lora_target_modules", "q_proj", "v_proj",
           "--synthetic_count", "16", "--mix_ratios", "0.0", "0.0", "1.0", "--include_reference_solution", "false",
           "--eval_fraction", "0.3", "--eval_max_samples", "3", "--eval_passes", "2", "--eval_max_new_tokens", "8",
           "--eval_every_steps", "0", "--eval_at_start", "true", "--max_completion_length", "8",
           "--per_device_train_batch_size", "2", "--num_generations", "2", "--max_steps", str(MAX_STEPS),
           "--save_strategy", "steps", "--save_steps", "1", "--save_total_limit", "5",
           "--save_merged", "true", "--save_adapter", "false", "--disable_tqdm", "true", *extra]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PC_STALL": stall,
           "PC_SENTINEL": str(sentinel or out / "no-sentinel"), "VLLM_CPU_KVCACHE_SPACE": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen(cmd, cwd=REPO, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def kill_launch(proc: subprocess.Popen) -> None:
    """SIGKILL the launch as a scheduler kills a job: its process group and every descendant. The
    ranks run in sessions of their own (killpg alone left them alive, holding a vLLM engine and
    ~1.7 GB each), so the tree is read from the launcher's handle before anything dies."""
    import psutil

    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for child in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    proc.wait(60)
    _, alive = psutil.wait_procs(tree, timeout=60)
    assert not alive, f"processes of the killed launch still running: {[p.pid for p in alive]}"


def kill_at(proc: subprocess.Popen, sentinel: Path, log: Path, timeout_s: float = 420) -> None:
    """Wait for the sentinel, then SIGKILL the launch's whole process group (by its handle)."""
    deadline = time.monotonic() + timeout_s
    try:
        while not sentinel.exists():
            if proc.poll() is not None:
                raise AssertionError(f"the run ended ({proc.returncode}) before its stall point:\n"
                                     f"{log.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no stall point after {timeout_s:.0f} s:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        time.sleep(1.0)  # rank 1 goes on into its next collective, as on a real cluster
    finally:
        kill_launch(proc)


def landed_before_end(sentinel: Path, point: str, out: Path, log: Path) -> None:
    """The kill came at `point` ("between:K" / "during:K"), before the run's end: no rank finished, no
    final save, no checkpoint of the last step (MAX_STEPS)."""
    assert sentinel.read_text() == point
    text = log.read_text()
    assert "done at step" not in text and "nothing to train" not in text, text[-3000:]
    assert not (out / "run_summary.json").exists() and not (out / "merged").exists()
    assert not (out / f"checkpoint-{MAX_STEPS}").exists()


def snapshot(out: Path) -> dict[str, tuple[str, int]]:
    """Every file under `out`: (sha256, mtime), so a rewrite with the same bytes shows too."""
    import hashlib

    return {str(p.relative_to(out)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(out.rglob("*")) if p.is_file()}


def finish(proc: subprocess.Popen, log: Path, timeout_s: float = 480) -> str:
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        kill_launch(proc)
        raise AssertionError(f"no end after {timeout_s:.0f} s (a hang?):\n{log.read_text()[-4000:]}") from None
    text = log.read_text()
    assert proc.returncode == 0, text[-6000:]
    return text


def test_two_ranks_colocate_killed_twice_resume_to_the_same_end(tiny_model: Path, tmp_path: Path) -> None:
    from proofcheck.train.checkpoints import MARKER, incomplete_reason, load_history

    wrapper = tmp_path / "grpo_with_stall.py"
    wrapper.write_text(textwrap.dedent(WRAPPER))
    out = tmp_path / "run"

    # 1. colocate on both ranks, evaluation before the first step; killed between checkpoints
    s1 = tmp_path / "stalled-between"
    kill_at(launch(wrapper, out, tmp_path / "l1.log", tiny_model, stall="between:1", sentinel=s1), s1,
            tmp_path / "l1.log")
    landed_before_end(s1, "between:1", out, tmp_path / "l1.log")
    assert incomplete_reason(out / "checkpoint-1") is None and not (out / "checkpoint-2").exists()
    saved = load_history(out / "checkpoint-1")
    assert [s for s, _ in saved["rewards"]] == [1]
    before = saved["eval_history"]
    assert [e["step"] for e in before] == [0]
    assert before[0]["generation"] == "vllm-colocate" and before[0]["n_proofs"] == 3  # 2 + 1 rows, gathered
    assert before[0]["n_passes"] == 6

    # 2. resumed (plain generation), killed while checkpoint-2 is being written
    s2 = tmp_path / "stalled-during"
    kill_at(launch(wrapper, out, tmp_path / "l2.log", tiny_model, "--use_vllm", "false",
                   "--resume_from_checkpoint", "last", stall="during:2", sentinel=s2), s2, tmp_path / "l2.log")
    landed_before_end(s2, "during:2", out, tmp_path / "l2.log")
    assert "from " + str(out / "checkpoint-1") in (tmp_path / "l2.log").read_text()
    assert (out / "checkpoint-2").is_dir() and not (out / "checkpoint-2" / MARKER).exists()
    assert not (out / "checkpoint-2" / "trainer_state.json").exists()  # the kill came mid-save

    # 3. resumed with colocate: checkpoint-2 skipped, on to step 3, evaluation after, LoRA merged by rank 0
    log3 = tmp_path / "l3.log"
    text = finish(launch(wrapper, out, log3, tiny_model, "--resume_from_checkpoint", "last"), log3)
    assert "skipping checkpoint-2 (step 2): incomplete" in text
    assert "rank 0: done at step 3" in text and "rank 1: done at step 3" in text
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_step"] == 3 and summary["peft"]
    assert summary["resumed_from"] == str(out / "checkpoint-1") and summary["steps_this_run"] == 2
    assert [r["step"] for r in summary["rewards"]] == [1, 2, 3]  # the whole run, across both kills
    assert summary["rewards"][0]["reward"] == saved["rewards"][0][1]
    evals = summary["eval_history"]
    assert [e["step"] for e in evals] == [0, 3] and evals[0] == before[0]
    assert all(e["generation"] == "vllm-colocate" and e["n_proofs"] == 3 for e in evals)
    for step in (2, 3):
        assert incomplete_reason(out / f"checkpoint-{step}") is None
    assert summary["saved"] == {"merged": str(out / "merged")}

    # 4. requeued twice after its end: nothing trained, nothing written (no checkpoint-4, same history and model)
    before = snapshot(out)
    for again in (4, 5):
        log = tmp_path / f"l{again}.log"
        text = finish(launch(wrapper, out, log, tiny_model, "--resume_from_checkpoint", "last"), log)
        assert "checkpoint-3 is at step 3 and the run ends at step 3: nothing to train" in text
        assert "the final save is in place" in text
        assert "rank 0: nothing to train at step 3" in text and "rank 1: nothing to train at step 3" in text
        assert snapshot(out) == before

    # the merged model (base + LoRA merged on rank 0 while rank 1 waited) loads in vLLM
    script = textwrap.dedent(f"""
        from vllm import LLM, SamplingParams
        if __name__ == "__main__":
            llm = LLM({str(out / 'merged')!r}, enforce_eager=True, max_model_len=512, seed=0)
            outs = llm.generate(["Check: 1 + 1 = 2."], SamplingParams(max_tokens=4, seed=0), use_tqdm=False)
            print("MERGED", len(outs[0].outputs[0].token_ids))
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=400,
                         env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    assert res.returncode == 0 and "MERGED" in res.stdout, res.stderr[-3000:]


POOL_WRAPPER = '''
"""train/grpo.py that writes, on every rank, the chunks its uncertainty pool served (PC_POOL_OUT/rank<R>.json)."""
import json
import os
import sys
from pathlib import Path

from transformers import TrainerCallback

from proofcheck.train import run

build = run.build_trainer


class Dump(TrainerCallback):
    def __init__(self, trainer):
        self.trainer = trainer

    def on_train_end(self, args, state, control, **kw):
        pool = self.trainer.uncertainty
        out = Path(os.environ["PC_POOL_OUT"]) / f"rank{os.environ.get('RANK', '0')}.json"
        out.write_text(json.dumps({"draws": pool.queues.draws, "history": pool.history}))


def build_with_dump(*a, **kw):
    out = build(*a, **kw)
    out[0].add_callback(Dump(out[0]))
    return out


run.build_trainer = build_with_dump
from proofcheck.train.grpo import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
'''


def test_two_ranks_serve_the_same_pool_prompts(tiny_model: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48: under two ranks the pool's refreshes (each rank verifies half the pool, the results gathered)
    give both ranks the same queues, so their samplers draw the same chunks (each rank then takes its own
    micro-batches of them); the config check and the sampler count a generation's prompts alike (2 ranks x 2
    rows / 2 generations = 2 prompts a chunk); every trained chunk comes from a queue."""
    wrapper = tmp_path / "grpo_with_pool_dump.py"
    wrapper.write_text(textwrap.dedent(POOL_WRAPPER))
    out, dumps, log = tmp_path / "run", tmp_path / "pool", tmp_path / "pool.log"
    dumps.mkdir()
    monkeypatch.setenv("PC_POOL_OUT", str(dumps))
    text = finish(launch(wrapper, out, log, tiny_model, "--use_vllm", "false", "--eval_at_start", "false",
                         "--eval_max_samples", "0", "--save_strategy", "no", "--uncertainty_pool", "8",
                         "--uncertainty_passes", "2", "--uncertainty_every", "2", "--max_steps", "6"), log)
    assert "rank 0: done at step 6" in text and "rank 1: done at step 6" in text
    ranks = [json.loads((dumps / f"rank{r}.json").read_text()) for r in (0, 1)]
    for r in ranks:
        for e in r["history"]:
            e.pop("seconds")  # each rank's own clock
    assert ranks[0] == ranks[1]
    draws = [d for d in ranks[0]["draws"] if d["chunk"] < 6]  # the chunk drawn ahead of the last step never trains
    assert [d["chunk"] for d in draws] == list(range(6)) and all(len(d["rows"]) == 2 for d in draws)
    assert sum(d["fallback"] for d in draws) == 0, json.dumps([draws, ranks[0]["history"]])
    assert [(e["step"], e["from_chunk"], e["queued"]) for e in ranks[0]["history"]] == [(0, 0, 8), (2, 4, 4)]
