"""benchmarks/leave_one_out.py: one `proofcheck demo --exclude-family F` per family, and the table from their
summaries (no model: the summaries are written here)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import leave_one_out as loo  # noqa: E402

from proofcheck.data.families import ALL  # noqa: E402


def _summary(left_out: str, bal: float, tnr: float, before: float = 0.4) -> dict:
    def fam(f: str, b: float, t: float) -> dict:
        return {"rough_bal_f1": b, "rough_tpr": 0.6, "rough_tnr": t, "n_proofs": 32}
    return {"before_grpo": {"by_family": {f: fam(f, before, 0.5) for f in ALL}},
            "after_grpo": {"by_family": {f: fam(f, bal, tnr) if f == left_out else fam(f, 0.8, 0.8) for f in ALL}},
            "total_s": 1230.0}


def test_dry_run_prints_one_demo_per_family(capsys) -> None:
    assert loo.main(["--dry-run", "--out", "runs/x", "--full", "--budget-min", "45", "--eval-tasks", "192"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(ALL)
    for fam, line in zip(ALL, lines, strict=True):
        assert f"demo --families all --exclude-family {fam} --workdir runs/x/{fam}" in line
        assert line.endswith("--full --budget-min 45 --eval-tasks 192")


@pytest.mark.parametrize(("bal", "tnr", "meets"), [(0.55, 0.6, True), (0.55, 0.45, False), (0.49, 0.9, False),
                                                   (0.50, 0.50, True)])
def test_a_row_meets_the_bar_only_with_both(bal: float, tnr: float, meets: bool) -> None:
    row = loo.loo_row("parity", _summary("parity", bal, tnr))
    assert row["meets_bar"] is meets
    assert row["bal_f1"] == bal and row["bal_f1_before"] == 0.4 and row["n"] == 32 and row["minutes"] == 20.5
    assert row["trained_mean_bal_f1"] == pytest.approx(0.8)


def test_the_table_reads_finished_runs_only(tmp_path, capsys) -> None:
    for fam, bal in (("chain", 0.6), ("linear", 0.3), ("parity", 0.7)):
        (tmp_path / fam).mkdir()
        (tmp_path / fam / "summary.json").write_text(json.dumps(_summary(fam, bal, 0.7)))
    (tmp_path / "ref.json").write_text(json.dumps(_summary("none", 0.0, 0.0)))
    out = tmp_path / "rows.json"
    assert loo.main(["--table-only", "--out", str(tmp_path), "--json", str(out), "--reference",
                     str(tmp_path / "ref.json")]) == 0
    text = capsys.readouterr().out
    assert "2 of 3 left-out families reach" in text and "(target: 4 of 6)" in text
    assert "Bal-F1 when trained on" in text and (tmp_path / "LOO.md").read_text().strip() == text.strip()
    rows = json.loads(out.read_text())
    assert [r["family"] for r in rows] == ["chain", "linear", "parity"]
    assert rows[1]["meets_bar"] is False and rows[0]["bal_f1_when_trained"] == 0.8


def test_nothing_finished_and_a_bad_family_are_errors(tmp_path, capsys) -> None:
    assert loo.main(["--table-only", "--out", str(tmp_path)]) == 1
    with pytest.raises(SystemExit):
        loo.main(["--dry-run", "--only", "algebra"])
    assert "unknown proof family 'algebra'" in capsys.readouterr().err


def test_every_command_parses_as_proofcheck_demo() -> None:
    from proofcheck.app.cli import build_parser

    for fam in ALL:
        cmd = loo.demo_command(fam, Path("runs/loo"), full=True, budget_min=45, seed=1, extra=["--eval-tasks", "192"])
        assert cmd[1:3] == ["-m", "proofcheck.app.cli"]
        args = build_parser().parse_args(cmd[3:])
        assert (args.exclude_family, args.families, args.full, args.budget_min, args.eval_tasks, args.score) == \
            (fam, "all", True, 45.0, 192, False)
