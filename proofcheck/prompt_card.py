"""What prompt a trained verifier saw: the card written beside its weights.

A verifier trained with the reference solution in its prompt and evaluated without it (or the
reverse) is evaluated off its training distribution. Training (`train/grpo.py`) writes
`proofcheck_prompt.json` into every model folder it saves (merged weights, LoRA adapter) and records
the same setting in `run_summary.json`; `proofcheck score verifier --model DIR` reads it and warns
when its `--with-reference` differs.

The card also records the prompt style (`proofcheck.protocol.PROMPT_STYLES`) the model was trained
with; `serve`, `verify` and `score verifier` use it by default, and warn when an explicit
`--prompt-style` differs. A card written before styles existed reads as "full".

Example:
    >>> reference_mismatch({"with_reference": True}, False)
    'trained with the reference solution in its prompt, evaluated without it (add --with-reference to match)'
    >>> reference_mismatch({"with_reference": False}, False) is None
    True
    >>> choose_style(None, {"with_reference": False, "prompt_style": "compact"})
    ('compact', None)
    >>> choose_style("full", {"with_reference": False, "prompt_style": "compact"})[1]
    'trained with the compact prompt style, run with full (drop --prompt-style to match)'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CARD_FILE = "proofcheck_prompt.json"


DEFAULT_STYLE = "full"  # what a card without `prompt_style` (written before styles existed) means


def write_prompt_card(model_dir: str | Path, with_reference: bool, prompt_sha256: str | None = None,
                      prompt_style: str = DEFAULT_STYLE, written_by: str = "proofcheck train/grpo.py") -> Path:
    """Write the card into `model_dir` (atomically); returns its path. An unknown style is a ValueError."""
    from proofcheck.io import write_json_atomic
    from proofcheck.protocol import style_texts

    style_texts(prompt_style)  # raises on an unknown style, naming the choices
    path = Path(model_dir) / CARD_FILE
    write_json_atomic(path, {"with_reference": bool(with_reference), "prompt_sha256": prompt_sha256,
                             "prompt_style": prompt_style, "written_by": written_by})
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
    if not isinstance(card, dict) or not isinstance(card.get("with_reference"), bool):
        return None
    card.setdefault("prompt_style", DEFAULT_STYLE)  # written before styles existed
    return card


def card_style(card: dict[str, Any] | None) -> str:
    """The prompt style a card records: "full" for no card or a card written before styles existed.

    A style this version cannot render is a ValueError (never guessed), with the way out.
    """
    from proofcheck.protocol import PROMPT_STYLES

    style = card.get("prompt_style", DEFAULT_STYLE) if card else DEFAULT_STYLE
    if style not in PROMPT_STYLES:
        raise ValueError(f"{CARD_FILE}: prompt_style {style!r} is not one of {', '.join(PROMPT_STYLES)} "
                         "(written by another proofcheck version?); pass --prompt-style to choose one")
    return str(style)


def choose_style(flag: str | None, card: dict[str, Any] | None) -> tuple[str, str | None]:
    """(style to use, warning or None): an explicit `--prompt-style` wins, else the card's, else "full".

    The warning says when the explicit flag differs from what the model was trained with.
    """
    if flag is None:
        return card_style(card), None
    from proofcheck.protocol import style_texts

    style_texts(flag)  # an unknown style: ValueError naming the choices
    trained = card.get("prompt_style", DEFAULT_STYLE) if card else None
    if trained is None or flag == trained:
        return flag, None
    return flag, f"trained with the {trained} prompt style, run with {flag} (drop --prompt-style to match)"


def reference_mismatch(card: dict[str, Any] | None, with_reference: bool) -> str | None:
    """A warning when the card's training setting differs from this evaluation's, else None."""
    if card is None or card.get("with_reference") in (None, with_reference):  # None: a service that does not know
        return None
    if card["with_reference"]:
        return ("trained with the reference solution in its prompt, evaluated without it "
                "(add --with-reference to match)")
    return ("trained without the reference solution in its prompt, evaluated with it "
            "(drop --with-reference to match)")
