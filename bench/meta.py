"""Meta-verifier grading of VerifierBench trials (benchmark scale: 1 / 0.75 / 0.5 / 0).

Without a judge the structural grader (step indices) gives the meta level; with a judge the
hybrid grade min(structural, judge) is used, as in training. A grader failure is recorded
with `grader_error` and score None: it never becomes a 0.
"""

from __future__ import annotations

import contextlib
from typing import Any

from proofcheck.reward.grading import GradeItem, Grader


class TrialGrader:
    """`await grader(proof, trials) -> [meta dict per trial]` for `score_verifier`.

    One `Grader` (and so one judge client) per run: `score_verifier` wraps the whole run in
    `async with grader.session()`, so every proof's trials share one HTTP client, connection
    pool and concurrency bound instead of building them per proof.
    """

    def __init__(self, grader: Grader, with_reference: bool = False):
        self.grader = grader
        self.with_reference = with_reference  # a judge prompt file's {human_solution}, as the verifier saw it

    def session(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """The run-wide judge session (a no-op without a judge)."""
        return self.grader.session()

    async def __call__(self, proof: Any, trials: list[dict]) -> list[dict | None]:
        ref = proof.reference_solution if self.with_reference else None
        items = [GradeItem(proof.problem, list(proof.steps), t.get("text") or "", proof.annotation,
                           t.get("finish_reason"), ref) for t in trials]
        results = await self.grader.grade(items)
        out: list[dict | None] = []
        for t, r in zip(trials, results, strict=True):
            if t.get("error"):  # the pass never produced an answer: nothing to grade, it is invalid
                out.append({"level": None, "score": 0.0, "valid": False, "grader_error": None})
            else:
                d = r.to_dict()
                out.append({"level": d["level"], "score": d["score"], "valid": d["valid"],
                            "grader_error": d["grader_error"], "structural_level": d["structural_level"],
                            "judge_level": d["judge_level"]})
        return out


def make_trial_grader(judge_endpoint: str | None = None, judge_model: str | None = None,
                      cache_dir: str | None = None, concurrency: int = 8, judge_template: str | None = None,
                      with_reference: bool = False, judge_api_key_env: str | None = None) -> TrialGrader:
    """The run's `TrialGrader`: hybrid min(structural, judge) with a judge, else structural.

    `judge_template` is a release-format judge prompt file's text (`--judge-prompt-file`).
    """
    judge = None
    if judge_endpoint:
        from proofcheck.reward.client import JudgeConfig

        judge = JudgeConfig(endpoint=judge_endpoint, model=judge_model or "", cache_dir=cache_dir,
                            concurrency=concurrency, api_key_env=judge_api_key_env)
    return TrialGrader(Grader("hybrid" if judge else "structural", "benchmark", judge, judge_template),
                       with_reference)
