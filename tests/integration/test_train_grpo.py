"""GRPO training of the verifier with real TRL on the tiny local model (CPU).

Covers: plain transformers generation (full fine-tuning, LoRA), vLLM colocate with the CPU
weight-sync fix (synced weights read back from the engine), vLLM server-mode generation
(`trl vllm-serve`; its weight sync needs CUDA), resume from a checkpoint (two real processes under
`accelerate launch`: tests/integration/test_distributed_rehearsal.py), saving merged model + adapter that vLLM
loads, and a learning-signal run (40 steps, ~40 s here).

The tiny model has random weights, so the protocol rewards (meta_verifier, format) are 0 for
every completion and give no gradient. Runs that must move the weights therefore add a dense
test reward through the dotted-path escape hatch of `reward_funcs` (a module written to a tmp
folder, tests/integration/grpo_runs.py): `pc_test_rewards:DigitShare` (share of digit characters, always
varies). The uncertainty pool's runs are in tests/integration/test_uncertainty_pool.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from grpo_runs import argv

from proofcheck.process import free_port

REPO = Path(__file__).resolve().parents[2]

def load_tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_plain_generation_full_finetune_trains_evaluates_saves(tiny_model: Path, tmp_path: Path,
                                                                 test_rewards: Path) -> None:
    import torch

    from proofcheck.train.args import parse
    from proofcheck.train.run import train

    summary = train(*parse(argv(tiny_model, tmp_path / "run", "--eval_every_steps", "2")))
    assert summary["global_step"] == 3 and summary["generation"] == "transformers" and not summary["peft"]
    # every trainable tensor moved (tied embeddings: lm_head is embed_tokens)
    before, after = load_tensors(tiny_model), load_tensors(tmp_path / "run" / "merged")
    assert before.keys() == after.keys()
    unchanged = [k for k in before if torch.equal(before[k], after[k])]
    assert not unchanged, unchanged
    # the saved folder is complete for serving: config, weights, tokenizer with its chat template
    saved = {p.name for p in (tmp_path / "run" / "merged").iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= saved
    # k-pass held-out evaluation at step 2 (every 2 steps) and at the end (step 3)
    assert [e["step"] for e in summary["eval_history"]] == [2, 3]
    for e in summary["eval_history"]:
        assert e["n_proofs"] == 2 and e["n_passes"] == 4
        assert e["valid_rate"] == 0.0 and e["reward_mean"] == 0.0  # random weights: nothing valid yet
        assert "rough_bal_f1" in e and "first_error_step_accuracy" in e
    on_disk = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert on_disk["global_step"] == 3 and on_disk["saved"] == {"merged": str(tmp_path / "run" / "merged")}
    assert [r["step"] for r in on_disk["rewards"]] == [1, 2, 3]  # step 2's training log survived the eval
    assert on_disk["first_reward"] is not None and on_disk["final_reward"] is not None


def test_lora_trains_only_the_adapter_and_saves_adapter_and_merged(tiny_model: Path, tmp_path: Path,
                                                                   test_rewards: Path) -> None:
    import torch
    from safetensors.torch import load_file

    from proofcheck.train.args import parse
    from proofcheck.train.run import train

    out = tmp_path / "lora"
    summary = train(*parse(argv(tiny_model, out, "--use_peft", "true", "--lora_r", "8", "--lora_alpha", "16",
                                "--lora_target_modules", "q_proj", "v_proj", "--eval_max_samples", "0")))
    assert summary["peft"] and set(summary["saved"]) == {"merged", "adapter"}
    adapter = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    lora_b = [k for k in adapter if "lora_B" in k]
    assert lora_b and all(adapter[k].abs().sum() > 0 for k in lora_b)  # lora_B starts at zero: it trained
    assert {"adapter_config.json", "tokenizer.json"} <= {p.name for p in (out / "adapter").iterdir()}
    base, merged = load_tensors(tiny_model), load_tensors(out / "merged")
    for k in base:
        targeted = ".q_proj.weight" in k or ".v_proj.weight" in k
        assert torch.equal(base[k], merged[k]) != targeted, k  # only the LoRA targets changed
    # both outputs load in vLLM (one engine start): the merged model, and the adapter as a LoRA
    # request (its format is what `--enable-lora` serving reads; applied here on the merged weights,
    # which have the base's architecture, only to prove vLLM accepts it)
    script = textwrap.dedent(f"""
        from vllm import LLM, SamplingParams
        from vllm.lora.request import LoRARequest
        if __name__ == "__main__":
            p = SamplingParams(n=2, max_tokens=8, seed=0)
            msgs = [{{"role": "user", "content": "Check: 1 + 1 = 2."}}]
            llm = LLM({str(out / 'merged')!r}, enforce_eager=True, max_model_len=1024, seed=0, enable_lora=True,
                      max_lora_rank=8)
            outs = llm.chat([msgs], p, use_tqdm=False)
            print("MERGED", len(outs[0].outputs))
            outs = llm.chat([msgs], p, lora_request=LoRARequest("v", 1, {str(out / 'adapter')!r}), use_tqdm=False)
            print("ADAPTER", len(outs[0].outputs))
    """)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=400)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "MERGED 2" in res.stdout and "ADAPTER 2" in res.stdout


def test_resume_continues_the_step_count(tiny_model: Path, tmp_path: Path, test_rewards: Path) -> None:
    from proofcheck.train.args import parse
    from proofcheck.train.run import train

    out = tmp_path / "resume"
    first = train(*parse(argv(tiny_model, out, "--max_steps", "2", "--save_strategy", "steps", "--save_steps", "2",
                              "--eval_max_samples", "0")))
    assert first["global_step"] == 2 and (out / "checkpoint-2").is_dir()
    second = train(*parse(argv(tiny_model, out, "--max_steps", "4", "--save_strategy", "steps", "--save_steps", "2",
                               "--eval_max_samples", "0", "--resume_from_checkpoint", "last")))
    assert second["resumed_from"] == str(out / "checkpoint-2")
    assert second["start_step"] == 2 and second["global_step"] == 4 and second["steps_this_run"] == 2
    assert [r["step"] for r in second["rewards"]] == [1, 2, 3, 4]  # the history saved with checkpoint-2, then 3, 4
    assert second["rewards"][:2] == first["rewards"]
    assert (out / "checkpoint-4").is_dir()


def test_vllm_server_mode_generates_verifier_prompts(tiny_model: Path, tmp_path: Path) -> None:
    """`trl vllm-serve`, the server behind `vllm_mode: server`, answers our verifier prompts on CPU.

    Only generation is testable here: the trainer's weight push to the server needs NCCL and CUDA
    (PLATFORM.md), so GRPOTrainer in server mode is GPU-only. vLLM's CLI looks up the
    distribution `vllm`, which the CPU build names `vllm-cpu`: a metadata alias on PYTHONPATH
    (a tmp folder, not the virtualenv) stands in for it.
    """
    from importlib.metadata import version

    from trl.generation.vllm_client import VLLMClient

    from proofcheck.train.config import ProofcheckScriptArguments
    from proofcheck.train.data import build_training_data

    alias = tmp_path / "alias" / f"vllm-{version('vllm-cpu')}+cpu.dist-info"
    alias.mkdir(parents=True)
    (alias / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version('vllm-cpu')}+cpu\n")
    port = free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1",
           "PYTHONPATH": os.pathsep.join([str(alias.parent), *filter(None, [os.environ.get("PYTHONPATH")])])}
    log = open(tmp_path / "vllm-serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "trl.scripts.vllm_serve", "--model", str(tiny_model),
                             "--host", "127.0.0.1", "--port", str(port), "--enforce_eager", "true",
                             "--max_model_len", "2048"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        client = VLLMClient(base_url=f"http://127.0.0.1:{port}", connection_timeout=300)
        rows = build_training_data(ProofcheckScriptArguments(synthetic_count=3, eval_fraction=0.0)).train
        out = client.chat([r["prompt"] for r in rows], n=4, max_tokens=16, temperature=1.0)
        assert len(out["completion_ids"]) == 12
        assert all(1 <= len(c) <= 16 for c in out["completion_ids"])
        assert len(out["logprobs"]) == 12  # what GRPO's importance sampling uses
        # the held-out evaluation in server mode sends its token-id prompts with a seed through the same
        # client (main process; here the only one): the server accepts the request and returns k passes each
        from types import SimpleNamespace

        from transformers import AutoTokenizer

        from proofcheck.train.callbacks import VerifierEvalCallback

        trainer = SimpleNamespace(
            args=SimpleNamespace(use_vllm=True, vllm_mode="server"), state=SimpleNamespace(global_step=0),
            _last_loaded_step=0, vllm_generation=SimpleNamespace(vllm_client=client),
            processing_class=AutoTokenizer.from_pretrained(tiny_model), chat_template_kwargs={},
            model=SimpleNamespace(training=False, eval=lambda: None, generation_config=None),
            accelerator=SimpleNamespace(process_index=0, num_processes=1), log=lambda logs: None)
        cb = VerifierEvalCallback(trainer, rows, passes=4, max_new_tokens=8, seed=3)
        entry = cb.evaluate(0)
        assert entry["generation"] == "vllm-server" and entry["n_proofs"] == 3 and entry["n_passes"] == 12
        assert [len(r["trials"]) for r in cb.last_results] == [4, 4, 4]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _vllm_view(trainer) -> dict:
    """The colocated engine's parameters (vLLM names, fused qkv / gate_up)."""
    engine_model = trainer.vllm_generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
    return {n: p.detach().clone() for n, p in engine_model.named_parameters()}


