"""Run the LiveMathematicianBench MCQ evaluation for one or more months and write results files.

Output: `<results-dir>/<month>/accuracy_test_<safe-model>_<month>_<effort|default>[_sketch].json`
with `test_info`, `summary.all`, `overall` (the same numbers) and `detailed_results`, whose fields
keep the benchmark's names (`id`, `correct_answer`, `model_answer`, `raw_response`, `is_correct`,
tokens, `reasoning_tokens`, `elapsed_seconds`, `error`, `n_samples`, `samples`, `score`, ...).

Unlike the original scripts (one write at the end) every finished item is appended, fsynced, to a
journal beside the results file (`<results>.journal.jsonl`): O(1) per item, so a crash loses only
the items in flight. The results file itself is a snapshot rewritten atomically (valid JSON at
every moment) at start, whenever the journal has grown by a fixed share of the records already
snapshotted (`SnapshotPolicy`, amortised O(1) per item), at least every 30 s, and at the end,
when the journal is removed. `resume=True` reads the snapshot plus the journal, keeps every
finished item that has an answer and no error, and re-runs the rest. Requests run concurrently
under one semaphore (`concurrency` requests in flight, counting each of the `n` samples of an item).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from proofcheck.bench.mcq_backends import BackendSettings, McqClient, RequestFailed
from proofcheck.bench.mcq_data import Item, hard_set_path, load_hard_set, shuffle_options
from proofcheck.bench.mcq_prompt import SYSTEM_PROMPT, build_user_prompt, extract_answer
from proofcheck.io import read_jsonl_tolerant, write_text_atomic

JOURNAL_KIND = "proofcheck.bench.mcq journal"


@dataclass
class RunConfig:
    """One `proofcheck bench mcq` invocation."""

    months: list[str]
    settings: BackendSettings
    data_dir: Path = Path("data/lmb")
    results_dir: Path = Path("results")
    seed: int = 42
    n: int = 1
    concurrency: int = 4
    resume: bool = False
    add_sketch: bool = False
    strict_parse: bool = False
    debug: bool = False
    extra_info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SnapshotPolicy:
    """When the results file is rewritten from the records (the journal holds every record anyway).

    A snapshot is due once the journal holds `max(min_items, growth * snapshotted)` new records,
    so the total bytes of all snapshots stay within a constant factor (about 1 + 1/growth) of the
    final file; or once `interval_s` has passed since the last one and a record is new, so the
    file shows progress on slow runs.
    """

    min_items: int = 50
    growth: float = 0.5
    interval_s: float = 30.0

    def due(self, new: int, snapshotted: int, since_s: float) -> bool:
        """True if a snapshot should be written now."""
        return new >= max(self.min_items, self.growth * snapshotted) or (new > 0 and since_s >= self.interval_s)


class ResumeMismatch(ValueError):
    """The results file to resume was made with settings that would change the answers' meaning."""


def safe_model_name(model: str) -> str:
    """The model name made safe for a file name (as the benchmark's scripts do)."""
    return re.sub(r"[^\w\-.]", "_", model)


def results_path(cfg: RunConfig, month: str) -> Path:
    """`<results>/<month>/accuracy_test_<model>_<month>_<effort>[_sketch][_debug].json`.

    `--debug` runs (one item) get their own `_debug` file so they never overwrite a real run.
    """
    effort = cfg.settings.reasoning_effort or "default"
    suffix = ("_sketch" if cfg.add_sketch else "") + ("_debug" if cfg.debug else "")
    name = f"accuracy_test_{safe_model_name(cfg.settings.model)}_{month}_{effort}{suffix}.json"
    return Path(cfg.results_dir) / month / name


def journal_path(results: Path) -> Path:
    """The append-only journal that sits beside a results file while its run is in progress."""
    return results.with_name(results.name + ".journal.jsonl")


def needs_run(record: dict[str, Any]) -> bool:
    """True if a saved record must be evaluated again: no answer, or an error in any sample."""
    if record.get("model_answer") is None or record.get("error") is not None:
        return True
    return any(s.get("error") is not None for s in record.get("samples") or [])


def summarize(records: list[dict[str, Any]], total: int, n: int) -> dict[str, Any]:
    """Accuracy over all `total` items (unfinished items count as wrong, as in the benchmark)."""
    correct = sum(1 for r in records if r.get("is_correct"))
    out: dict[str, Any] = {"correct": correct, "total": total, "accuracy": correct / total if total else 0.0,
                           "evaluated": len(records),
                           "answered": sum(1 for r in records if r.get("model_answer") is not None),
                           "errors": sum(1 for r in records if _has_error(r))}
    if n > 1:
        per_item = [r.get("samples") or [r] for r in records]
        out["mean_sample_accuracy"] = (sum(sum(s["is_correct"] for s in ss) / len(ss) for ss in per_item) / total
                                       if total else 0.0)
        out["pass_at_n"] = sum(any(s["is_correct"] for s in ss) for ss in per_item) / total if total else 0.0
    return out


def _has_error(record: dict[str, Any]) -> bool:
    return record.get("error") is not None or any(s.get("error") for s in record.get("samples") or [])


