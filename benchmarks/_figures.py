"""Shared by the benchmarks: machine-readable figures for `run_all.py --json`, the real model, and the trainer's
printed log rows.

A benchmark script calls `emit({"serve.service_vs_engine": 0.93, ...})`; when `run_all.py` runs
it, the environment variable `PROOFCHECK_BENCH_JSON` names a file the figures are merged into
(run alone, `emit` does nothing). Keys are dotted, fixed names (see run_all.py's REQUIRED_KEYS).
(`run_all.py` skips files whose name starts with `_`, so this module is not run as a benchmark.)
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

ENV = "PROOFCHECK_BENCH_JSON"
REPO = Path(__file__).resolve().parents[1]
DEFAULT_REAL_MODEL = REPO / "runs" / "smollm2"


def emit(figures: dict[str, Any]) -> None:
    """Merge `figures` into the JSON file named by $PROOFCHECK_BENCH_JSON (no-op when unset)."""
    path = os.environ.get(ENV)
    if not path:
        return
    p = Path(path)
    current = json.loads(p.read_text()) if p.is_file() and p.stat().st_size else {}
    current.update(figures)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True))
    tmp.replace(p)


def real_model(path: str | None) -> Path:
    """The SmolLM2-135M-Instruct folder: `path`, or runs/smollm2 (built with `build_smollm2` if missing)."""
    from proofcheck.models.smollm2 import build_smollm2, is_built

    out = Path(path) if path else DEFAULT_REAL_MODEL
    if path and not (out / "config.json").is_file():
        raise SystemExit(f"--model {out}: no config.json there; give a model folder, or omit --model to use "
                         f"{DEFAULT_REAL_MODEL} (built with `proofcheck model smollm2 --out {DEFAULT_REAL_MODEL}`)")
    if not path and not is_built(out):
        build_smollm2(out)
    return out


def log_rows(text: str) -> list[dict[str, Any]]:
    """The trainer's printed log dicts (`{'loss': ..., 'num_tokens': ...}`), values as floats where they are."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("{'"):
            continue
        try:
            row = ast.literal_eval(line.strip())
        except (ValueError, SyntaxError):
            continue
        out = {}
        for k, v in row.items():
            try:
                out[k] = float(v)
            except (TypeError, ValueError):
                out[k] = v
        rows.append(out)
    return rows
