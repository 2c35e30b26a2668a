"""Held-out metrics with standard errors, the GRPO step split, and the demo's before/after verdict."""

from __future__ import annotations

import math

import pytest

from proofcheck.app.demo import DemoConfig, before_after, learning_verdict
from proofcheck.metrics import eval_metrics
from proofcheck.train.step_timer import StepTimer


def _proof(pid: str, correct: bool, fes: int, trials: list[tuple[bool, int | None]]) -> dict:
    return {"proof_id": pid, "is_correct": correct, "first_error_step": fes, "domain": "ugd",
            "trials": [{"valid": v, "first_error_step": s, "score": 1.0 if v else 0.0, "invalid_reason": None}
                       for v, s in trials]}


# two valid proofs (rough 1.0 and 0.5) and two flawed ones (rough 1.0 and 0.0), 2 passes each
RESULTS = [
    _proof("a", True, -1, [(True, -1), (True, -1)]),
    _proof("b", True, -1, [(True, -1), (True, 2)]),
    _proof("c", False, 1, [(True, 1), (True, 0)]),
    _proof("d", False, 0, [(False, None), (True, -1)]),
]


@pytest.mark.parametrize(("key", "value", "se"), [
    ("rough_tpr", 0.75, 0.25),                       # per-proof 1.0, 0.5: sd 0.354 / sqrt 2
    ("rough_tnr", 0.5, 0.5),                         # per-proof 1.0, 0.0
    ("discrimination", 0.25, math.hypot(0.25, 0.5)),  # TPR + TNR - 1; the two classes' errors combined
    ("valid_rate", 7 / 8, math.sqrt(1 / 16 / 4)),    # per-proof 1, 1, 1, .5: sd .25 / sqrt 4
    ("first_error_step_accuracy", 0.5, math.sqrt((0.5**2 + 0.5**2) / 3 / 4)),  # per-proof 1, .5, .5, 0
])
def test_metrics_and_their_standard_errors(key: str, value: float, se: float) -> None:
    m = eval_metrics(RESULTS)
    assert m[key] == pytest.approx(value)
    assert m[f"{key}_se"] == pytest.approx(se)


def test_a_proof_without_passes_counts_zero_in_metric_and_error_alike() -> None:
    """eval_metrics and verifier_metrics treat a proof with no passes the same (it counts 0), and each
    standard error is over the per-proof values whose mean is the metric."""
    m = eval_metrics([*RESULTS, _proof("e", True, -1, [])])
    per_proof_valid = [1, 1, 1, 0.5, 0]  # by hand
    mean = sum(per_proof_valid) / 5
    sd = math.sqrt(sum((v - mean) ** 2 for v in per_proof_valid) / 4)
    assert m["valid_rate"] == pytest.approx(mean) and m["valid_rate_se"] == pytest.approx(sd / math.sqrt(5))
    assert m["rough_tpr"] == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert m["rough_tpr_se"] == pytest.approx(0.5 / math.sqrt(3))  # sd of 1, .5, 0 is .5


def test_balanced_f1_has_a_bootstrap_standard_error() -> None:
    m = eval_metrics(RESULTS)
    assert m["rough_bal_f1"] == pytest.approx(2 * 0.75 * 0.5 / 1.25)
    assert 0.05 < m["rough_bal_f1_se"] < 0.5
    assert eval_metrics(RESULTS)["rough_bal_f1_se"] == m["rough_bal_f1_se"]  # seeded: reproducible
    one_class = eval_metrics(RESULTS[:2])
    assert one_class["rough_bal_f1"] is None and one_class["rough_bal_f1_se"] is None


