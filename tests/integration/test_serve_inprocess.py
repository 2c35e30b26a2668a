"""`proofcheck serve --model <tiny> --lora ...` as a real subprocess (vLLM AsyncLLM in-process,
one engine start for this module): 8 passes and rule-consistent decisions, the sync and async
clients, the CLI, batch, LoRA vs base, metrics, and early reject saving tokens.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from proofcheck.app.cli import main
from proofcheck.data.synth import make_tasks
from proofcheck.process import ServiceProcess, free_port
from proofcheck.serve.client import AsyncVerifyClient, VerifyClient

TASKS = make_tasks(4, seed=3)


def _make_lora(model: Path, out: Path) -> Path:
    """A random-weight peft LoRA adapter (rank 8 on q/v) for the tiny model."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(model)
    peft_model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                                 init_lora_weights=False))
    peft_model.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def service(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("serve-inprocess")
    adapter = _make_lora(tiny_model, tmp / "adapter")
    port = free_port()
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "serve", "--model", str(tiny_model), "--served-model-name", "tiny",
           "--lora", f"tiny-lora={adapter}", "--port", str(port), "--max-tokens", "1024", "--log-level", "warning"]
    url = f"http://127.0.0.1:{port}"
    with ServiceProcess(cmd, url + "/health", tmp / "serve.log", env={"VLLM_CPU_KVCACHE_SPACE": "1"}):
        yield url  # ready within 300 s on enter; SIGTERM (then SIGKILL after 60 s) on exit


def test_health_lists_base_and_adapter(service: str) -> None:
    h = httpx.get(service + "/health").json()
    assert h["engine"] == "in-process" and h["models"] == ["tiny", "tiny-lora"] and h["model"] == "tiny-lora"


@pytest.mark.parametrize("rule", ["unanimous", "majority", "any"])
def test_eight_passes_of_the_random_model_are_invalid_rejects(service: str, rule: str) -> None:
    """Random weights never write the answer format (known from the model, not from the reply): all 8
    passes are invalid, and an invalid pass is never an accept, so every rule rejects."""
    t = TASKS[0]
    with VerifyClient(service) as c:
        d = c.verify(t["problem"], steps=t["steps"], rule=rule, all_passes=True, seed=1, max_tokens=64)
    assert d["rule"] == rule and d["decision"] == "reject"
    assert len(d["passes"]) == 8 and d["votes"] == {"accept": 0, "reject": 0, "invalid": 8, "cancelled": 0, "error": 0}
    assert d["usage"]["completion_tokens"] == sum(p["completion_tokens"] for p in d["passes"]) > 0
    assert d["usage"]["prompt_tokens"] > 0 and d["model"] == "tiny-lora"


# The three rules as the README defines them, written out by hand: accepts of n passes -> decision.
RULES_BY_HAND = {"unanimous": lambda acc, n: acc == n, "majority": lambda acc, n: 2 * acc > n,
                 "any": lambda acc, n: acc > 0}


