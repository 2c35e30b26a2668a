"""Helpers, not a script: the one way a benchmark that reads finished runs publishes its Markdown table."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def publish(out: Path, name: str, data: Any, table_of: Callable[[Any], str], json_path: str | None) -> int:
    """Print `table_of(data)`, write it to `out/name` (and `data` as JSON to `json_path`); 0, or 1 when no run
    in `out` has finished (`data` empty)."""
    if not data:
        print(f"no finished run in {out}", file=sys.stderr)
        return 1
    table = table_of(data)
    print(table)
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(table + "\n", encoding="utf-8")
    if json_path:
        Path(json_path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return 0
