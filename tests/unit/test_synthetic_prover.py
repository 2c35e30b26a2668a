"""The demo's synthetic prover: ProverBench inputs from labelled chain proofs, valid at exactly the rate asked,
and the per-pass rates read back from scoring records."""

from __future__ import annotations

import json

import pytest

from proofcheck.bench.synthetic_prover import choose, per_pass_rate, rates_by_label, write_synthetic_prover
from proofcheck.data.loaders import load_records
from proofcheck.data.synth import disjoint_splits


@pytest.fixture(scope="module")
def dev() -> list[dict]:
    return disjoint_splits({"dev": 64}, seed=0)["dev"]


@pytest.mark.parametrize(("rate", "n", "n_valid"), [
    (0.6, 40, 24), (0.5, 32, 16), (0.0, 10, 0), (1.0, 10, 10), (0.25, 8, 2), (0.6, 1, 1), (0.33, 3, 1),
])
def test_the_prover_is_valid_at_the_rate_asked(tmp_path, dev, rate, n, n_valid):
    p = write_synthetic_prover(dev, tmp_path, rate, n, seed=3)
    assert (p.n, p.n_valid, p.true_rate) == (n, n_valid, n_valid / n)
    problems = load_records(p.problems, "problem")
    subs = load_records(p.submissions, "submission")
    assert len(problems) == len(subs) == n and len({s.problem_id for s in subs}) == n
    truth = json.loads((tmp_path / "truth.json").read_text())
    by_id = {t["problem_id"]: t for t in dev}
    assert sum(truth["labels"].values()) == n_valid
    for s in subs:   # each submission is its task's proof, labelled by its task
        assert s.steps == by_id[s.problem_id]["steps"] and truth["labels"][s.problem_id] == by_id[s.problem_id]["is_correct"]
    assert all(q.reference_solution is None for q in problems)   # the curriculum's solution would give it away


def test_the_choice_is_seeded(dev):
    assert choose(dev, 0.6, 20, seed=1) == choose(dev, 0.6, 20, seed=1) != choose(dev, 0.6, 20, seed=2)


@pytest.mark.parametrize(("rate", "n", "says"), [
    (1.0, 40, "need 40 valid and 0 flawed proofs; the tasks hold 32 and 32"),
    (0.0, 33, "need 0 valid and 33 flawed"),
    (1.5, 4, "between 0 and 1"),
    (0.5, 0, "at least one submission"),
])
def test_too_few_proofs_or_a_bad_rate_say_what_to_do(dev, rate, n, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        choose(dev, rate, n)


def _record(pid: str, outcomes: list[str]) -> dict:
    text = {"accept": "<assessment>ok</assessment>\n<errors></errors>\n<first_error_step>-1</first_error_step>",
            "reject": "<assessment>no</assessment>\n<errors>Step 0: wrong.</errors>\n<first_error_step>0</first_error_step>"}
    trials = [{"status": "cancelled"} if o == "cancelled" else
              {"status": "ok", "text": text[o], "finish_reason": "stop", "completion_tokens": 5} for o in outcomes]
    return {"problem_id": pid, "n_steps": 3, "verifier_trials": trials}


@pytest.mark.parametrize(("records", "rate"), [
    ([_record("a", ["accept"] * 4), _record("b", ["reject"] * 4)], 0.5),
    ([_record("a", ["accept", "accept", "reject", "cancelled"])], 2 / 3),   # a cancelled pass gave no answer
    ([_record("a", ["cancelled"])], None),
    ([], None),
])
def test_per_pass_rate_counts_answered_passes(records, rate):
    got = per_pass_rate(records)
    assert got == pytest.approx(rate) if rate is not None else got is None


def test_rates_by_label_split_valid_from_flawed():
    recs = [_record("v", ["accept", "accept", "accept", "reject"]), _record("f", ["accept", "reject", "reject", "reject"])]
    assert rates_by_label(recs, {"v": True, "f": False}) == {"per_pass_accept_valid": 0.75, "per_pass_accept_flawed": 0.25}
