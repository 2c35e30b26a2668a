"""The annotation service: the proof queue, label validation, the journal and the output files.

Built once when `proofcheck annotate` starts and kept on `app.state.service`. Every save is
validated with the `proofcheck.schemas` label rules (`AnnotatedProof`) plus two rules of the
annotation protocol (recoverable steps come before the fatal one; a flawed proof needs a
reviewer comment), appended to an fsynced journal, and only then acknowledged. The output
JSONL (one record per (proof, annotator)) and the broken-items file are rebuilt atomically
from the journal after each save and at start-up, so a SIGKILL at any moment loses nothing
that was acknowledged, and an edit simply replaces the earlier entry of the same key.

Example:
    >>> svc = AnnotationService.open("proofs.jsonl", "annotated.jsonl")  # doctest: +SKIP
    >>> svc.save("alice", "p1", SaveRequest(first_fatal_error_step=2, recoverable_error_steps=[0],
    ...                                      reviewer_comment="step 2 divides by zero"))  # doctest: +SKIP
"""

from __future__ import annotations

import fcntl
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from proofcheck.data.annotate.models import (
    BrokenRequest,
    ItemResponse,
    MyWork,
    Progress,
    QueueEntry,
    QueueItem,
    QueueResponse,
    SaveRequest,
)
from proofcheck.data.loaders import DataError, validate_jsonl
from proofcheck.io import JsonlAppender, read_jsonl_tolerant, write_jsonl_atomic
from proofcheck.schemas import AnnotatedProof, Annotation

# Fields an input record may carry from an earlier annotation; the output sets them afresh.
_LABEL_FIELDS = ("annotation", "is_correct", "first_error_step", "annotator", "created_at", "updated_at",
                 "report_error_case", "report_reason")


class ServiceError(Exception):
    """A request the service refuses; `status` is the HTTP status the API answers with."""

    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


def sidecar_paths(out: str | Path) -> tuple[Path, Path]:
    """(broken-items file, journal) next to `out`: X.jsonl -> X.broken.jsonl, X.journal.jsonl."""
    out = Path(out)
    stem = out.name[: -len(".jsonl")] if out.name.endswith(".jsonl") else out.name
    return out.with_name(f"{stem}.broken.jsonl"), out.with_name(f"{stem}.journal.jsonl")


def load_queue(path: str | Path) -> list[tuple[QueueItem, dict[str, Any]]]:
    """Read the proofs to annotate; raise `DataError` naming file:line: field for each bad record."""
    items, problems = validate_jsonl(path, QueueItem, ("proof_id",))
    if problems:
        raise DataError(problems)
    if not items:
        raise DataError([f"{path}: no records to annotate"])
    return items


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "<record>"


def _messages(e: ValidationError) -> str:
    parts = []
    for d in e.errors():
        msg = d["msg"].removeprefix("Value error, ")
        parts.append(f"{_loc(d['loc'])}: {msg}" if d["loc"] else msg)
    return "; ".join(parts)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def build_record(raw: dict[str, Any], annotator: str, req: SaveRequest, created_at: str,
                 updated_at: str) -> dict[str, Any]:
    """The AdvancedMathBench-format output record for one annotation; raises ServiceError(422).

    Checks, in order: the annotation's own shape (`Annotation`), the step range against the
    proof (`AnnotatedProof`), then the protocol rules: recoverable steps only before the fatal
    one, and a reviewer comment on every flawed proof.
    """
    try:
        ann = Annotation.model_validate(req.model_dump())
    except ValidationError as e:
        raise ServiceError(422, _messages(e)) from e
    base = {k: v for k, v in raw.items() if k not in _LABEL_FIELDS}
    record = {**base, "annotation": ann.model_dump(), "is_correct": ann.is_correct,
              "first_error_step": ann.first_error_step, "origin": "expert", "annotator": annotator,
              "created_at": created_at, "updated_at": updated_at}
    try:
        AnnotatedProof.model_validate(record)
    except ValidationError as e:
        raise ServiceError(422, _messages(e)) from e
    fatal = ann.first_fatal_error_step
    late = [s for s in ann.recoverable if fatal >= 0 and s >= fatal]
    if late:
        raise ServiceError(422, f"recoverable_error_steps: {late} are not before the fatal step {fatal}; "
                                "only errors before the first fatal one are recorded",
                           "recoverable_error_steps")
    if not ann.is_correct and not ann.reviewer_comment.strip():
        raise ServiceError(422, "reviewer_comment: a flawed proof needs a reviewer comment saying what is wrong",
                           "reviewer_comment")
    return record


