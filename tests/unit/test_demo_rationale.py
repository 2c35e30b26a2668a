"""`proofcheck demo --rationale`: the SFT rows' gold verification in the chosen form, the longer token budget
that the recomputed form needs, and a workdir that holds the other form refused (app/demo.py, app/demo_config.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofcheck.app.demo import build_curriculum
from proofcheck.app.demo_config import RECOMPUTED_TOKENS, DemoConfig
from proofcheck.parsing import parse_verifier_output

SMALL = dict(families="all", sft_tasks=24, grpo_tasks=12, dev_tasks=12, eval_tasks=12)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize(("form", "tokens"), [("checks", 192), ("recomputed", RECOMPUTED_TOKENS)])
def test_the_form_sets_the_generation_budget(form: str, tokens: int) -> None:
    cfg = DemoConfig(rationale=form)
    assert cfg.max_tokens == tokens
    record = cfg.recipe_summary["deltas"]
    for key in ("max_completion_length", "eval_max_new_tokens"):
        assert (record[key]["value"] if key in record else None) == (tokens if form == "recomputed" else None)


def test_an_unknown_form_names_the_choices() -> None:
    with pytest.raises(ValueError, match="choose one of checks, recomputed"):
        DemoConfig(rationale="prose")


def test_sft_rows_in_the_recomputed_form_keep_their_labels(tmp_path: Path) -> None:
    data = build_curriculum(DemoConfig(workdir=tmp_path, rationale="recomputed", **SMALL))
    sft = _rows(data / "sft.jsonl")
    assert {t["family"] for t in sft} == {"chain", "prose", "linear", "expand", "parity", "inequality"}
    for t in sft:
        lines = [x for x in t["gold_verification"].split("Step ")[1:] if "recompute" in x]
        assert len(lines) == (len(t["steps"]) if t["first_error_step"] < 0 else t["first_error_step"] + 1), t
        parsed = parse_verifier_output(t["gold_verification"], len(t["steps"]), "stop")
        assert parsed.valid and parsed.verdict.first_error_step == t["first_error_step"]
    # only the warm-up imitates the form: GRPO and the held-out sets keep the tasks as drawn
    assert all("recompute" not in t["gold_verification"] for name in ("grpo", "dev", "eval")
               for t in _rows(data / f"{name}.jsonl"))
    assert json.loads((data / "card.json").read_text())["rationale"] == "recomputed"


def test_a_workdir_built_with_the_other_form_is_refused(tmp_path: Path) -> None:
    build_curriculum(DemoConfig(workdir=tmp_path, **SMALL))
    with pytest.raises(ValueError, match="'checks' rationale, not 'recomputed': choose another --workdir"):
        build_curriculum(DemoConfig(workdir=tmp_path, rationale="recomputed", **SMALL))
    assert "recompute" not in (tmp_path / "data" / "sft.jsonl").read_text()
