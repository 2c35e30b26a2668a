"""The demo's last stage: serve the trained verifier once and score through it.

1. A synthetic prover (`proofcheck.bench.synthetic_prover`) built from the demo's dev set, proofs of the
   family the verifier was trained on but never saw, valid at a known rate. Every pass runs, so one run
   gives the pessimistic score (unanimity of `passes`), the per-pass accept rate and, where the model card
   holds a calibrated rule (a GRPO run's final evaluation writes one), the calibrated score.
2. The shipped real samples (olympiad and undergraduate proofs), as a pipeline check of the same service.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proofcheck.app.demo_report import console
from proofcheck.metrics import VALID_RATE

# why the shipped samples score near chance, in one sentence for the report and the console
SHIPPED_NOTE = ("The shipped samples are real olympiad and undergraduate proofs; a 135M model trained on short "
                "synthetic proofs (the demo's chains, or the long recipe's six families) cannot check them, so its "
                "scores there are near chance: they show the pipeline works end to end, not how good the verifier is.")
# the report's scoring section under --no-score
NOT_SCORED = ("Not served or scored (--no-score): the held-out evaluations before and after GRPO are the "
              "measurement. `proofcheck serve` and `proofcheck score` score the trained model later.")


def card_calibration(model: Path) -> tuple[str, int] | None:
    """The model card's calibrated (rule, k), or None when it has none (or a malformed one)."""
    from proofcheck.prompt_card import card_rule, read_calibration

    record = read_calibration(model)
    if record is None:
        return None
    try:
        rule, k, _ = card_rule({"calibration": record}, str(model))
    except ValueError as e:
        console.print(f"  note: {e}; scoring the pessimistic rule alone")
        return None
    return rule, k


def _records(out: Path) -> list[dict[str, Any]]:
    from proofcheck.rundir import latest_records

    path = out / "records.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return latest_records(rows, ("proof_id",), str(path))


def serve_and_score(cfg: Any, model: Path, data: Path, env: dict[str, str]) -> dict[str, Any]:
    """Start `proofcheck serve` on the trained model, score the synthetic prover and the shipped data, stop it."""
    from proofcheck.app.demo_plan import score_concurrency
    from proofcheck.app.launch import ServeRun
    from proofcheck.bench.meta import make_trial_grader
    from proofcheck.bench.scoring import score_prover, score_verifier
    from proofcheck.bench.synthetic_prover import rates_by_label, write_synthetic_prover
    from proofcheck.data.loaders import SAMPLES_DIR
    from proofcheck.process import ServiceProcess, free_port
    from proofcheck.serve.verifier import make_verifier

    dev = [json.loads(line) for line in (data / "dev.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    prover = write_synthetic_prover(dev, data / "synthetic_prover", cfg.prover_rate, cfg.prover_n, seed=cfg.seed)
    calibrated = card_calibration(model)
    serve = ServeRun(model=model, port=free_port(), passes=cfg.passes, max_tokens=cfg.max_tokens)
    url, conc, ident = serve.url, score_concurrency(cfg.passes), f"demo:{model}"
    with ServiceProcess(serve.command(), url + "/health", cfg.workdir / "logs" / "serve.log", env=env) as svc:
        console.print(f"  verification service up at {url} (log {svc.log_path})")
        console.print(f"  synthetic prover: {prover.n} held-out chain proofs, {prover.n_valid} valid (true rate "
                      f"{prover.true_rate:.3f}), {cfg.passes} passes each" +
                      (f"; the card's calibrated rule: {calibrated[0]} of {calibrated[1]}" if calibrated else ""))
        synth = score_prover(str(prover.problems), str(prover.submissions), make_verifier(endpoint=url), ident,
                             cfg.workdir / "synthetic_prover", passes=cfg.passes, concurrency=conc, resume=True,
                             max_tokens=cfg.max_tokens, calibrated=calibrated, all_passes=True)
        shipped = score_prover(str(SAMPLES_DIR / "problems.jsonl"), str(SAMPLES_DIR / "submissions.jsonl"),
                               make_verifier(endpoint=url), ident, cfg.workdir / "prover", passes=cfg.passes,
                               concurrency=conc, resume=True, max_tokens=cfg.max_tokens)
        verifier = score_verifier(str(SAMPLES_DIR / "annotated.jsonl"), make_verifier(endpoint=url), ident,
                                  cfg.workdir / "verifier", repeats=cfg.repeats, grader=make_trial_grader(),
                                  judge_id="structural", concurrency=max(1, 32 // cfg.repeats), resume=True,
                                  max_tokens=cfg.max_tokens)
    truth = json.loads((data / "synthetic_prover" / "truth.json").read_text(encoding="utf-8"))
    records = _records(cfg.workdir / "synthetic_prover")
    by_label = rates_by_label(records, truth["labels"])
    from proofcheck.bench.synthetic_prover import per_pass_rate

    synthetic = {"true_rate": prover.true_rate, "n": prover.n, "n_valid": prover.n_valid, "passes": cfg.passes,
                 "per_pass": per_pass_rate(records), **by_label,
                 **{k: synth.get(k) for k in ("pessimistic", "calibrated_score", "calibrated_rule", VALID_RATE,
                                              "complete")}}
    return {"synthetic": synthetic, "prover": shipped, "verifier": verifier}


def scoring_lines(scores: dict[str, Any]) -> list[str]:
    """The scoring in plain words: the synthetic prover's true rate beside what the verifier says, then the
    shipped samples as a pipeline check."""
    s, p, v = scores["synthetic"], scores["prover"], scores["verifier"]

    def num(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"

    lines = [f"A prover whose proofs are valid {num(s['true_rate'])} of the time ({s['n_valid']} of {s['n']} held-out "
             f"chain proofs) scores:",
             f"  one pass accepts {num(s['per_pass'])} (valid proofs {num(s.get('per_pass_accept_valid'))}, flawed "
             f"{num(s.get('per_pass_accept_flawed'))})",
             f"  pessimistic ({s['passes']}-pass unanimity, the paper's rule): {num(s.get('pessimistic'))}"]
    if s.get("calibrated_rule"):
        lines.append(f"  calibrated ({s['calibrated_rule']}, the rule in the model card): "
                     f"{num(s.get('calibrated_score'))}")
    lines += [f"Shipped real samples, a pipeline check: ProverBench pessimistic {num(p.get('pessimistic'))} "
              f"(valid outputs {num(p.get(VALID_RATE))}); VerifierBench rough Balanced F1 "
              f"{num(v.get('rough_bal_f1'))}.", SHIPPED_NOTE]
    return lines