def _as_vllm(hf: dict) -> dict:
    """HF Qwen2 parameters renamed and fused the way vLLM stores them."""
    import torch

    out = {}
    for name, t in hf.items():
        for a, b, c, fused in ((".q_proj.", ".k_proj.", ".v_proj.", ".qkv_proj."), (".gate_proj.", ".up_proj.", None,
                                                                                   ".gate_up_proj.")):
            if a in name:
                parts = [hf[name], hf[name.replace(a, b)]] + ([hf[name.replace(a, c)]] if c else [])
                out[name.replace(a, fused)] = torch.cat(parts, dim=0)
        if not any(s in name for s in (".q_proj.", ".k_proj.", ".v_proj.", ".gate_proj.", ".up_proj.")):
            out[name] = t
    return out


def _assert_engine_computes_with_its_weights(trainer: Any) -> None:
    """Every GEMM layer of the colocated engine gives F.linear's result on its current `weight` (bf16
    tolerance): its kernel (packed or not) reads the weights the last sync wrote."""
    import torch

    engine_model = trainer.vllm_generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
    checked = 0
    for name, module in engine_model.named_modules():
        weight = getattr(module, "weight", None)
        if not hasattr(module, "cpu_linear") or weight is None or weight.ndim != 2:
            continue
        x = torch.randn(5, weight.shape[1], dtype=weight.dtype, generator=torch.Generator().manual_seed(checked))
        bias = getattr(module, "bias", None)
        want = torch.nn.functional.linear(x.float(), weight.float(), None if bias is None else bias.float())
        got = module.cpu_linear(x, weight, bias).float()
        assert torch.allclose(got, want, atol=0.05 * want.abs().max().item(), rtol=0.02), name
        checked += 1
    assert checked >= 4  # qkv, o, gate_up and down at least