@pytest.fixture(scope="module")
def mixed_verdicts(vllm_server, tmp_path_factory: pytest.TempPathFactory):
    """`proofcheck serve` constrained to verdicts -1 or 0 (structured outputs): every pass is a valid
    accept or reject, sampled at temperature 1, so the rules disagree on mixed passes."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "serve", "--endpoint", vllm_server.url, "--endpoint-model",
           "tiny", "--port", str(port), "--max-tokens", "1500", "--constrain-format=-1|0", "--log-level", "warning"]
    with ServiceProcess(cmd, url + "/health", tmp_path_factory.mktemp("mixed") / "serve.log"):
        yield url


def test_each_rule_decides_mixed_passes_as_defined(mixed_verdicts: str) -> None:
    mixed = 0
    for t, seed in [(TASKS[0], 1), (TASKS[1], 2), (TASKS[2], 3)]:
        votes = []
        with VerifyClient(mixed_verdicts) as c:
            for rule in RULES_BY_HAND:
                d = c.verify(t["problem"], steps=t["steps"], rule=rule, all_passes=True, seed=seed)
                v = d["votes"]
                assert d["rule"] == rule and len(d["passes"]) == 8
                assert v["invalid"] == v["cancelled"] == v["error"] == 0 and v["accept"] + v["reject"] == 8
                assert d["decision"] == ("accept" if RULES_BY_HAND[rule](v["accept"], 8) else "reject"), (rule, v)
                votes.append(v)
        assert votes[0] == votes[1] == votes[2]  # same seed, same passes: only the rule differs
        mixed += 0 < votes[0]["accept"] < 8
    assert mixed >= 1  # at least one proof where unanimous rejects and any accepts


def test_async_client_batch_and_models(service: str) -> None:
    async def run() -> tuple[list[dict], dict, dict]:
        async with AsyncVerifyClient(service) as c:
            items = [{"problem": t["problem"], "steps": t["steps"], "max_tokens": 32, "seed": 0} for t in TASKS[:2]]
            batch = await c.verify_batch(items)
            base, lora = await asyncio.gather(
                c.verify(TASKS[0]["problem"], steps=TASKS[0]["steps"], model="tiny", max_tokens=32, passes=2),
                c.verify(TASKS[0]["problem"], steps=TASKS[0]["steps"], model="tiny-lora", max_tokens=32, passes=2))
        return batch, base, lora
    batch, base, lora = asyncio.run(run())
    assert len(batch) == 2 and all(len(r["passes"]) == 8 for r in batch)
    assert (base["model"], lora["model"]) == ("tiny", "tiny-lora") and len(base["passes"]) == 2


def test_cli_verify_endpoint(service: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    t = TASKS[1]
    proof = tmp_path / "proof.txt"
    proof.write_text("\n\n".join(t["steps"]))
    args = ["verify", "--endpoint", service, "--problem", t["problem"], "--proof", f"@{proof}", "--max-tokens", "32"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "decision: reject (unanimous, 8 passes)" in out and "votes: accept 0" in out and "first error:" in out
    assert main([*args, "--json", "--all-passes", "--passes", "3"]) == 0
    import json

    d = json.loads(capsys.readouterr().out)
    assert len(d["passes"]) == 3 and d["votes"]["cancelled"] == 0


def test_early_reject_generates_fewer_tokens(service: str) -> None:
    """The random tiny model writes garbage: the first finished pass is invalid, so the decision is
    fixed and the rest are aborted. Same requests with all_passes=true generate more tokens."""
    t = TASKS[2]

    async def run() -> list[tuple[bool, dict]]:
        async with AsyncVerifyClient(service) as c:
            runs = [(seed, all_passes) for seed in (0, 1, 2) for all_passes in (True, False)]
            results = await asyncio.gather(*(c.verify(t["problem"], steps=t["steps"], model="tiny", seed=seed,
                                                      max_tokens=1024, all_passes=all_passes)
                                             for seed, all_passes in runs))
        return [(a, d) for (_, a), d in zip(runs, results, strict=True)]
    totals = {True: 0, False: 0}
    cancelled = 0
    for all_passes, d in asyncio.run(run()):
        assert d["decision"] == "reject" and len(d["passes"]) == 8
        totals[all_passes] += d["usage"]["completion_tokens"]
        if not all_passes:
            cancelled += d["votes"]["cancelled"]
    assert totals[False] < totals[True], totals
    assert cancelled > 0
    metrics = httpx.get(service + "/metrics").text
    assert 'proofcheck_passes_total{status="cancelled"}' in metrics


def test_cli_verify_in_process_model(tiny_model: Path) -> None:
    """`proofcheck verify --model PATH --json` in a fresh process (vLLM AsyncLLM in-process for one call; the
    module's second engine start): stdout is exactly the JSON result, vLLM's logs go to stderr."""
    import json

    t = TASKS[3]
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "verify", "--model", str(tiny_model), "--problem", t["problem"],
           "--proof", "\n\n".join(t["steps"]), "--passes", "2", "--max-tokens", "16", "--seed", "0", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    d = json.loads(proc.stdout)
    assert d["decision"] == "reject" and len(d["passes"]) == 2 and d["completion_tokens"] > 0
