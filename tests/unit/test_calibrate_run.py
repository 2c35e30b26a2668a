"""`proofcheck calibrate` end to end over real HTTP, its verifier a ScriptedServer whose passes are
known in advance (half of every proof's 4 passes accept), so every number is worked out by hand:
the records, the table, the report files and the card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofcheck.app.cli import main
from proofcheck.data.synth import balanced_tasks
from proofcheck.parsing import format_verdict
from proofcheck.prompt_card import card_rule, read_calibration, read_prompt_card, write_prompt_card
from proofcheck.serve.scripted import Reply, ScriptedServer

OK = format_verdict("fine", [], -1)
BAD = format_verdict("step 0 is wrong", [(0, "wrong sum")], 0)


def responder(req: dict, i: int) -> Reply:
    return Reply([OK if j % 2 == 0 else BAD for j in range(req["n"])])  # accept, reject, accept, reject


@pytest.fixture(scope="module")
def engine():
    with ScriptedServer(responder) as srv:
        yield srv.url


def test_calibrate_writes_table_report_and_card(engine: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = tmp_path / "held.jsonl"
    data.write_text("".join(json.dumps(t) + "\n" for t in balanced_tasks(6, seed=3)))
    model = tmp_path / "model"
    model.mkdir()
    write_prompt_card(model, False, "abc", max_completion_length=256)
    out = tmp_path / "cal"
    argv = ["calibrate", "--endpoint", engine, "--endpoint-model", "scripted", "--data", str(data), "--max-k", "4",
            "--out", str(out), "--card", str(model), "--json"]
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    rows = {(r["k"], r["t"]): r for r in got["table"]}
    # every proof: 2 accepts of 4 passes, so P(accept) is the same for all, TPR = P and TNR = 1 - P
    for (k, t), p in {(1, 1): 1 / 2, (2, 2): 1 / 6, (2, 1): 5 / 6, (4, 2): 1.0, (4, 3): 0.0, (3, 2): 1 / 2}.items():
        assert rows[(k, t)]["tpr"] == pytest.approx(p) and rows[(k, t)]["tnr"] == pytest.approx(1 - p)
    # one pass: TNR .5; at least that TNR and the best Balanced F1 (.5) at the fewest tokens: one pass
    assert (got["choice"]["k"], got["choice"]["t"]) == (1, 1)
    rec = read_calibration(model)
    assert rec["measured_on"]["n_proofs"] == 6 and rec["measured_on"]["data"] == str(data)
    assert card_rule(read_prompt_card(model))[:2] == ("at_least:1", 1)
    assert read_prompt_card(model)["max_completion_length"] == 256  # the rest of the card kept
    for name in ("calibration.md", "calibration.png", "calibration.json", "records.jsonl"):
        assert (out / name).is_file(), name
    assert "## Every rule" in (out / "calibration.md").read_text()


def test_an_unmet_ceiling_leaves_the_card_alone(engine: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = tmp_path / "held.jsonl"
    data.write_text("".join(json.dumps(t) + "\n" for t in balanced_tasks(4, seed=4)))
    model = tmp_path / "model"
    model.mkdir()
    argv = ["calibrate", "--endpoint", engine, "--endpoint-model", "scripted", "--data", str(data), "--max-k", "2",
            "--out", str(tmp_path / "cal"), "--card", str(model), "--max-false-accept", "0.1"]
    # 1 accept of 2 passes: T = 2 never accepts (false accepts 0), so the ceiling .1 is met
    assert main(argv) == 0
    assert read_calibration(model)["rule"] == "at_least:2"
    argv[-1] = "0.0"
    argv[argv.index("--max-k") + 1] = "1"
    argv[argv.index("--out") + 1] = str(tmp_path / "cal1")
    assert main(argv) == 1  # one pass: the first, which always accepts: every flawed proof accepted
    assert "lowest false-accept rate is 1.000" in capsys.readouterr().err
    assert read_calibration(model)["rule"] == "at_least:2"  # unchanged