def _now() -> datetime:
    return datetime.now()


def _check_settings(path: Path, info: dict[str, Any], cfg: RunConfig) -> None:
    for key, want in (("seed", cfg.seed), ("add_sketch", cfg.add_sketch)):
        if key in info and info[key] != want:
            raise ResumeMismatch(f"{path}: made with {key}={info[key]!r}, this run has {key}={want!r}; "
                                 f"use the same --{key.replace('_', '-')} or another --results-dir")


def read_saved(path: Path, cfg: RunConfig) -> list[dict[str, Any]]:
    """Every record an earlier run saved at `path`: the snapshot's, then the journal's (later wins).

    Checks that both were made with this run's seed and sketch mode (ResumeMismatch otherwise).
    """
    records: list[dict[str, Any]] = []
    if path.exists():
        try:
            prev = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ResumeMismatch(f"{path}: cannot resume, invalid JSON ({e.msg} at line {e.lineno}); "
                                 "move it away or run without --resume") from e
        _check_settings(path, prev.get("test_info") or {}, cfg)
        records += prev.get("detailed_results") or []
    journal = journal_path(path)
    try:
        lines = read_jsonl_tolerant(journal)
    except ValueError as e:
        raise ResumeMismatch(f"cannot resume: {e}; move {journal} away or run without --resume") from e
    if lines:
        header = lines[0]
        if not isinstance(header, dict) or header.get("journal") != JOURNAL_KIND:
            raise ResumeMismatch(f"{journal}:1: not an MCQ journal (no header line); move it away or run "
                                 "without --resume")
        _check_settings(journal, header, cfg)
        records += lines[1:]
    return records