class AnnotationService:
    """Queue state and persistence for one `proofcheck annotate` run (thread-safe)."""

    def __init__(self, items: list[tuple[QueueItem, dict[str, Any]]], input_path: Path, out: Path,
                 entries: list[dict[str, Any]], journal: JsonlAppender, lock_fd: int):
        self.input_path, self.out = input_path, out
        self.broken_path, self.journal_path = sidecar_paths(out)
        self._items = [it for it, _ in items]
        self._raw = {it.proof_id: raw for it, raw in items}
        self._index = {it.proof_id: i for i, it in enumerate(self._items)}
        self._latest: dict[tuple[str, str], dict[str, Any]] = {}
        for entry in entries:
            self._latest[(entry["proof_id"], entry["annotator"])] = entry
        self._journal, self._lock_fd = journal, lock_fd
        self._mutex = threading.Lock()

    @classmethod
    def open(cls, input_path: str | Path, out: str | Path) -> AnnotationService:
        """Load the queue and replay the journal; refuse a second writer or an orphaned output."""
        input_path, out = Path(input_path), Path(out)
        items = load_queue(input_path)
        _, journal_path = sidecar_paths(out)
        if out.resolve() in (input_path.resolve(), journal_path.resolve()):
            raise ValueError(f"--out {out} must differ from the input and from the journal")
        had_journal = journal_path.exists() and journal_path.stat().st_size > 0
        if not had_journal and out.exists() and out.stat().st_size > 0:
            raise ValueError(f"{out} exists but its journal {journal_path} does not: the output is rebuilt from "
                             "the journal, so this run would overwrite it. Choose another --out or move the file.")
        out.parent.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(journal_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            os.close(lock_fd)
            raise ValueError(f"{journal_path} is locked: another `proofcheck annotate` writes to {out}") from e
        try:
            entries = read_jsonl_tolerant(journal_path)  # drops a torn last line (SIGKILL mid-write)
            for n, entry in enumerate(entries, 1):
                if not (isinstance(entry, dict) and {"kind", "proof_id", "annotator", "record"} <= entry.keys()):
                    raise ValueError(f"{journal_path}:{n}: not a journal entry of `proofcheck annotate`")
            svc = cls(items, input_path, out, entries, JsonlAppender(journal_path), lock_fd)
        except Exception:
            os.close(lock_fd)
            raise
        if entries:
            svc._rebuild()  # a crash between journal append and rebuild left the outputs stale
        return svc

    def close(self) -> None:
        """Close the journal and release the lock (the kernel also releases it on SIGKILL)."""
        self._journal.close()
        os.close(self._lock_fd)

    @property
    def total(self) -> int:
        return len(self._items)

    @property
    def n_saved(self) -> int:
        """Saved (proof, annotator) entries, annotations and broken reports together."""
        return len(self._latest)

    # ---- reads -------------------------------------------------------------------------
    def _status(self, proof_id: str, annotator: str) -> str:
        entry = self._latest.get((proof_id, annotator))
        return "todo" if entry is None else entry["kind"]

    def progress(self, annotator: str) -> Progress:
        done = sum(self._status(it.proof_id, annotator) != "todo" for it in self._items)
        return Progress(done=done, total=self.total)

    def queue(self, annotator: str) -> QueueResponse:
        """The queue with this annotator's status per item and where to resume."""
        with self._mutex:
            rows = [QueueEntry(index=i, proof_id=it.proof_id, problem_id=it.problem_id, subject=it.subject,
                               n_steps=len(it.steps), status=self._status(it.proof_id, annotator))
                    for i, it in enumerate(self._items)]
            todo = [r.index for r in rows if r.status == "todo"]
            return QueueResponse(annotator=annotator, items=rows, progress=self.progress(annotator),
                                 resume_index=todo[0] if todo else self.total - 1)

    def _item(self, proof_id: str) -> QueueItem:
        if proof_id not in self._index:
            raise ServiceError(404, f"no proof with proof_id {proof_id!r} in {self.input_path}", "proof_id")
        return self._items[self._index[proof_id]]

    def item(self, annotator: str, proof_id: str) -> ItemResponse:
        """One item to annotate, with this annotator's earlier work on it (if any)."""
        with self._mutex:
            it = self._item(proof_id)
            entry = self._latest.get((proof_id, annotator))
            mine = None
            if entry is not None:
                rec = entry["record"]
                mine = MyWork(kind=entry["kind"], annotation=rec.get("annotation"), reason=rec.get("report_reason"),
                              created_at=rec["created_at"], updated_at=rec["updated_at"])
            n_annotators = sum(1 for (pid, _) in self._latest if pid == proof_id)
            return ItemResponse(
                index=self._index[proof_id], total=self.total, proof_id=it.proof_id, problem_id=it.problem_id,
                problem=it.problem, reference_solution=it.reference_solution,
                reference_answer=it.reference_answer, domain=it.domain, subject=it.subject, policy=it.policy,
                steps=it.steps, verifier_passes=it.verifier_passes or [], selection=it.selection_stats(),
                mine=mine, n_annotators=n_annotators)

    # ---- writes ------------------------------------------------------------------------
    def save(self, annotator: str, proof_id: str, req: SaveRequest) -> dict[str, Any]:
        """Validate and persist an annotation (replacing this annotator's earlier one)."""
        with self._mutex:
            self._item(proof_id)
            now = _now()
            created = self._created_at(proof_id, annotator, now)
            record = build_record(self._raw[proof_id], annotator, req, created, now)
            self._commit("annotated", proof_id, annotator, record)
            return record

    def report_broken(self, annotator: str, proof_id: str, req: BrokenRequest) -> dict[str, Any]:
        """Record that the item itself is broken; it goes to the broken-items file instead."""
        with self._mutex:
            self._item(proof_id)
            now = _now()
            base = {k: v for k, v in self._raw[proof_id].items() if k not in _LABEL_FIELDS}
            record = {**base, "report_error_case": True, "report_reason": req.reason, "annotator": annotator,
                      "created_at": self._created_at(proof_id, annotator, now), "updated_at": now}
            self._commit("broken", proof_id, annotator, record)
            return record

    def _created_at(self, proof_id: str, annotator: str, now: str) -> str:
        earlier = self._latest.get((proof_id, annotator))
        return earlier["record"]["created_at"] if earlier else now

    def _commit(self, kind: str, proof_id: str, annotator: str, record: dict[str, Any]) -> None:
        entry = {"kind": kind, "proof_id": proof_id, "annotator": annotator, "record": record}
        self._journal.append(entry)  # fsynced: from here on the save survives a crash
        self._latest[(proof_id, annotator)] = entry
        self._rebuild()

    def _rebuild(self) -> None:
        """Rewrite the output and broken files atomically from the latest journal entries."""
        def order(key: tuple[str, str]) -> tuple[int, str]:
            return (self._index.get(key[0], len(self._items)), key[1])

        keys = sorted(self._latest, key=order)  # orphans (proof no longer in the input) last
        annotated = [self._latest[k]["record"] for k in keys if self._latest[k]["kind"] == "annotated"]
        broken = [self._latest[k]["record"] for k in keys if self._latest[k]["kind"] == "broken"]
        write_jsonl_atomic(self.out, annotated)
        if broken or self.broken_path.exists():
            write_jsonl_atomic(self.broken_path, broken)
