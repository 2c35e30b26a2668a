"""Inter-annotator agreement on an annotation output (`proofcheck annotate --agreement FILE`).

Items annotated by two or more people are compared pairwise: polarity (correct vs flawed)
with Cohen's kappa, and exact agreement on the first fatal step (-1 = none) and on the
derived `first_error_step`. Every pair that differs on polarity or fatal step is listed.

Example:
    >>> cohen_kappa([(True, True), (False, False), (True, False), (False, False)])
    0.5
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from pydantic import ValidationError

from proofcheck.data.loaders import DataError, iter_json_lines
from proofcheck.schemas import AnnotatedProof


@dataclass
class Labels:
    """One annotator's verdict on one proof."""

    annotator: str
    is_correct: bool
    fatal: int
    recoverable: list[int]
    first_error_step: int
    comment: str


@dataclass
class PairStats:
    """Agreement over the items two annotators (or all pairs, pooled) both annotated."""

    name: str
    pairs: list[tuple[Labels, Labels]] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.pairs)

    @property
    def polarity_agreement(self) -> float | None:
        return _mean([a.is_correct == b.is_correct for a, b in self.pairs])

    @property
    def kappa(self) -> float | None:
        return cohen_kappa([(a.is_correct, b.is_correct) for a, b in self.pairs])

    @property
    def fatal_exact(self) -> float | None:
        return _mean([a.fatal == b.fatal for a, b in self.pairs])

    @property
    def first_error_exact(self) -> float | None:
        return _mean([a.first_error_step == b.first_error_step for a, b in self.pairs])


@dataclass
class AgreementReport:
    n_records: int
    n_items: int
    n_shared: int  # items with two or more annotators
    by_pair: list[PairStats]
    overall: PairStats
    disagreements: list[tuple[str, Labels, Labels]]


def _mean(xs: list[bool]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def cohen_kappa(pairs: list[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa of two raters' binary labels; None when undefined (no pairs, or chance
    agreement is 1 because both raters gave one and the same label throughout)."""
    n = len(pairs)
    if n == 0:
        return None
    p_o = sum(a == b for a, b in pairs) / n
    pa = sum(a for a, _ in pairs) / n
    pb = sum(b for _, b in pairs) / n
    p_e = pa * pb + (1 - pa) * (1 - pb)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1 - p_e)


def load_annotations(path: str | Path) -> list[tuple[str, Labels]]:
    """(proof_id, labels) per record of an annotation output; DataError names file:line: field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    out: list[tuple[str, Labels]] = []
    problems: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    for lineno, value, err in iter_json_lines(path):
        where = f"{path}:{lineno}"
        if err is not None or not isinstance(value, dict):
            problems.append(f"{where}: <line>: {err or 'expected a JSON object'}")
            continue
        try:
            rec = AnnotatedProof.model_validate(value)
        except ValidationError as e:
            problems.extend(f"{where}: {'.'.join(map(str, d['loc'])) or '<record>'}: {d['msg']}" for d in e.errors())
            continue
        annotator = value.get("annotator")
        if not isinstance(annotator, str) or not annotator:
            problems.append(f"{where}: annotator: missing (is this an output of `proofcheck annotate`?)")
            continue
        key = (rec.proof_id, annotator)
        if key in seen:
            problems.append(f"{where}: proof_id+annotator: duplicate {key!r} (first on line {seen[key]})")
            continue
        seen[key] = lineno
        a = rec.annotation
        out.append((rec.proof_id, Labels(annotator, a.is_correct, a.first_fatal_error_step, a.recoverable,
                                         a.first_error_step, a.reviewer_comment)))
    if problems:
        raise DataError(problems)
    return out


def compute_agreement(labelled: list[tuple[str, Labels]]) -> AgreementReport:
    """Pairwise agreement over items with two or more annotators (pairs ordered by name)."""
    by_item: dict[str, list[Labels]] = defaultdict(list)
    for proof_id, labels in labelled:
        by_item[proof_id].append(labels)
    pair_stats: dict[tuple[str, str], PairStats] = {}
    overall = PairStats("all pairs")
    disagreements: list[tuple[str, Labels, Labels]] = []
    n_shared = 0
    for proof_id, group in by_item.items():
        if len(group) < 2:
            continue
        n_shared += 1
        for a, b in combinations(sorted(group, key=lambda x: x.annotator), 2):
            key = (a.annotator, b.annotator)
            pair_stats.setdefault(key, PairStats(f"{a.annotator} / {b.annotator}")).pairs.append((a, b))
            overall.pairs.append((a, b))
            if a.is_correct != b.is_correct or a.fatal != b.fatal:
                disagreements.append((proof_id, a, b))
    return AgreementReport(len(labelled), len(by_item), n_shared, [pair_stats[k] for k in sorted(pair_stats)],
                           overall, disagreements)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _labels(x: Labels) -> str:
    rec = ",".join(map(str, x.recoverable)) or "-"
    verdict = "correct" if x.is_correct else "flawed"
    return f"{x.annotator}: {verdict}, fatal {x.fatal}, recoverable {rec}"


def format_report(report: AgreementReport, path: str | Path = "") -> str:
    """A Markdown summary: one row per annotator pair plus the pooled row, then disagreements."""
    lines = [f"# Annotator agreement{f' — {path}' if path else ''}", "",
             f"{report.n_records} records, {report.n_items} proofs, {report.n_shared} annotated by two or more.", ""]
    if not report.overall.pairs:
        lines.append("No proof has two annotators yet: nothing to compare.")
        return "\n".join(lines) + "\n"
    lines += ["| pair | items | polarity agreement | Cohen's kappa | fatal step exact | first error step exact |",
              "|---|---:|---:|---:|---:|---:|"]
    rows = report.by_pair + ([report.overall] if len(report.by_pair) > 1 else [])
    for s in rows:
        lines.append(f"| {s.name} | {s.n} | {_fmt(s.polarity_agreement)} | {_fmt(s.kappa)} | "
                     f"{_fmt(s.fatal_exact)} | {_fmt(s.first_error_exact)} |")
    lines += ["", "kappa is n/a when both annotators gave the same polarity to every item (chance agreement 1).",
              "", f"## Disagreements ({len(report.disagreements)})", ""]
    for proof_id, a, b in report.disagreements:
        lines.append(f"- {proof_id}: {_labels(a)} | {_labels(b)}")
    if not report.disagreements:
        lines.append("None: every shared item has the same polarity and fatal step.")
    return "\n".join(lines) + "\n"