def test_vllm_colocate_syncs_trained_weights_into_the_engine(tiny_model: Path, tmp_path: Path, test_rewards: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from trl.generation.vllm_generation import VLLMGeneration
    from vllm.model_executor.layers import utils as vllm_layer_utils

    from proofcheck.train.args import parse
    from proofcheck.train.run import build_trainer, shutdown_colocated_vllm

    # keep this test's process-wide changes local: vLLM's dispatch and TRL's sync (patched by vllm_cpu_fix),
    # TRL's env vars
    monkeypatch.setattr(vllm_layer_utils, "dispatch_cpu_unquantized_gemm",
                        vllm_layer_utils.dispatch_cpu_unquantized_gemm)
    monkeypatch.setattr(VLLMGeneration, "sync_weights", VLLMGeneration.sync_weights)
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                       ("MASTER_PORT", str(free_port())), ("VLLM_CPU_KVCACHE_SPACE", "1")):
        monkeypatch.setenv(key, value)
    script, training, model = parse(argv(tiny_model, tmp_path / "colocate", "--use_vllm", "true",
                                         "--vllm_mode", "colocate", "--vllm_max_model_length", "4096",
                                         "--eval_max_samples", "4", "--eval_passes", "4", "--eval_max_new_tokens",
                                         "1500", "--eval_at_start", "true", "--eval_constrain_format", "true"))
    trainer, _, eval_cb, timer = build_trainer(script, training, model)
    try:
        initial_engine = _vllm_view(trainer)
        initial_hf = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        trainer.train()
        assert trainer.state.global_step == 3
        trained = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        assert all(not torch.equal(initial_hf[n], trained[n]) for n in trained)
        # the syncs before steps 2 and 3 already replaced the engine's starting weights. vLLM-CPU runs
        # this float32 model in bfloat16, where the norms' tiny updates (1.0 -> 0.999) round back to 1.0
        during = _vllm_view(trainer)
        same = [n for n in during if torch.equal(initial_engine[n], during[n])]
        assert all(n.endswith("norm.weight") for n in same), same
        assert len(same) < len(during) / 2
        # after one more sync the engine serves exactly the trained weights
        trainer.vllm_generation.sync_weights()
        engine, expected = _vllm_view(trainer), _as_vllm(trained)
        assert engine.keys() <= expected.keys()
        for name, value in engine.items():
            want = expected[name].to(value.dtype)
            if name.endswith("embed_tokens.weight"):  # vLLM pads the vocabulary to a multiple of 64 rows
                assert not value[want.shape[0]:].any()
                value = value[: want.shape[0]]
            assert torch.equal(value, want), name
        # the engine computes with them: vLLM's packed kernels were packed again from the synced weights
        # (vllm_cpu_fix.repack_linear_layers); weights moved well past bf16 rounding, so a stale pack shows
        with torch.no_grad():
            for p in trainer.model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        trainer.vllm_generation.sync_weights()
        _assert_engine_computes_with_its_weights(trainer)
        logs = [h for h in trainer.state.log_history if "rewards/meta_verifier/mean" in h]
        assert len(logs) == 3 and all("sampling/importance_sampling_ratio/mean" in h for h in logs)
        # the held-out evaluation ran on the colocated engine before the first step and after the last;
        # constrained to the answer format, every pass of the random model is valid (known from the
        # constraint, not from the text), and its sampled verdicts hold accepts and rejects
        assert [e["step"] for e in eval_cb.history] == [0, 3]
        assert all(e["generation"] == "vllm-colocate" and e["n_passes"] == 16 for e in eval_cb.history)
        assert all(e["valid_rate"] == 1.0 for e in eval_cb.history)
        verdicts = {t["first_error_step"] == -1 for r in eval_cb.last_results for t in r["trials"]}
        assert verdicts == {True, False}
        split = timer.split()
        assert split["steps_timed"] == 2 and split["generation"] > 0 and split["train"] > 0
    finally:
        shutdown_colocated_vllm(trainer)


def test_learning_signal_tag_reward_rises(tiny_model: Path, tmp_path: Path, test_rewards: Path) -> None:
    """A shaped format reward (emit the protocol's tags) rises within 40 steps from random weights.

    FormatReward itself stays 0 for a random model (no complete answer is ever sampled), so it
    gives GRPO no signal; the tag share is its first rung. Fixed seed, plain generation; measured
    here: mean of the first 10 steps 0.017, of the last 10 steps 0.81.
    """
    from proofcheck.train.args import parse
    from proofcheck.train.run import train

    summary = train(*parse(argv(tiny_model, tmp_path / "learn", "--max_steps", "40", "--learning_rate", "3e-3",
                                "--per_device_train_batch_size", "8", "--num_generations", "8",
                                "--lr_scheduler_type", "constant", "--eval_max_samples", "0",
                                "--reward_funcs", "pc_test_rewards:TagShare", "--reward_weights", "1.0")))
    rewards = [r["reward"] for r in summary["rewards"]]
    assert len(rewards) == 40
    first, last = sum(rewards[:10]) / 10, sum(rewards[-10:]) / 10
    assert last > first + 0.25, (first, last, rewards)
