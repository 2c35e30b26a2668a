"""benchmarks/harder_heldout.py: the calibrate command it runs, and its table from records written here (a
verifier that answers with the gold verification scores 1.0 on every slice, one that accepts everything has
TNR 0), no model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import harder_heldout as hh  # noqa: E402

from proofcheck.data.heldout import HARDER, harder_splits  # noqa: E402

ACCEPT = "<assessment>ok</assessment>\n<errors></errors>\n<first_error_step>-1</first_error_step>"


def _records(tasks: list[dict], answer) -> list[dict]:
    return [{"proof_id": t["proof_id"], "is_correct": t["is_correct"], "n_steps": len(t["steps"]),
             "verifier_trials": [{"status": "done", "text": answer(t), "finish_reason": "stop", "completion_tokens": 9}
                                 for _ in range(4)]} for t in tasks]


@pytest.fixture(scope="module")
def tasks() -> list[dict]:
    return [t for ts in harder_splits(12, seed=2).values() for t in ts]


def test_gold_answers_score_one_and_accepting_everything_scores_no_tnr(tasks) -> None:
    fams = {t["proof_id"]: t["family"] for t in tasks}
    gold = hh.model_rows(_records(tasks, lambda t: t["gold_verification"]), fams, 4, by_family=True)
    assert list(gold)[0] == hh.ALL_SLICES and gold[hh.ALL_SLICES]["n"] == len(tasks)
    assert {name for name in gold if "/" not in name} == {hh.ALL_SLICES, *HARDER}
    assert all(r["bal_f1"] == 1.0 and r["unanimous_bal_f1"] == 1.0 for r in gold.values())
    assert any(name.endswith(" / parity") for name in gold)
    yes = hh.model_rows(_records(tasks, lambda t: ACCEPT), fams, 4, by_family=False)
    assert all(r["tnr"] == 0.0 and r["tpr"] == 1.0 for r in yes.values())


def test_the_table_reads_each_finished_run(tmp_path, tasks, capsys) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "harder.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    for name, answer in (("grpo", lambda t: t["gold_verification"]), ("sft", lambda t: ACCEPT)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _records(tasks, answer)))
    assert hh.main(["--out", str(tmp_path), "--table-only", "--json", str(tmp_path / "rows.json")]) == 0
    text = capsys.readouterr().out
    assert "| grpo | all slices | 48 | 1.000" in text and "| sft | hard-size | 12 |" in text
    assert set(json.loads((tmp_path / "rows.json").read_text())) == {"grpo", "sft"}


def test_passes_longer_than_a_cut_are_invalid_never_accepts(tmp_path, tasks, capsys) -> None:
    """`--cut-at`: the gold answers, written in 9 tokens except the length slice's in 500, keep 1.0 where they
    fit; at a cut of 400 every long pass is invalid, never an accept: no valid long proof is accepted (a flawed
    one is still not accepted, as the pessimistic rule reads an invalid pass)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "harder.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    records = _records(tasks, lambda t: t["gold_verification"])
    for r in records:
        for trial in r["verifier_trials"]:
            trial["completion_tokens"] = 500 if hh.slice_of(r["proof_id"]) == "hard-length" else 9
    (tmp_path / "grpo").mkdir()
    (tmp_path / "grpo" / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert hh.main(["--out", str(tmp_path), "--table-only", "--cut-at", "400", "--json", str(tmp_path / "r.json")]) == 0
    rows = json.loads((tmp_path / "r.json").read_text())
    assert rows["grpo"]["hard-length"]["bal_f1"] == 1.0 and rows["grpo, cut at 400"]["hard-size"]["bal_f1"] == 1.0
    cut = rows["grpo, cut at 400"]["hard-length"]
    assert cut["tpr"] == 0.0 and cut["tnr"] == 1.0 and cut["bal_f1"] == 0.0   # every pass invalid: nothing accepted
    assert hh.cut_at(records, 500) == records          # a pass of exactly the limit is not cut


def test_the_command_is_proofcheck_calibrate_measuring_only() -> None:
    from proofcheck.app.cli import build_parser

    cmd = hh.calibrate_command("runs/m", Path("runs/h/data/harder.jsonl"), Path("runs/h/grpo"), 4, 0)
    args = build_parser().parse_args(cmd[3:])
    assert (args.model, args.max_k, args.no_card, args.resume, args.out) == ("runs/m", 4, True, True, "runs/h/grpo")
    assert args.max_tokens is None   # the model's own limit
    longer = hh.calibrate_command("runs/m", Path("runs/h/data/harder.jsonl"), Path("runs/h/grpo"), 4, 0, 640)
    assert build_parser().parse_args(longer[3:]).max_tokens == 640


def test_avoided_sets_are_read_and_a_missing_folder_is_named(tmp_path) -> None:
    (tmp_path / "eval.jsonl").write_text(json.dumps({"problem": "p", "steps": []}) + "\n")
    assert hh.avoided_tasks(tmp_path) == [{"problem": "p", "steps": []}] and hh.avoided_tasks(None) == []
    with pytest.raises(FileNotFoundError, match="no task sets"):
        hh.avoided_tasks(tmp_path / "nothing")


def test_calibrate_reads_the_slices_and_the_table_reads_its_records(tmp_path, capsys) -> None:
    """The whole path but the model: `proofcheck calibrate` over real HTTP on the slices (a scripted server that
    answers each proof with its gold verification), then this table from calibrate's own records."""
    from proofcheck.app.cli import main
    from proofcheck.serve.scripted import Reply, ScriptedServer

    sets = harder_splits(4, seed=6)
    tasks = [t for ts in sets.values() for t in ts]
    data = tmp_path / "data"
    data.mkdir()
    (data / "harder.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))

    def gold(req: dict, i: int) -> Reply:
        prompt = json.dumps(req["messages"], ensure_ascii=False)
        task = next(t for t in tasks if json.dumps(t["problem"], ensure_ascii=False)[1:-1] in prompt)  # unique
        return Reply([task["gold_verification"]] * req.get("n", 1))

    with ScriptedServer(gold) as srv:
        assert main(["calibrate", "--endpoint", srv.url, "--endpoint-model", "scripted", "--data",
                     str(data / "harder.jsonl"), "--max-k", "2", "--no-card", "--out", str(tmp_path / "gold")]) == 0
    capsys.readouterr()
    assert hh.main(["--out", str(tmp_path), "--table-only", "--passes", "2"]) == 0
    table = capsys.readouterr().out
    for name in (hh.ALL_SLICES, *HARDER):
        assert f"| gold | {name} | {16 if name == hh.ALL_SLICES else 4} | 1.000" in table, table


def test_a_pass_may_write_the_longest_gold_verification(tmp_path, tasks, tiny_model) -> None:
    from transformers import AutoTokenizer

    from proofcheck.data.rationale import RATIONALE_FORMS, gold_rationale
    from proofcheck.prompt_card import write_prompt_card

    tok = AutoTokenizer.from_pretrained(tiny_model)
    tok.save_pretrained(tmp_path)
    longest = max(len(tok(gold_rationale(t, f), add_special_tokens=False)["input_ids"])
                  for t in tasks for f in RATIONALE_FORMS)
    tokens, why = hh.pass_tokens(str(tmp_path), tasks, None)
    assert longest * 1.15 <= tokens < longest * 1.15 + 32 and tokens % 32 == 0 and f"{longest} tokens" in why
    write_prompt_card(tmp_path, False, max_completion_length=tokens + 100)  # trained longer: the trained length
    assert hh.pass_tokens(str(tmp_path), tasks, None)[0] == tokens + 100
    assert hh.pass_tokens(str(tmp_path), tasks, 64) == (64, "--max-tokens")
