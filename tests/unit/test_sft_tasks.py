"""The SFT warm-up's task file: read like every JSONL file, bad lines named by file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofcheck.data.loaders import DataError
from proofcheck.train.sft import load_tasks

TASK = {"problem": "Let x_0 = 1 ...", "steps": ["x_1 = 2"], "gold_verification": "<assessment>ok</assessment>"}


def test_reads_tasks_and_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(TASK) + "\n\n" + json.dumps({**TASK, "extra": 1}) + "\n", encoding="utf-8")
    assert load_tasks(path) == [TASK, {**TASK, "extra": 1}]


@pytest.mark.parametrize(("lines", "problems"), [
    (["{not json"], [":1: <line>: invalid JSON"]),
    ([json.dumps(TASK), "[1, 2]"], [":2: <record>: expected a JSON object, got list"]),
    (["", json.dumps({"problem": "p", "steps": []})], [":2: gold_verification: missing"]),
    ([json.dumps({"steps": []}), "7"], [":1: problem: missing", ":1: gold_verification: missing",
                                         ":2: <record>: expected a JSON object, got int"]),
])
def test_bad_lines_name_file_line_and_field(tmp_path: Path, lines: list[str], problems: list[str]) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_tasks(path)
    assert len(e.value.problems) == len(problems)
    for got, want in zip(e.value.problems, problems, strict=True):
        assert got.startswith(f"{path}{want}")


def test_a_file_without_tasks_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no tasks"):
        load_tasks(path)


def test_sft_cli_refuses_an_unknown_family_before_loading_anything(capsys) -> None:
    from proofcheck.train.sft import main

    assert main(["--model", "no-such-model", "--out", "unused", "--families", "linear,geometry"]) == 2
    assert "unknown proof family 'geometry'; choose from chain" in capsys.readouterr().err


def test_sft_cli_refuses_a_negative_focal_gamma_naming_the_flag_and_the_fix(capsys) -> None:
    from proofcheck.train.sft import main, warmup

    with pytest.raises(SystemExit) as stop:
        main(["--model", "no-such-model", "--out", "unused", "--focal-gamma", "-1"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--focal-gamma -1.0: must be >= 0" in err and "use 0 for the plain mean loss" in err
    with pytest.raises(ValueError, match="--focal-gamma -0.5: must be >= 0"):  # the function refuses it too
        warmup("no-such-model", "unused", focal_gamma=-0.5)


@pytest.mark.parametrize(("durations", "left", "step", "max_steps", "median", "expected"), [
    ([100.0], 1000.0, 1, 400, 100.0, 11),                  # a slow first step: 1 done + 10 more
    ([100.0, 30.0], 1000.0, 2, 400, 65.0, 17),             # 2 done + 15 more
    ([100.0, 30.0, 30.0, 30.0], 900.0, 4, 400, 30.0, 34),  # the slow first step no longer counts: 4 + 30
    ([30.0] * 8, 9000.0, 8, 40, 30.0, 40),                 # never past the most steps
    ([30.0] * 4, 0.0, 4, 40, 30.0, 4),                     # nothing left: stop where it is
    ([5.0] * 64 + [10.0] * 32, 1000.0, 96, 400, 10.0, 196),  # the recent pace, not the whole run's median (5 s)
])
def test_sft_replans_from_the_median_step(durations, left, step, max_steps, median, expected) -> None:
    from proofcheck.train.sft import _replan

    plan: dict = {}
    lines: list[str] = []
    assert _replan(plan, durations, left, step, max_steps, 5000.0, lines.append, 0) == expected
    assert plan["replans"] == [{"at_step": step, "median_step_s": median, "steps": expected}]
    assert f"-> {expected} of at most {max_steps} steps" in lines[0]
