"""A scoring run's output folder: manifest, append-only records, resume rules.

`DIR/manifest.json` fixes what the run measures (input file hashes, model or endpoint, passes,
rule, repeats, prompt hash...). `DIR/records.jsonl` is append-only and fsynced, one record per
proof, so a run killed at any moment resumes with `--resume` without losing or duplicating a
record. A resume whose manifest differs is refused, naming the fields that changed.

A record holding passes that got an endpoint error (`errored_passes(record) > 0`) is kept but
not done: `--resume` hands it back (`RunDir.errored`) so that exactly those passes are re-run,
and the new record supersedes it (the later line wins; `close()` compacts the file).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from proofcheck.io import JsonlAppender, read_jsonl_tolerant, write_json_atomic

PASS_LISTS = ("verifier_trials", "verifier_passes", "generation_passes")


def errored_passes(record: dict[str, Any]) -> int:
    """How many passes of a record got an endpoint error instead of an answer.

    Ours have status "error"; the release's results keep it as `response.error`.
    """
    def errored(t: dict[str, Any]) -> bool:
        if "status" in t:
            return t["status"] == "error"
        resp = t.get("response")
        return isinstance(resp, dict) and bool(resp.get("error"))

    return sum(1 for key in PASS_LISTS for t in record.get(key) or [] if errored(t))


def latest_records(records: list[dict[str, Any]], key_fields: tuple[str, ...], where: str = "records") -> list[dict]:
    """One record per key, the last one written; only a record with errored passes may be superseded."""
    latest: dict[tuple, dict[str, Any]] = {}
    for r in records:
        k = tuple(r[f] for f in key_fields)
        if k in latest and not errored_passes(latest[k]):
            raise RunDirError(f"{where} holds duplicate records for {k}; it was not written by proofcheck")
        latest[k] = r
    return list(latest.values())


def endpoint_error_counts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Errored passes by HTTP status ("None": no response) and one example message each."""
    by_status: dict[str, int] = {}
    examples: dict[str, str] = {}
    for r in records:
        for key in PASS_LISTS:
            for t in r.get(key) or []:
                if errored_passes({key: [t]}):
                    resp = t.get("response") if isinstance(t.get("response"), dict) else {}
                    k = str(t.get("error_status"))
                    by_status[k] = by_status.get(k, 0) + 1
                    examples.setdefault(k, str(t.get("error") or resp.get("error"))[:200])
    return {"by_status": by_status, "examples": examples}


def completeness(records: list[dict[str, Any]], expected: int | None, grader_failures: int = 0,
                 **extra: Any) -> dict[str, Any]:
    """`complete` and what is missing: records not written, errored passes, grader failures.

    Every run that talks to an endpoint (scoring, generation, curation, grading) puts this in its
    summary, so "is this run whole" reads the same everywhere; `extra` counts are added as given.
    """
    errored = sum(errored_passes(r) for r in records)
    missing = max((expected or 0) - len(records), 0)
    return {"complete": not (errored or missing or grader_failures), "errored_passes": errored,
            "missing_records": missing, "expected_records": expected, "grader_failures": grader_failures,
            **extra, "endpoint_errors": endpoint_error_counts(records)}


def missing_in_words(summary: dict[str, Any]) -> str:
    """What keeps a run incomplete, from its `completeness` keys: "2 errored passes, 1 missing records"."""
    return ", ".join(f"{summary[k]} {k.replace('_', ' ')}" for k in ("errored_passes", "missing_records",
                                                                      "grader_failures") if summary.get(k))


class RunDirError(ValueError):
    """The output folder cannot be used as asked (existing run, manifest mismatch)."""


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class RunDir:
    """Open `out` for a run described by `manifest`; `done` holds the keys already recorded."""

    def __init__(self, out: str | Path, manifest: dict[str, Any], key_fields: tuple[str, ...], resume: bool):
        self.path = Path(out)
        self.key_fields = key_fields
        self.manifest = manifest
        man_path = self.path / "manifest.json"
        records_path = self.path / "records.jsonl"
        if man_path.exists():
            old = json.loads(man_path.read_text())
            if not resume:
                raise RunDirError(f"{self.path} already holds a run; pass --resume to continue it or choose a new --out")
            changed = sorted(k for k in set(old) | set(manifest) if old.get(k) != manifest.get(k))
            if changed:
                raise RunDirError(
                    f"cannot resume {self.path}: the run differs in {', '.join(changed)} "
                    f"(was {', '.join(f'{k}={old.get(k)!r}' for k in changed)}); use a new --out for a different run")
        elif records_path.exists() and records_path.stat().st_size:
            raise RunDirError(f"{records_path} exists without a manifest; move it away or choose a new --out")
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(man_path, manifest)
        raw = read_jsonl_tolerant(records_path)
        self.records: list[dict[str, Any]] = latest_records(raw, key_fields, str(records_path))
        self._superseded = len(raw) - len(self.records)
        self.errored: dict[tuple, dict[str, Any]] = {self.key(r): r for r in self.records if errored_passes(r)}
        self.done = {self.key(r) for r in self.records} - set(self.errored)
        self._records_path = records_path
        self._appender = JsonlAppender(records_path)

    def key(self, record: dict[str, Any]) -> tuple:
        return tuple(record[f] for f in self.key_fields)

    def append(self, record: dict[str, Any]) -> None:
        """Persist one record (fsynced) unless its key is already done; it supersedes an errored one."""
        k = self.key(record)
        if k in self.done:
            raise RunDirError(f"record {k} written twice")
        self._appender.append(record)
        if k in self.errored:
            old = self.errored.pop(k)
            self.records = [record if r is old else r for r in self.records]
            self._superseded += 1
        else:
            self.records.append(record)
        self.done.add(k)

    def close(self) -> None:
        """Close the records file; rewrite it without superseded records (atomically) if any."""
        self._appender.close()
        if self._superseded:
            from proofcheck.io import write_jsonl_atomic

            write_jsonl_atomic(self._records_path, self.records)
            self._superseded = 0


async def fill(run: RunDir, items: list[Any], work: Callable[[Any], Awaitable[dict[str, Any]]], concurrency: int,
               label: str) -> None:
    """Run `work` on `items` (at most `concurrency` at once), appending each record as it completes.

    A rich progress bar counts what the folder already held, so a resumed run shows its true ETA.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    sem = asyncio.Semaphore(concurrency)

    async def one(item: Any) -> dict[str, Any]:
        async with sem:
            return await work(item)

    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
               TimeRemainingColumn())
    with Progress(*columns) as bar:
        done = len(run.done)
        task = bar.add_task(label, total=len(items) + done, completed=done)
        for fut in asyncio.as_completed([one(i) for i in items]):
            run.append(await fut)
            bar.advance(task)