def load_previous(path: Path, cfg: RunConfig, items: list[Item],
                  correct_labels: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Finished records of an earlier run at `path` (snapshot + journal) that can be kept, keyed by id.

    Refuses (ResumeMismatch) files made with another seed or sketch mode, or whose correct
    labels disagree with the current data: mixing them would give a meaningless accuracy.
    """
    latest: dict[str, dict[str, Any]] = {}
    for rec in read_saved(path, cfg):
        latest[rec.get("id")] = rec
    kept: dict[str, dict[str, Any]] = {}
    for rid, rec in latest.items():
        if rid not in correct_labels or needs_run(rec):
            continue
        if rec.get("correct_answer") != correct_labels[rid]:
            raise ResumeMismatch(f"{path}: item {rid!r} has correct_answer {rec.get('correct_answer')!r} but "
                                 f"the current data and seed give {correct_labels[rid]!r}; the data file "
                                 "changed since that run, so start a fresh run (without --resume)")
        kept[rid] = rec
    return kept


class MonthRun:
    """State of one month: the items, finished records, the journal and the snapshot writer.

    Use `start()` once, `add(record)` per finished item, `finish()` at the end. `bytes_written`
    counts every byte this run wrote to the journal and the results file.
    """

    def __init__(self, cfg: RunConfig, month: str, items: list[Item], path: Path,
                 policy: SnapshotPolicy = SnapshotPolicy()):
        self.cfg, self.month, self.items, self.path, self.policy = cfg, month, items, path, policy
        self.journal_path = journal_path(path)
        self.shuffled = [shuffle_options(item, cfg.seed, i) for i, item in enumerate(items)]
        self.order = {item.id: i for i, item in enumerate(items)}
        self.records: dict[str, dict[str, Any]] = {}
        self.started_at = _now().strftime("%Y-%m-%d %H:%M:%S")
        self.bytes_written = 0
        self._journal: Any = None
        self._snapshotted = 0
        self._new = 0
        self._last_snapshot = time.monotonic()

    def document(self, complete: bool) -> dict[str, Any]:
        cfg, s = self.cfg, self.cfg.settings
        records = sorted(self.records.values(), key=lambda r: self.order[r["id"]])
        summary = summarize(records, len(self.items), cfg.n)
        now = _now()
        info = {"date": now.strftime("%m%d_%H%M%S"), "model": s.model, "month": self.month,
                "reasoning_effort": s.reasoning_effort, "max_tokens": s.max_tokens, "seed": cfg.seed,
                "n_samples": cfg.n, "total_candidates": len(self.items), "total_tested": len(records),
                "timestamp": now.strftime("%Y-%m-%d %H:%M:%S"), "started_at": self.started_at,
                "complete": complete, "backend": s.backend, "use_responses_api": s.use_responses_api,
                "temperature": s.temperature, "top_p": s.top_p, "thinking_budget": s.thinking_budget,
                "add_sketch": cfg.add_sketch, "strict_parse": cfg.strict_parse, "debug": cfg.debug,
                **cfg.extra_info}
        return {"test_info": info, "summary": {"all": summary}, "overall": dict(summary),
                "detailed_results": records}

    def save(self, complete: bool = False) -> dict[str, Any]:
        """Rewrite the results file atomically from all records (a snapshot); return the document."""
        doc = self.document(complete)
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        write_text_atomic(self.path, text)
        self.bytes_written += len(text.encode("utf-8"))
        self._snapshotted, self._new, self._last_snapshot = len(self.records), 0, time.monotonic()
        return doc

    def start(self, complete: bool) -> dict[str, Any]:
        """Snapshot the kept records, then open a fresh journal (its header names the settings).

        A fresh run (no resume) removes an old journal first, so its records cannot leak into a
        later `--resume`; on resume the old journal's records are already in the snapshot.
        """
        if not self.cfg.resume:
            self.journal_path.unlink(missing_ok=True)
        doc = self.save(complete)
        self._journal = open(self.journal_path, "w", encoding="utf-8")
        self._write_journal({"journal": JOURNAL_KIND, "month": self.month, "model": self.cfg.settings.model,
                             "seed": self.cfg.seed, "add_sketch": self.cfg.add_sketch})
        return doc

    def _write_journal(self, obj: Any) -> None:
        line = json.dumps(obj, ensure_ascii=False) + "\n"
        self._journal.write(line)
        self._journal.flush()
        os.fsync(self._journal.fileno())
        self.bytes_written += len(line.encode("utf-8"))

    def add(self, record: dict[str, Any]) -> None:
        """Keep one finished record: one fsynced journal line, and a snapshot when the policy says so."""
        self.records[record["id"]] = record
        self._write_journal(record)
        self._new += 1
        if self.policy.due(self._new, self._snapshotted, time.monotonic() - self._last_snapshot):
            self.save()

    def finish(self) -> dict[str, Any]:
        """The final snapshot (complete); the journal is then redundant and removed."""
        doc = self.save(complete=True)
        self._journal.close()
        self.journal_path.unlink()
        return doc


async def _sample(client: McqClient, sem: asyncio.Semaphore, user: str, correct: str, k: int,
                  strict: bool) -> dict[str, Any]:
    async with sem:
        t0 = time.monotonic()
        try:
            gen, attempts = await client.generate(SYSTEM_PROMPT, user)
            error = None
        except RequestFailed as e:
            gen, attempts, error = None, e.attempts, str(e)
        elapsed = time.monotonic() - t0
    answer = extract_answer(gen.text, strict) if gen is not None else None
    return {"sample_idx": k, "model_answer": answer, "raw_response": gen.text if gen else None,
            "raw_thinking": gen.thinking if gen else None, "is_correct": answer == correct,
            "prompt_tokens": gen.prompt_tokens if gen else None,
            "completion_tokens": gen.completion_tokens if gen else None,
            "total_tokens": gen.total_tokens if gen else None,
            "reasoning_tokens": gen.reasoning_tokens if gen else None,
            "elapsed_seconds": elapsed, "finish_reason": gen.finish_reason if gen else None,
            "attempts": attempts, "error": error}


async def evaluate_item(client: McqClient, sem: asyncio.Semaphore, cfg: RunConfig, item: Item, index: int,
                        options: list[dict[str, str]], correct: str) -> dict[str, Any]:
    """All `cfg.n` samples of one item as one record; top-level fields mirror the first sample."""
    user = build_user_prompt(item, options, cfg.add_sketch)
    samples = await asyncio.gather(*(_sample(client, sem, user, correct, k, cfg.strict_parse)
                                     for k in range(cfg.n)))
    first = samples[0]
    keys = ("model_answer", "raw_response", "raw_thinking", "is_correct", "prompt_tokens", "completion_tokens",
            "total_tokens", "reasoning_tokens", "elapsed_seconds", "finish_reason", "attempts")
    return {"id": item.id, "index": index, "theorem_type": "all", "score": item.mcq.meta.get("score"),
            "correct_answer": correct, **{k: first[k] for k in keys},
            "reasoning_effort": cfg.settings.reasoning_effort, "error": first["error"], "n_samples": cfg.n,
            "samples": list(samples) if cfg.n > 1 else None}


def prepare_month(cfg: RunConfig, month: str) -> tuple[MonthRun, list[int]]:
    """Load the month's items and any resumable records; return the run and pending item indices."""
    items = load_hard_set(hard_set_path(cfg.data_dir, month))
    if cfg.debug:
        items = items[:1]
    run = MonthRun(cfg, month, items, results_path(cfg, month))
    if cfg.resume and (run.path.exists() or run.journal_path.exists()):
        labels = {item.id: run.shuffled[i][1] for i, item in enumerate(items)}
        run.records = load_previous(run.path, cfg, items, labels)
    pending = [i for i, item in enumerate(items) if item.id not in run.records]
    return run, pending


async def run_month(cfg: RunConfig, run: MonthRun, pending: list[int], client: McqClient,
                    on_item: Any = None) -> dict[str, Any]:
    """Evaluate the pending items of `run`, journaling each one as it finishes; return the final document.

    `on_item(record)` is called after each record is journaled (progress display).
    """
    sem = asyncio.Semaphore(cfg.concurrency)
    run.start(complete=not pending)

    async def one(i: int) -> None:
        options, correct = run.shuffled[i]
        record = await evaluate_item(client, sem, cfg, run.items[i], i, options, correct)
        run.add(record)
        if on_item is not None:
            on_item(record)

    await asyncio.gather(*(one(i) for i in pending))
    return run.finish()
