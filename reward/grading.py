"""One grader for training rewards, `proofcheck grade` and benchmark scoring.

`Grader(mode, scale, judge)` grades verifier outputs against annotations:
- `structural`: step indices only (`proofcheck.reward.structural`);
- `judge`: the LLM judge's level;
- `hybrid`: `min(structural, judge)`: the judge can only lower what the step indices allow.
Invalid verifier outputs score 0 without asking anyone. Polarity is a fact of the indices, so
the judge is asked only when both the verifier and the expert say "invalid"; WRONG_POLARITY
and both-valid EXACT_MATCH come from the structural rules in every mode.

`grade_files` is the file-level, resumable grading behind `proofcheck grade`.

Example:
    >>> g = Grader("structural")
    >>> item = GradeItem(problem="p", steps=["a", "b"], text="<assessment>ok</assessment><errors></errors>"
    ...                  "<first_error_step>-1</first_error_step>",
    ...                  annotation={"first_fatal_error_step": -1, "recoverable_error_steps": [-1]})
    >>> g.grade_sync(item).level.name
    'EXACT_MATCH'
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from proofcheck.parsing import parse_verifier_output
from proofcheck.reward.client import JudgeClient, JudgeConfig, JudgeSession
from proofcheck.reward.judge import judge_messages, judge_template_messages
from proofcheck.reward.levels import GradeResult, Level, Scale, get_scale
from proofcheck.reward.structural import coerce_annotation, grade_parsed
from proofcheck.schemas import Annotation

MODES = ("structural", "judge", "hybrid")


@dataclass(frozen=True)
class GradeItem:
    """One verifier output to grade, with what the grader needs about its proof."""

    problem: str
    steps: list[str]
    text: str
    annotation: Annotation | Mapping[str, Any] | str
    finish_reason: str | None = "stop"
    reference: str | None = None  # shown to the judge only through a prompt file's {human_solution}


class Grader:
    """Grades `GradeItem`s in one of `MODES`; `judge` is required for judge and hybrid."""

    def __init__(self, mode: str = "structural", scale: str | Scale = "training",
                 judge: JudgeConfig | JudgeClient | None = None, judge_template: str | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown grading mode {mode!r}; choose one of {', '.join(MODES)}")
        if mode != "structural" and judge is None:
            raise ValueError(f"mode {mode!r} needs a judge: give a judge endpoint and model")
        self.mode = mode
        self.scale = get_scale(scale)
        self.judge_template = judge_template  # a release-format judge prompt file's text (else our prompt)
        self.judge = JudgeClient(judge) if isinstance(judge, JudgeConfig) else judge
        if mode == "structural":
            self.judge = None
        self._session: JudgeSession | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_session": None}  # a session is bound to one event loop: never pickled

    def _structural(self, item: GradeItem) -> tuple[GradeResult, Any, Annotation]:
        ann = coerce_annotation(item.annotation)
        parsed = parse_verifier_output(item.text, len(item.steps), item.finish_reason)
        return grade_parsed(parsed, ann, self.scale), parsed, ann

    def grade_sync(self, item: GradeItem) -> GradeResult:
        """Structural grading (no judge call); raises if this grader needs a judge."""
        if self.judge is not None:
            raise RuntimeError(f"a {self.mode!r} grader calls a judge: use `await grade(...)`")
        return self._structural(item)[0]

    async def grade_one(self, item: GradeItem, session: JudgeSession | None) -> GradeResult:
        """Grade one item, asking the judge through `session` when the mode and the case need it."""
        base, parsed, ann = self._structural(item)
        if session is None or not base.valid or base.level in (Level.WRONG_POLARITY,) or ann.is_correct:
            return base
        messages = (judge_template_messages(self.judge_template, item.problem, item.steps, parsed.verdict, ann,
                                            item.reference) if self.judge_template
                    else judge_messages(item.problem, item.steps, parsed.verdict, ann))
        outcome = await session.judge(messages)
        if outcome.level is None:
            return GradeResult(level=None, score=None, valid=True, grader_error=outcome.error,
                               structural_level=base.structural_level, endpoint_error=outcome.endpoint_error,
                               error_status=outcome.error_status)
        level = outcome.level if self.mode == "judge" else min(base.structural_level, outcome.level)
        return GradeResult(level=level, score=self.scale.score(level), valid=True,
                           structural_level=base.structural_level, judge_level=outcome.level)

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[JudgeSession | None]:
        """One judge session (HTTP client + concurrency bound) for every `grade` call inside it.

        A run that grades many batches (VerifierBench grades proof by proof) opens this once, so
        all its batches share one client, one connection pool and one semaphore. Without a judge
        it yields None. Sessions belong to the running event loop; do not nest them.
        """
        if self.judge is None:
            yield None
            return
        if self._session is not None:
            raise RuntimeError("Grader.session() is already open; share that session instead of nesting")
        async with self.judge.session() as s:
            self._session = s
            try:
                yield s
            finally:
                self._session = None

    async def grade(self, items: list[GradeItem]) -> list[GradeResult]:
        """Grade a batch concurrently (the judge's concurrency bound applies).

        Inside `async with grader.session()` the batch uses that session; otherwise it opens one
        for this batch (TRL calls a reward once per step, each in its own call).
        """
        if self.judge is None:
            return [self._structural(it)[0] for it in items]
        if self._session is not None:
            return list(await asyncio.gather(*(self.grade_one(it, self._session) for it in items)))
        async with self.session() as s:
            return list(await asyncio.gather(*(self.grade_one(it, s) for it in items)))


# ---- file level -------------------------------------------------------------------------------


def level_counts(rows: list[Mapping[str, Any]]) -> dict[str, int]:
    """Counts per level name, plus INVALID (invalid verifier outputs) and GRADER_ERROR."""
    c: Counter = Counter()
    for r in rows:
        if r.get("grader_error"):
            c["GRADER_ERROR"] += 1
        elif not r.get("valid"):
            c["INVALID"] += 1
        else:
            c[r["level"]] += 1
    return {k: c.get(k, 0) for k in (*[lvl.name for lvl in sorted(Level, reverse=True)], "INVALID", "GRADER_ERROR")}


def summarise(rows: list[Mapping[str, Any]], expected: int | None = None) -> dict[str, Any]:
    """Counts per level, mean score over graded outputs (invalid = 0; grader errors excluded).

    Complete or says so: `grader_failures` (every output the judge could not grade),
    `errored_passes` (those whose judge request failed at the endpoint: HTTP status, timeout,
    malformed body; each with its status in `endpoint_errors`), `complete`. `mean_score` is
    None while the grading is incomplete, as the release gives no score for an incomplete run
    (`mean_score_so_far` keeps the partial mean for progress).
    """
    from proofcheck.rundir import completeness

    scores = [r["score"] for r in rows if r.get("score") is not None]
    # each grade row as a record of one judge call: an errored pass when the endpoint failed it
    calls = [{"verifier_passes": [{"status": "error" if r.get("grader_error") and r.get("endpoint_error") else "ok",
                                   "error_status": r.get("error_status"), "error": r.get("grader_error")}]}
             for r in rows]
    status = completeness(calls, expected, grader_failures=sum(1 for r in rows if r.get("grader_error")))
    partial = fmean(scores) if scores else None
    return {"n_outputs": len(rows), "levels": level_counts(rows),
            "mean_score": partial if status["complete"] else None, "mean_score_so_far": partial, **status}


def _load_pairs(data: str | Path, outputs: str | Path) -> list[tuple[Any, Any]]:
    from proofcheck.data.loaders import DataError, load_records

    proofs = {p.proof_id: p for p in load_records(data, "annotated")}
    outs = load_records(outputs, "output")
    unknown = sorted({o.proof_id for o in outs} - set(proofs))
    if unknown:
        raise DataError([f"{outputs}: proof_id: {u!r} is not in {data}" for u in unknown[:20]])
    return [(proofs[o.proof_id], o) for o in outs]


def _done_rows(out: Path) -> list[dict[str, Any]]:
    """Rows already graded; earlier grader failures are dropped (atomically) to be retried."""
    from proofcheck.io import read_jsonl_tolerant, write_jsonl_atomic

    rows = read_jsonl_tolerant(out)
    kept = [r for r in rows if not r.get("grader_error")]
    if len(kept) != len(rows):
        write_jsonl_atomic(out, kept)
    return kept


async def grade_files_async(grader: Grader, data: str | Path, outputs: str | Path, out: str | Path,
                            on_start: Callable[[int, int], None] | None = None,
                            on_result: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Grade every output of `outputs` against `data`, appending one line per output to `out`.

    Resumable: outputs whose (proof_id, repeat) is already in `out` are skipped, so a re-run
    adds no duplicates; lines of earlier grader failures are retried. `on_start(total, done)`
    and `on_result(row)` drive a progress display. Returns `summarise` of the whole file.
    """
    from proofcheck.io import JsonlAppender

    out = Path(out)
    pairs = _load_pairs(data, outputs)
    rows = _done_rows(out)
    done = {(r["proof_id"], r["repeat"]) for r in rows}
    todo = [(p, o) for p, o in pairs if (o.proof_id, o.repeat) not in done]
    if on_start is not None:
        on_start(len(pairs), len(pairs) - len(todo))

    def row_of(o: Any, res: GradeResult) -> dict[str, Any]:
        d = res.to_dict()
        return {"proof_id": o.proof_id, "repeat": o.repeat, "level": d["level"], "score": d["score"],
                "valid": d["valid"], "grader_error": d["grader_error"], "invalid_reason": d["invalid_reason"],
                "endpoint_error": d["endpoint_error"], "error_status": d["error_status"],
                "structural_level": d["structural_level"], "judge_level": d["judge_level"]}

    def item_of(p: Any, o: Any) -> GradeItem:
        return GradeItem(p.problem, list(p.steps), o.text, p.annotation, o.finish_reason)

    with JsonlAppender(out) as app:
        def emit(o: Any, res: GradeResult) -> None:
            row = row_of(o, res)
            app.append(row)
            rows.append(row)
            if on_result is not None:
                on_result(row)

        if grader.judge is None:
            for p, o in todo:
                emit(o, grader.grade_sync(item_of(p, o)))
        else:
            async with grader.session() as s:
                async def one(p: Any, o: Any) -> tuple[Any, GradeResult]:
                    return o, await grader.grade_one(item_of(p, o), s)

                tasks = [asyncio.ensure_future(one(p, o)) for p, o in todo]
                try:
                    for fut in asyncio.as_completed(tasks):
                        emit(*(await fut))
                finally:  # a stop (EndpointStop) leaves no judgement running behind it
                    for t in tasks:
                        t.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
    summary = summarise(rows, len(pairs))
    if grader.judge is not None:
        summary["judge"] = grader.judge.stats.as_dict()
    return summary


def grade_files(grader: Grader, data: str | Path, outputs: str | Path, out: str | Path,
                **callbacks: Any) -> dict[str, Any]:
    """Synchronous wrapper of `grade_files_async` (runs its own event loop)."""
    return asyncio.run(grade_files_async(grader, data, outputs, out, **callbacks))
