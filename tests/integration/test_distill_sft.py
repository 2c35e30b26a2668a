"""The supervised stage end to end on the tiny model: `proofcheck data distill` against a real vLLM server (every
pass sampled, graded and accounted for), then `proofcheck train` on an SFT recipe (TRL's SFTTrainer with the
answer-only head, `train/supervised.py`) on distilled rows, which changes the weights and writes the card."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from proofcheck.app.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_distill_from_a_real_vllm_server_accounts_for_every_pass(vllm_server, tmp_path: Path, capsys) -> None:
    data = tmp_path / "four.jsonl"
    data.write_text("".join((REPO / "data/samples/annotated.jsonl").read_text(encoding="utf-8").splitlines(True)[:4]),
                    encoding="utf-8")
    rc = main(["data", "distill", "--data", str(data), "--endpoint", vllm_server.url, "--endpoint-model", "tiny",
               "--passes", "2", "--max-tokens", "24", "--seed", "0", "--out", str(tmp_path / "run"), "--json"])
    s = json.loads(capsys.readouterr().out)
    assert rc == 0 and s["complete"] and s["proofs"] == 4 and s["passes"] == 8
    # the random model's passes: each is invalid or has a level; only EXACT ones are rows
    assert s["invalid"] + sum(s["levels"].values()) + s["grader_failures"] == 8
    assert s["sft_rows"] == s["kept"] == s["levels"].get("EXACT_MATCH", 0)
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").open(encoding="utf-8")]
    assert len(records) == 4 and all(len(r["verifier_passes"]) == 2 for r in records)


def test_the_sft_recipe_trains_on_distilled_rows(tiny_model: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    rows = [{"prompt": [{"role": "user", "content": f"Check proof {i}."}],
             "completion": [{"role": "assistant", "content": "<assessment>ok</assessment>\n<errors></errors>\n"
                                                              "<first_error_step>-1</first_error_step>"}],
             "provenance": {"source": "distill", "model": "teacher", "level": "EXACT_MATCH", "pass": 0}}
            for i in range(8)]
    (tmp_path / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "train", "--config", "tiny-sft-cpu", "--model_name_or_path",
           str(tiny_model), "--sft_files", str(tmp_path / "sft.jsonl"), "--synthetic_count", "0",
           "--output_dir", str(tmp_path / "sft")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "sft" / "run_summary.json").read_text())
    assert summary["rows"] == 8 and summary["global_step"] == 2 and summary["loss_path"] == "answer-only"
    before, after = load_file(tiny_model / "model.safetensors"), load_file(tmp_path / "sft/merged/model.safetensors")
    assert any(not (before[k] == after[k]).all() for k in before)
    card = json.loads((tmp_path / "sft/merged/proofcheck_prompt.json").read_text())
    assert card["written_by"] == "proofcheck train/supervised.py"
