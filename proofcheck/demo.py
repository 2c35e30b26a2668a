"""`proofcheck demo`: the embedded default, end to end on CPU with the tiny local model.

Stages (each timed; a failed stage says which and why):
  1. build the tiny model (reused when already built);
  2. validate the shipped sample data;
  3. verify a few sample proofs with 8 passes each (in-process vLLM, one n=8 request per proof);
  4. print each decision and the VerifierBench metrics of those passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()


class StageFailed(RuntimeError):
    """A demo stage failed; the message names the stage."""


def run_stage(name: str, fn: Callable[[], Any]) -> Any:
    """Run one stage with a spinner, print its time, and name it if it fails."""
    t0 = time.perf_counter()
    with console.status(f"[bold]{name}[/bold] ..."):
        try:
            result = fn()
        except Exception as e:
            raise StageFailed(f"stage '{name}' failed: {type(e).__name__}: {e}") from e
    console.print(f"[green]done[/green] {name} ({time.perf_counter() - t0:.1f} s)")
    return result


def _validate_samples() -> dict[str, list]:
    from proofcheck.data.loaders import SAMPLES_DIR, load_records

    out = {kind: load_records(SAMPLES_DIR / f"{name}.jsonl", kind)
           for kind, name in (("problem", "problems"), ("annotated", "annotated"), ("submission", "submissions"))}
    console.print(f"  {len(out['problem'])} problems, {len(out['annotated'])} annotated proofs, "
                  f"{len(out['submission'])} submissions: all valid")
    return out


def _pick(proofs: list, k: int) -> list:
    good = [p for p in proofs if p.gold_is_correct][: k // 2]
    bad = [p for p in proofs if not p.gold_is_correct][: k - len(good)]
    return good + bad


def _verify(model_dir: Path, proofs: list, passes: int, seed: int, max_tokens: int) -> list:
    from proofcheck.protocol import verifier_messages
    from proofcheck.serve.offline import OfflineEngine
    from proofcheck.verification import parse_pass, summarise

    engine = OfflineEngine(str(model_dir), seed=seed)
    convs = [verifier_messages(p.problem, p.steps, p.reference_solution) for p in proofs]
    outs = engine.generate(convs, n=passes, max_tokens=max_tokens, seed=seed)
    return [summarise([parse_pass(c.text, len(p.steps), c.finish_reason, c.completion_tokens) for c in cs],
                      "unanimous") for p, cs in zip(proofs, outs, strict=True)]


def _report(proofs: list, results: list) -> dict:
    from proofcheck.metrics import ProofTrials, Trial, verifier_metrics

    t = Table(title="8-pass unanimous verification (tiny untrained model: expect noise)")
    for col in ("proof", "gold", "decision", "accept", "reject", "invalid", "top invalid reason"):
        t.add_column(col)
    items = []
    for p, r in zip(proofs, results, strict=True):
        reasons = [x.invalid_reason for x in r.passes if x.invalid_reason]
        top = max(set(reasons), key=reasons.count) if reasons else "-"
        t.add_row(p.proof_id, "valid" if p.gold_is_correct else f"error@{p.gold_first_error_step}", r.decision,
                  str(r.votes["accept"]), str(r.votes["reject"]), str(r.votes["invalid"]), top)
        items.append(ProofTrials(p.proof_id, p.gold_is_correct, p.gold_first_error_step, p.domain,
                                 [Trial(x.status == "valid", x.first_error_step) for x in r.passes]))
    console.print(t)
    m = verifier_metrics(items)
    keys = ("rough_tpr", "rough_tnr", "rough_bal_f1", "balanced_accuracy", "first_error_step_accuracy",
            "verifier_valid_rate")
    console.print("metrics: " + ", ".join(f"{k}={'-' if m[k] is None else f'{m[k]:.3f}'}" for k in keys))
    return m


def run_demo(workdir: str | Path = "runs/demo", *, n_proofs: int = 6, passes: int = 8, seed: int = 0,
             max_tokens: int = 256) -> dict:
    """Run the demo stages; returns the metrics of the verification stage."""
    from proofcheck.tiny_model import build_tiny_model

    workdir = Path(workdir)
    t0 = time.perf_counter()
    model_dir = run_stage("build tiny model", lambda: build_tiny_model(workdir / "model", seed=seed))
    data = run_stage("validate shipped data", _validate_samples)
    proofs = _pick(data["annotated"], n_proofs)
    results = run_stage(f"verify {len(proofs)} sample proofs x {passes} passes (vLLM, in-process)",
                        lambda: _verify(model_dir, proofs, passes, seed, max_tokens))
    metrics = _report(proofs, results)
    console.print(f"[bold]demo finished[/bold] in {time.perf_counter() - t0:.1f} s; model in {model_dir}")
    return metrics
