"""The README's GPU walkthrough runs as written, on the tiny model (CPU).

The commands come from the README itself: the first `bash` block of its "Train your own verifier
on a GPU" section, with the CPU substitutions of the table right after it (also read from the
README), so the text cannot drift from what runs. Each command runs in a fresh folder (with the
shipped `data/` beside it) and must exit 0; a line ending in `&` is a service, started in the
background and stopped by its handle at the end. The optional supervised step's strong model is a scripted
teacher (`proofcheck.serve.scripted`) answering each proof's expert verdict, so the meta-verifier keeps some of
its verifications and the tiny model trains on them. Beyond the exit codes, what the model was trained
with must travel with it: the recipe's completion length is in the trained model's card and is
the served limit (`GET /health`), without a --max-tokens on the serve line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from doc_blocks import code_blocks, command_lines

from proofcheck.process import ServiceProcess, free_port

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Train your own verifier on a GPU"
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}

pytestmark = pytest.mark.slow


def readme_walkthrough() -> tuple[list[str], list[tuple[str, str]]]:
    """(the walkthrough's command lines, the CPU substitutions as (in the walkthrough, on a CPU) pairs)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(SECTION):]
    section = section[:section.index("\n## ", 3)]
    lang, body = code_blocks(section)[0]
    assert lang == "bash"
    after = section[section.index(body) + len(body):]
    rows = re.findall(r"(?m)^\| (.+?) \| (.+?) \|$", after[:after.index("\n\n", after.index("|"))])
    return command_lines(body), [(a.strip("`"), b.strip("`")) for a, b in rows[1:]]  # rows[0]: the header


def cpu_commands(lines: list[str], subs: list[tuple[str, str]], port: int | str) -> list[str]:
    """The walkthrough as the CPU machine runs it: the table applied, in its order (`port` for "a free port",
    `{teacher}` for the scripted teacher's URL)."""
    out = [cpu for gpu, cpu in subs if gpu == "(before step 1)"]
    skipped = [gpu.removesuffix(" ...") for gpu, cpu in subs if cpu.startswith("skipped")]
    for line in lines:
        if any(line.startswith(s) for s in skipped):
            continue
        for gpu, cpu in subs:
            if gpu.startswith(("(", "proofcheck")):
                continue
            line = line.replace(gpu, str(port) if cpu == "a free port" else
                                "{teacher}" if cpu.startswith("the scripted teacher") else cpu)
        out.append(line)
    return out


def test_the_table_covers_the_walkthrough() -> None:
    lines, subs = readme_walkthrough()
    assert [ln.split()[1] for ln in lines] == ["annotate", "data", "data", "serve", "data", "train", "train", "train",
                                               "serve", "score", "score"]
    commands = cpu_commands(lines, subs, 8123)
    assert commands[0] == "proofcheck model tiny --out runs/tiny-model"
    assert not any("qwen3" in c or "my-annotated" in c or " 8000" in c or "8001" in c for c in commands), commands
    assert all(c.startswith("proofcheck ") for c in commands) and sum("{teacher}" in c for c in commands) == 1


def teacher(records: Path):
    """A scripted strong model: each proof's expert verdict (accept, or the first fatal error with the reviewer's
    comment) in every pass."""
    from proofcheck.parsing import format_verdict
    from proofcheck.serve.scripted import Reply

    proofs = [json.loads(line) for line in records.open(encoding="utf-8")]

    def respond(req: dict, i: int) -> Reply:
        prompt = req["messages"][-1]["content"]
        p = next(p for p in proofs if all(step in prompt for step in p["steps"]))
        k = p["annotation"]["first_fatal_error_step"]
        text = format_verdict("Checked step by step.", [] if k < 0 else [(k, p["annotation"]["reviewer_comment"])], k)
        return Reply([text] * int(req.get("n") or 1))
    return respond


def test_the_walkthrough_runs_on_the_tiny_model(tmp_path: Path) -> None:
    lines, subs = readme_walkthrough()
    port = 0  # picked when the service starts: a port picked before minutes of training may be taken by then
    (tmp_path / "data").symlink_to(REPO / "data")
    services: list[ServiceProcess] = []
    from proofcheck.serve.scripted import ScriptedServer

    scripted = ScriptedServer(teacher(REPO / "data/samples/annotated.jsonl")).__enter__()
    try:
        for i, line in enumerate(cpu_commands(lines, subs, "{port}")):
            line = line.replace("{teacher}", scripted.url)
            if line.endswith("&") and not port:
                port = free_port()
            argv = line.rstrip("&").replace("{port}", str(port)).split()
            assert argv[0] == "proofcheck"
            cmd = [sys.executable, "-m", "proofcheck.app.cli", *argv[1:]]
            if line.endswith("&"):
                service = ServiceProcess(cmd, f"http://127.0.0.1:{port}/health", tmp_path / f"service-{i}.log",
                                         env=ENV, cwd=tmp_path)
                services.append(service)
                service.wait_ready(300)
                continue
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env={**os.environ, **ENV},
                                  timeout=900)
            assert proc.returncode == 0, f"`{line}` exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        recipe = yaml.safe_load((REPO / "configs/grpo/tiny-cpu.yaml").read_text(encoding="utf-8"))
        card = json.loads((tmp_path / "runs/grpo-tiny/merged/proofcheck_prompt.json").read_text(encoding="utf-8"))
        assert card["max_completion_length"] == recipe["max_completion_length"]
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()
        assert health["max_tokens"] == recipe["max_completion_length"]  # the card's, not the default 1024
    finally:
        for service in services:
            service.stop()
        scripted.__exit__(None, None, None)
    distilled = json.loads((tmp_path / "runs/distill/summary.json").read_text(encoding="utf-8"))
    sft = json.loads((tmp_path / "runs/sft-tiny/run_summary.json").read_text(encoding="utf-8"))
    assert distilled["complete"] and distilled["kept"] > 0 and sft["rows"] == distilled["kept"]
    prover = json.loads((tmp_path / "runs/prover/summary.json").read_text(encoding="utf-8"))
    verifier = json.loads((tmp_path / "runs/eval/summary.json").read_text(encoding="utf-8"))
    assert prover["complete"] and verifier["complete"]
    shipped = sum(1 for _ in open(REPO / "data/samples/submissions.jsonl", encoding="utf-8"))
    assert prover["splits"]["all"]["n_submissions"] == shipped