class _Clock:
    """A scripted `time.perf_counter`: it moves only when the fake trainer says a part took time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _FakeTrainer:
    """Just the three methods StepTimer times (their real versions live in TRL's GRPOTrainer); each
    advances the scripted clock by the seconds the test gives it."""

    def __init__(self, clock: _Clock) -> None:
        self.vllm_generation = self
        self.clock = clock
        self.cost = {"generation": 0.0, "weight_sync": 0.0, "reward": 0.0}

    def _generate_single_turn(self) -> str:
        self.clock.now += self.cost["generation"]
        self.sync_weights()  # as TRL does: the sync runs inside generation
        return "gen"

    def sync_weights(self) -> None:
        self.clock.now += self.cost["weight_sync"]

    def _calculate_rewards(self) -> str:
        self.clock.now += self.cost["reward"]
        return "rewards"


# Seconds each step spends in (generation without sync, weight sync, reward, the rest = train).
# The first step is the warm-up StepTimer leaves out; the medians of the other three, by hand:
# generation 2.0, weight_sync 0.5, reward 1.0, train 4.0 (of 4, 5, 3), total 7.5 (of 7.5, 8.5, 6.5).
STEPS = [(50.0, 9.0, 20.0, 30.0), (2.0, 0.5, 1.0, 4.0), (2.0, 0.5, 1.0, 5.0), (2.0, 0.5, 1.0, 3.0)]


def test_step_timer_splits_the_step_and_keeps_results(monkeypatch: pytest.MonkeyPatch) -> None:
    from proofcheck.train import step_timer

    clock = _Clock()
    monkeypatch.setattr(step_timer.time, "perf_counter", clock)
    trainer = _FakeTrainer(clock)
    timer = StepTimer(trainer)
    for gen, sync, reward, train in STEPS:
        trainer.cost = {"generation": gen, "weight_sync": sync, "reward": reward}
        timer.on_step_begin(None, None, None)
        assert trainer._generate_single_turn() == "gen" and trainer._calculate_rewards() == "rewards"
        clock.now += train  # log-probs, loss, backward, optimizer
        timer.on_step_end(None, None, None)
    split = timer.split()
    assert split["steps_timed"] == 3  # the first (warm-up) step is left out
    assert {p: split[p] for p in ("total", "generation", "weight_sync", "reward", "train")} == \
        {"total": 7.5, "generation": 2.0, "weight_sync": 0.5, "reward": 1.0, "train": 4.0}
    assert split["train_share"] == pytest.approx(4.0 / 7.5, abs=1e-3)


def _entry(step: int, f1: float, tnr: float, valid: float, gain_se: float | None = None) -> dict:
    """An eval_history entry; `gain_se`: the paired difference's SE of a later evaluation (`paired_gain`)."""
    paired = None if gain_se is None else {"n_proofs": 64, "rough_bal_f1_gain_se": gain_se, "rough_tnr_gain": 0.0,
                                           "rough_tnr_gain_se": 0.02, "rough_bal_f1_gain": None}
    return {"step": step, "rough_bal_f1": f1, "rough_tnr": tnr, "valid_rate": valid, "rough_tpr": 0.9,
            "reward_mean": 0.5, "first_error_step_accuracy": 0.4, "n_proofs": 64, "rough_bal_f1_se": 0.03,
            **({"paired_gain": paired} if paired else {})}


def _families(f1: float, tnr: float, weak: tuple[str, float, float] | None = None) -> dict[str, dict]:
    fams = {f: {"rough_bal_f1": f1, "rough_tnr": tnr, "n_proofs": 32} for f in ("chain", "parity", "prose")}
    if weak:
        fams[weak[0]] = {"rough_bal_f1": weak[1], "rough_tnr": weak[2], "n_proofs": 32}
    return fams


@pytest.mark.parametrize(("families", "met", "says"), [
    # issue 49's six-family target: >= 0.85 overall, >= 0.70 and TNR >= 0.70 in every family, gain > 2 SE
    (_families(0.86, 0.8), True, "Balanced F1 >= 0.7 in every family; TNR >= 0.7 in every family"),
    (_families(0.86, 0.8, ("parity", 0.69, 0.8)), False, "Balanced F1 >= 0.7 in every family (below: parity 0.69)"),
    (_families(0.86, 0.8, ("prose", 0.9, 0.65)), False, "TNR >= 0.7 in every family (below: prose 0.65)"),
    ({}, False, "Balanced F1 >= 0.7 in every family (no family table)"),
])
def test_six_family_verdict_names_each_family_below_its_floor(families, met, says) -> None:
    from proofcheck.app.demo_report import SIX_FAMILY_TARGET

    before = {"rough_bal_f1": 0.80, "rough_tnr": 0.75, "valid_rate": 0.99}
    after = {"rough_bal_f1": 0.86, "rough_tnr": 0.78, "valid_rate": 0.99, "by_family": families,
             "paired_gain": {"rough_bal_f1_gain_se": 0.02}}
    text = learning_verdict(before, after, SIX_FAMILY_TARGET)
    assert text.startswith("Target met") == met and says in text
    assert "GRPO gain" not in text and "gain / SE of the paired difference 3.0 (target > 2)" in text
    low = learning_verdict(before, {**after, "rough_bal_f1": 0.84}, SIX_FAMILY_TARGET)
    assert low.startswith("Target NOT met") and "Balanced F1 after GRPO 0.840 (target >= 0.85)" in low


@pytest.mark.parametrize(("target", "before", "after", "met", "says"), [
    # the demo (issue 32): gain >= 0.05, TNR and valid rate not lower than before GRPO
    ("demo", (0.80, 0.88, 0.9), (0.86, 0.88, 0.9), True, "Target met"),
    ("demo", (0.80, 0.88, 0.9), (0.84, 0.95, 0.9), False, "GRPO gain +0.040"),
    ("demo", (0.80, 0.88, 0.9), (0.90, 0.80, 0.9), False, "TNR 0.880 -> 0.800 (target: not lower)"),
    ("demo", (0.40, 0.40, 0.9), (0.62, 0.55, 0.8), False, "valid rate 0.900 -> 0.800"),
    # the long recipe: gain >= 0.10 and > 2 SE of the paired difference, Bal-F1 >= 0.7, TNR not lower, valid >= 0.95
    ("full", (0.5, 0.4, 0.8), (0.75, 0.7, 0.96, 0.05), True, "gain / SE of the paired difference 5.0 (target > 2)"),
    ("full", (0.5, 0.4, 0.8), (0.75, 0.7, 0.96, 0.15), False, "gain / SE of the paired difference 1.7 (target > 2)"),
    ("full", (0.5, 0.4, 0.8), (0.75, 0.7, 0.96), False, "gain / SE of the paired difference - (target > 2)"),
    ("full", (0.55, 0.4, 0.9), (0.68, 0.7, 0.96, 0.03), False, "Balanced F1 after GRPO 0.680 (target >= 0.7)"),
    ("full", (0.6, 0.6, 0.9), (0.75, 0.5, 0.96, 0.03), False, "TNR 0.600 -> 0.500 (target: not lower)"),
    ("full", (0.6, 0.4, 0.99), (0.82, 0.7, 0.94, 0.03), False, "valid rate 0.940 (target >= 0.95)"),
])
def test_verdict_reads_the_numbers_against_the_target(target, before, after, met, says) -> None:
    from proofcheck.app.demo_report import DEMO_TARGET, FULL_TARGET

    evals = before_after({"eval_history": [_entry(0, *before), _entry(16, *after)]}, DemoConfig())
    assert evals["before_grpo"]["n_tasks"] == 64 and evals["after_grpo"]["step"] == 16
    assert evals["before_grpo"]["passes"] == 4 and evals["before_grpo"]["rough_bal_f1_se"] == 0.03
    text = learning_verdict(evals["before_grpo"], evals["after_grpo"], FULL_TARGET if target == "full" else DEMO_TARGET)
    assert text.startswith("Target met") == met and says in text


def test_before_after_needs_the_step_0_evaluation() -> None:
    with pytest.raises(RuntimeError, match="eval_at_start"):
        before_after({"eval_history": [_entry(16, 0.8, 0.7, 0.9)]}, DemoConfig())


def test_curve_table_and_plot_read_the_run_summary(tmp_path) -> None:
    """The curve printed and drawn from run_summary.json's `curve` (no curve: neither)."""
    from proofcheck.app.demo_report import curve_plot, curve_table

    curve = [{**_entry(s, f1, tnr, 0.9), "n_passes": 128, "n_proofs": 32, "rough_tnr_se": 0.05}
             for s, f1, tnr in ((0, 0.3, 0.2), (4, 0.5, 0.4), (8, 0.6, 0.5))]
    summary = {"curve": curve, "rewards": [{"step": s, "reward": 0.1 * s} for s in range(1, 9)]}
    line = curve_table(summary)
    assert line == "curve: Balanced F1 0.30 at step 0 -> 0.60 at step 8 (still rising); TPR 0.90, TNR 0.50"
    assert curve_plot(summary, tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    summary["curve"] = [curve[0], {**curve[1], "rough_bal_f1": 0.7}, curve[2]]
    assert "(best at step 4 (0.70))" in curve_table(summary)
    assert curve_table({"curve": []}) is None and curve_plot({}, tmp_path / "none.png") is None


# the k-pass decision of the service (accept only if every pass accepts), by hand from RESULTS:
# a: accept, accept -> accept (right); b: accept, reject -> reject (wrong); c: rejects -> reject (right);
# d: invalid, accept -> reject (right). TPR 1/2, TNR 2/2.
@pytest.mark.parametrize(("key", "value"), [("kpass_tpr", 0.5), ("kpass_tnr", 1.0),
                                            ("kpass_bal_f1", 2 * 0.5 * 1.0 / 1.5)])
def test_the_k_pass_decision_beside_the_per_pass_numbers(key: str, value: float) -> None:
    assert eval_metrics(RESULTS)[key] == pytest.approx(value)


def test_the_k_pass_curve_takes_the_first_k_passes() -> None:
    # k = 1: a accept (right), b accept (right), c reject (right), d invalid -> reject (right)
    curve = eval_metrics(RESULTS)["kpass_curve"]
    assert [c["k"] for c in curve] == [1, 2]
    assert (curve[0]["kpass_tpr"], curve[0]["kpass_tnr"]) == (1.0, 1.0)
    assert (curve[1]["kpass_tpr"], curve[1]["kpass_tnr"]) == (0.5, 1.0)


def test_step_diagnostics_keep_trl_and_checking_keys_only() -> None:
    from proofcheck.train.callbacks import step_diagnostics

    logs = {"loss": 0.1, "reward": 0.5, "frac_reward_zero_std": 0.25, "completions/mean_length": 80.0,
            "completions/clipped_ratio": 0.0, "checking/accept_rate_valid": 0.75, "checking/level/invalid": 0.1,
            "rewards/format/mean": 1.0, "epoch": 0.1}
    assert step_diagnostics(logs) == {"reward": 0.5, "frac_reward_zero_std": 0.25, "completions/mean_length": 80.0,
                                      "completions/clipped_ratio": 0.0, "checking/accept_rate_valid": 0.75,
                                      "checking/level/invalid": 0.1}


def test_diagnostics_table_and_plot(tmp_path, capsys) -> None:
    from proofcheck.app.demo_report import console, diagnostics_plot, diagnostics_table

    rows = [{"step": s, "reward": 0.3 + 0.01 * s, "checking/accept_rate_valid": 0.9, "checking/accept_rate_flawed": 0.4,
             "checking/discrimination": -0.25,
             "checking/level/EXACT_MATCH": 0.5, "checking/level/POOR_MATCH": 0.2, "checking/level/WRONG_POLARITY": 0.2,
             "checking/level/invalid": 0.1, "frac_reward_zero_std": 0.0, "checking/zero_spread_groups": 0.75,
             "completions/mean_length": 91.0, "completions/clipped_ratio": 0.05, "checking/reward_family/linear": 0.4}
            for s in (1, 2)]
    with console.capture() as cap:
        diagnostics_table({"step_diagnostics": rows})
    text = cap.get()
    assert "accF" in text and "disc" in text and "flat" in text and "linear 0.40 (2 steps)" in text
    assert text.count(" .40") == 2 and text.count("-.25") == 2 and text.count("91") == 2  # both steps
    assert text.count(".75") == 2  # flat: the meta-verifier grade's zero-spread share, not TRL's total-reward one
    assert max(len(line) for line in text.splitlines()) <= 80
    png = diagnostics_plot({"step_diagnostics": rows}, tmp_path / "d.png")
    assert png is not None and png.stat().st_size > 1000
    assert diagnostics_plot({"step_diagnostics": []}, tmp_path / "e.png") is None
