"""What prompt a trained verifier saw: the card written beside its weights.

A verifier trained with the reference solution in its prompt and evaluated without it (or the
reverse) is evaluated off its training distribution. Training (`train/grpo.py`) writes
`proofcheck_prompt.json` into every model folder it saves (merged weights, LoRA adapter) and records
the same setting in `run_summary.json`; `proofcheck score verifier --model DIR` reads it and warns
when its `--with-reference` differs.

Example:
    >>> reference_mismatch({"with_reference": True}, False)
    'trained with the reference solution in its prompt, evaluated without it (add --with-reference to match)'
    >>> reference_mismatch({"with_reference": False}, False) is None
    True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CARD_FILE = "proofcheck_prompt.json"


def write_prompt_card(model_dir: str | Path, with_reference: bool, prompt_sha256: str | None = None) -> Path:
    """Write the card into `model_dir` (atomically); returns its path."""
    from proofcheck.io import write_json_atomic

    path = Path(model_dir) / CARD_FILE
    write_json_atomic(path, {"with_reference": bool(with_reference), "prompt_sha256": prompt_sha256,
                             "written_by": "proofcheck train/grpo.py"})
    return path


def read_prompt_card(model_dir: str | Path) -> dict[str, Any] | None:
    """The card of a model folder, or None when the folder has none (not trained by proofcheck)."""
    path = Path(model_dir) / CARD_FILE
    if not path.is_file():
        return None
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    return card if isinstance(card, dict) and isinstance(card.get("with_reference"), bool) else None


def reference_mismatch(card: dict[str, Any] | None, with_reference: bool) -> str | None:
    """A warning when the card's training setting differs from this evaluation's, else None."""
    if card is None or card["with_reference"] == with_reference:
        return None
    if card["with_reference"]:
        return ("trained with the reference solution in its prompt, evaluated without it "
                "(add --with-reference to match)")
    return ("trained without the reference solution in its prompt, evaluated with it "
            "(drop --with-reference to match)")
