"""`proofcheck serve --rule card` in front of the shared real vLLM server (`vllm_server`, no extra
engine start): the service answers with the rule calibrated in the model's card (`--card DIR`, its k),
/health says so, and `score prover` against it reports the pessimistic score and the card's beside it.
Passes are constrained to verdict -1 or 0 (structured outputs), so accepts and rejects both occur
and every expectation is counted by hand from the votes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

from proofcheck.app.cli import main
from proofcheck.data.synth import balanced_tasks
from proofcheck.process import ServiceProcess, free_port
from proofcheck.prompt_card import write_calibration

TASKS = balanced_tasks(4, seed=21)
CARD_T, CARD_K = 2, 3


@pytest.fixture(scope="module")
def card_front(vllm_server, tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("card")
    write_calibration(folder, {"rule": f"at_least:{CARD_T}", "passes": CARD_K, "named_rule": "majority",
                               "reason": "test card", "choice": {"bal_f1": 0.9, "bal_f1_se": 0.1},
                               "unanimous": {"k": 8, "bal_f1": 0.5}, "measured_on": {"data": "d", "n_proofs": 4}})
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "proofcheck.app.cli", "serve", "--endpoint", vllm_server.url, "--endpoint-model",
           "tiny", "--card", str(folder), "--rule", "card", "--port", str(port), "--max-tokens", "1500",
           "--constrain-format=-1|0", "--log-level", "warning"]
    with ServiceProcess(cmd, url + "/health", tmp_path_factory.mktemp("card-log") / "serve.log"):
        yield url


def test_serve_rule_card_answers_with_the_cards_rule(card_front: str) -> None:
    h = httpx.get(card_front + "/health").json()
    assert (h["rule"], h["passes"], h["rule_source"]) == (f"at_least:{CARD_T}", CARD_K, "card")
    assert "test card" in h["rule_reason"] and h["card_rule"]["passes"] == CARD_K
    decisions = set()
    for seed, t in enumerate(TASKS):
        d = httpx.post(card_front + "/v1/verify", json={"problem": t["problem"], "steps": t["steps"], "seed": seed,
                                                        "all_passes": True}, timeout=300).json()
        v = d["votes"]
        assert d["rule"] == f"at_least:{CARD_T}" and len(d["passes"]) == CARD_K and v["invalid"] == 0
        assert d["decision"] == ("accept" if v["accept"] >= CARD_T else "reject"), v
        decisions.add(d["decision"])
    assert decisions  # both occur on most seeds; each one is checked against the count either way


def test_score_prover_shows_both_scores(card_front: str, tmp_path: Path) -> None:
    problems, subs = tmp_path / "problems.jsonl", tmp_path / "subs.jsonl"
    problems.write_text("".join(json.dumps({"problem_id": f"p{i}", "problem": t["problem"], "reference_solution": "",
                                            "reference_answer": "", "domain": "ugd", "subject": "algebra",
                                            "source_id": "s"}) + "\n" for i, t in enumerate(TASKS)))
    subs.write_text("".join(json.dumps({"problem_id": f"p{i}", "sample": 0, "steps": t["steps"]}) + "\n"
                            for i, t in enumerate(TASKS)))
    out = tmp_path / "run"
    assert main(["score", "prover", "--problems", str(problems), "--submissions", str(subs), "--endpoint", card_front,
                 "--passes", "4", "--seed", "1", "--out", str(out), "--json"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert summary["calibrated_rule"] == f"at_least:{CARD_T} of {CARD_K} passes"
    pess, cal = [], []
    for r in records:  # by hand: unanimity over the first 4 passes, at least 2 accepts among the first 3
        verdicts = [(t.get("parsed") or {}).get("verdict") for t in r["verifier_trials"]]
        assert len(verdicts) == 4 and None not in verdicts  # max(4, 3) passes, all run
        pess.append(float(all(v == "accept" for v in verdicts)))
        cal.append(float(sum(v == "accept" for v in verdicts[:CARD_K]) >= CARD_T))
    assert summary["pessimistic"] == pytest.approx(sum(pess) / len(pess))
    assert summary["calibrated_score"] == pytest.approx(sum(cal) / len(cal))
    assert "calibrated_score" in (out / "report.md").read_text()
