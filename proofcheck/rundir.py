"""A scoring run's output folder: manifest, append-only records, resume rules.

`DIR/manifest.json` fixes what the run measures (input file hashes, model or endpoint, passes,
rule, repeats...). `DIR/records.jsonl` is append-only and fsynced, one record per proof, so a
run killed at any moment resumes with `--resume` without losing or duplicating a record. A
resume whose manifest differs is refused, naming the fields that changed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from proofcheck.io import JsonlAppender, read_jsonl_tolerant, write_json_atomic


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
        self.records: list[dict[str, Any]] = read_jsonl_tolerant(records_path)
        self.done = {self.key(r) for r in self.records}
        if len(self.done) != len(self.records):
            raise RunDirError(f"{records_path} holds duplicate records; it was not written by proofcheck")
        self._appender = JsonlAppender(records_path)

    def key(self, record: dict[str, Any]) -> tuple:
        return tuple(record[f] for f in self.key_fields)

    def append(self, record: dict[str, Any]) -> None:
        """Persist one record (fsynced) unless its key is already done."""
        k = self.key(record)
        if k in self.done:
            raise RunDirError(f"record {k} written twice")
        self._appender.append(record)
        self.records.append(record)
        self.done.add(k)

    def close(self) -> None:
        self._appender.close()


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
        task = bar.add_task(label, total=len(items) + len(run.done), completed=len(run.done))
        for fut in asyncio.as_completed([one(i) for i in items]):
            run.append(await fut)
            bar.advance(task)
