"""Crash-safe file writing: atomic whole-file writes and fsynced appends."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` so a reader sees the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    done = False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        done = True
    finally:
        if not done:  # interrupted or failed: leave no temp file behind
            Path(tmp).unlink(missing_ok=True)


def write_jsonl_atomic(path: str | Path, records: Iterable[Any]) -> None:
    """Write records as JSONL atomically."""
    write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


class JsonlAppender:
    """Append-only JSONL writer: each record is one write + fsync, so a crash loses at most
    the record being written; a torn last line is dropped by `read_jsonl_tolerant`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a", encoding="utf-8")

    def append(self, record: Any) -> None:
        self._f.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_jsonl_tolerant(path: str | Path) -> list[Any]:
    """Read an append-only JSONL file written by `JsonlAppender`.

    A torn final line (a crash mid-write) is truncated away so the next append starts clean;
    a bad line anywhere else is corruption and raises.
    """
    path = Path(path)
    if not path.exists():
        return []
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    out, good_len = [], 0
    for i, line in enumerate(lines):
        if not line.strip():
            good_len += len(line) + (1 if i < len(lines) - 1 else 0)
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:  # torn tail
                with open(path, "r+b") as f:
                    f.truncate(good_len)
                break
            raise ValueError(f"{path}:{i + 1}: corrupt line in the middle of the file: {e.msg}") from e
        good_len += len(line) + (1 if i < len(lines) - 1 else 0)
    return out
