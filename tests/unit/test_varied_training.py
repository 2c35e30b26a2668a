"""The warm-up's varied proofs (data.heldout.VARIED_TRAINING, DemoConfig.sft_varied): numbers 3x, every family
a step longer, the harder held-out still beyond them; their labels are exact (the independent checkers, with a
wrong label caught, in test_harder_heldout.py, which draws these variants too)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from family_checkers import label_problems

from proofcheck.app.demo import build_curriculum
from proofcheck.app.demo_config import DemoConfig
from proofcheck.data.families import ALL, FAMILIES, make_family_task
from proofcheck.data.families._base import TRAINING, Variant, drawing
from proofcheck.data.heldout import HARDER, VARIED_TRAINING, leaks, varied_training
from proofcheck.parsing import parse_verifier_output


def _draws(v: Variant, family: str, seeds: range = range(30)) -> list[dict]:
    out = []
    for kind in FAMILIES[family].kinds:
        for s in seeds:
            with drawing(v):
                out.append(make_family_task(random.Random(s), family, kind, s))
    return out


def _mean_steps(v: Variant, family: str) -> float:
    draws = _draws(v, family)
    return sum(len(t["steps"]) for t in draws) / len(draws)


@pytest.mark.parametrize(("n", "families", "exclude", "want"), [
    (2160, "all", (), {"sft-larger": (1080, list(ALL)), "sft-longer": (1080, list(ALL))}),
    (90, ["linear", "prose"], (), {"sft-larger": (44, ["prose", "linear"]), "sft-longer": (44, ["prose", "linear"])}),
    (160, "all", ("chain", "prose"), {"sft-larger": (80, ["linear", "expand", "parity", "inequality"]),
                                      "sft-longer": (80, ["linear", "expand", "parity", "inequality"])}),
    (0, "all", (), {}),
])
def test_varied_sets_share_their_proofs_per_family(n, families, exclude, want) -> None:
    got = varied_training("sft", n, families, exclude)
    assert {k: (size, fams) for k, (size, _, fams) in got.items()} == want
    assert all(size % 2 == 0 for size, _, _ in got.values())   # valid/flawed pairs


def test_the_harder_slices_stay_beyond_the_varied_training() -> None:
    """Numbers: training's scale below every scaled slice's. Length: every family drawn longer is longer than its
    plain proofs and, by more than a step on average, shorter than the length slice's."""
    for v in VARIED_TRAINING.values():
        assert v.wordings == "train"
        assert all(v.scale < h.scale for h in HARDER.values() if h.scale > 1)
        assert all(v.longer < h.longer for h in HARDER.values() if h.longer)
        for family in ALL if v.longer else ():
            assert (_mean_steps(TRAINING, family) < _mean_steps(v, family)
                    < _mean_steps(HARDER["hard-length"], family) - 1), family


def _max_number(t: dict) -> int:
    return max(int(n) for n in re.findall(r"\d+", " ".join([t["problem"], *t["steps"]])))


def test_a_varied_warm_up_holds_larger_and_longer_proofs_with_exact_labels(tmp_path: Path) -> None:
    cfg = DemoConfig(workdir=tmp_path, families="all", rationale="recomputed", sft_varied=0.5, sft_tasks=96,
                     grpo_tasks=12, dev_tasks=12, eval_tasks=12)
    data = build_curriculum(cfg)
    sft = [json.loads(line) for line in (data / "sft.jsonl").read_text().splitlines()]
    card = json.loads((data / "card.json").read_text())
    by_variant = {v: [t for t in sft if t.get("variant") == v] for v in (None, "sft-larger", "sft-longer")}
    assert {k: len(v) for k, v in by_variant.items()} == {None: 48, "sft-larger": 24, "sft-longer": 24}
    assert card["sizes"]["sft"] == 96 and card["sft_varied"]["sft-larger"]["variant"]["scale"] == 3
    assert {t["family"] for t in by_variant["sft-longer"]} == set(ALL)
    plain, larger = (sorted(map(_max_number, by_variant[v])) for v in (None, "sft-larger"))
    assert larger[len(larger) // 2] > 2 * plain[len(plain) // 2]       # medians
    for t in sft:
        assert label_problems(t) == [], (t.get("variant"), t["problem"], t["steps"])
        parsed = parse_verifier_output(t["gold_verification"], len(t["steps"]), "stop")
        assert parsed.valid and parsed.verdict.first_error_step == t["first_error_step"]
    # nothing the held-out and GRPO sets hold, no held-out wording
    others = {n: [json.loads(x) for x in (data / f"{n}.jsonl").read_text().splitlines()] for n in ("eval", "dev", "grpo")}
    assert leaks(sft, others) == []


def test_the_held_out_set_is_the_same_with_or_without_varied_proofs(tmp_path: Path) -> None:
    sizes = dict(families="all", sft_tasks=48, grpo_tasks=12, dev_tasks=12, eval_tasks=24)
    evals = [(build_curriculum(DemoConfig(workdir=tmp_path / str(share), sft_varied=share, **sizes)) / "eval.jsonl")
             .read_text() for share in (0.0, 0.5)]
    assert evals[0] == evals[1]


@pytest.mark.parametrize(("kw", "message"), [
    (dict(sft_varied=1.0, families="all"), r"a share in \[0, 1\)"),
    (dict(sft_varied=-0.1, families="all"), r"a share in \[0, 1\)"),
    (dict(sft_varied=0.25), "families set"),
])
def test_a_bad_share_is_named(kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DemoConfig(**kw)
