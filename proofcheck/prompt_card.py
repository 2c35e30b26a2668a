"""What prompt a trained verifier saw: the card written beside its weights.

A verifier trained with the reference solution in its prompt and evaluated without it (or the
reverse) is evaluated off its training distribution. Training (`train/grpo.py`) writes
`proofcheck_prompt.json` into every model folder it saves (merged weights, LoRA adapter) and records
the same setting in `run_summary.json`; `proofcheck score verifier --model DIR` reads it and warns
when its `--with-reference` differs.

The card also records the prompt style (`proofcheck.protocol.PROMPT_STYLES`) the model was trained
with; `serve`, `verify` and `score verifier` use it by default, and warn when an explicit
`--prompt-style` differs. A card written before styles existed reads as "full".

And it records how the model generated in training: the chat template's options
(`chat_template_kwargs`, e.g. Qwen3's `{"enable_thinking": true}`) and the completion length
(`max_completion_length`). A thinking verifier served with the template's other setting, or cut
at 1024 tokens after training at 8192, writes passes that count invalid; so `serve`, `verify` and
`score verifier` default to the card's values (`generation_defaults`). An explicit flag still wins;
a smaller token limit than the card's, or other template options, is warned about. A card written
before these fields existed records neither (the commands' own defaults apply).

Example:
    >>> reference_mismatch({"with_reference": True}, False)
    'trained with the reference solution in its prompt, evaluated without it (add --with-reference to match)'
    >>> reference_mismatch({"with_reference": False}, False) is None
    True
    >>> choose_style(None, {"with_reference": False, "prompt_style": "compact"})
    ('compact', None)
    >>> choose_style("full", {"with_reference": False, "prompt_style": "compact"})[1]
    'trained with the compact prompt style, run with full (drop --prompt-style to match)'
    >>> card = {"with_reference": False, "chat_template_kwargs": {"enable_thinking": True},
    ...         "max_completion_length": 8192}
    >>> generation_defaults(card, None, None)
    GenerationDefaults(chat_template_kwargs={'enable_thinking': True}, max_tokens=8192, warnings=[])
    >>> generation_defaults(card, None, 1024).warnings[0][:62]
    'trained with completions of up to 8192 tokens, run with --max-'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofcheck.protocol import DEFAULT_PROMPT_STYLE, PROMPT_STYLES

CARD_FILE = "proofcheck_prompt.json"


DEFAULT_STYLE = DEFAULT_PROMPT_STYLE  # what a card without `prompt_style` (written before styles existed) means
DEFAULT_MAX_TOKENS = 1024  # per pass, where neither a flag nor the card sets it (serve/verifier.py's default)
DEFAULT_MODEL_LEN = 4096  # the engine's context where the card asks for no more
PROMPT_ROOM = 4096  # context kept for the prompt above the completion length (a long proof's prompt fits)


def write_prompt_card(model_dir: str | Path, with_reference: bool, prompt_sha256: str | None = None,
                      prompt_style: str = DEFAULT_STYLE, written_by: str = "proofcheck train/grpo.py",
                      chat_template_kwargs: dict[str, Any] | None = None,
                      max_completion_length: int | None = None) -> Path:
    """Write the card into `model_dir` (atomically); returns its path. An unknown style is a ValueError.

    `chat_template_kwargs`: the template options the training prompts were rendered with ({} = the
    template's defaults); `max_completion_length`: the most tokens a training completion had (None:
    not bounded by training, e.g. the supervised warm-up).
    """
    from proofcheck.io import write_json_atomic
    from proofcheck.protocol import style_texts

    style_texts(prompt_style)  # raises on an unknown style, naming the choices
    if max_completion_length is not None and int(max_completion_length) < 1:
        raise ValueError(f"max_completion_length must be >= 1, got {max_completion_length}")
    path = Path(model_dir) / CARD_FILE
    write_json_atomic(path, {"with_reference": bool(with_reference), "prompt_sha256": prompt_sha256,
                             "prompt_style": prompt_style, "written_by": written_by,
                             "chat_template_kwargs": dict(chat_template_kwargs or {}),
                             "max_completion_length": None if max_completion_length is None
                             else int(max_completion_length)})
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


def weights_card(model: str | Path, adapter: str | Path | None = None) -> dict[str, Any] | None:
    """The card of the weights a request runs on: the LoRA adapter's first (its training wrote the
    prompt the requests use), else the base model folder's; None when neither has one.

    `proofcheck serve` and `proofcheck verify --model` both read it this way, so a model verifies
    with the same settings in-process and behind the service.
    """
    return (read_prompt_card(adapter) if adapter else None) or read_prompt_card(model)


def weights_folder(model: str | Path | None, adapter: str | Path | None = None) -> str:
    """The folder a warning about the weights names: the LoRA adapter's, else the model's (as `weights_card`)."""
    return str(adapter or model)


def card_style(card: dict[str, Any] | None) -> str:
    """The prompt style a card records: "full" for no card or a card written before styles existed.

    A style this version cannot render is a ValueError (never guessed), with the way out.
    """
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


@dataclass
class GenerationDefaults:
    """What a run generates with: the chat template options, the tokens per pass, and why it warned."""

    chat_template_kwargs: dict[str, Any]
    max_tokens: int
    warnings: list[str] = field(default_factory=list)

    @property
    def max_model_len(self) -> int:
        """The engine context that holds a prompt and a full-length pass: 4096 up to the default
        1024 tokens a pass (what every engine had before cards recorded a length), else the pass
        plus 4096 tokens of prompt."""
        return DEFAULT_MODEL_LEN if self.max_tokens <= DEFAULT_MAX_TOKENS else self.max_tokens + PROMPT_ROOM


def card_chat_template_kwargs(card: dict[str, Any] | None) -> dict[str, Any] | None:
    """The template options a card records, or None when it records none (no card, an older card)."""
    value = card.get("chat_template_kwargs") if card else None
    return dict(value) if isinstance(value, dict) else None


def card_max_tokens(card: dict[str, Any] | None) -> int | None:
    """The completion length a card records, or None when it records none."""
    value = card.get("max_completion_length") if card else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def generation_defaults(card: dict[str, Any] | None, chat_template_kwargs: dict[str, Any] | None,
                        max_tokens: int | None, fallback_max_tokens: int = DEFAULT_MAX_TOKENS) -> GenerationDefaults:
    """The settings to generate with: each explicit flag (not None) wins, else the card's, else the default.

    Warns when an explicit `--max-tokens` is below the card's completion length (passes the model
    would finish get cut, and a cut pass is invalid) and when explicit template options differ from
    the card's (the model sees prompts rendered unlike its training prompts).
    """
    trained_ctk, trained_len = card_chat_template_kwargs(card), card_max_tokens(card)
    warnings = []
    if chat_template_kwargs is None:
        ctk = trained_ctk or {}
    else:
        ctk = dict(chat_template_kwargs)
        if trained_ctk is not None and ctk != trained_ctk:
            warnings.append(f"trained with chat template options {json.dumps(trained_ctk, sort_keys=True)}, run "
                            f"with {json.dumps(ctk, sort_keys=True)} (drop --chat-template-kwargs to match)")
    if max_tokens is None:
        tokens = trained_len or fallback_max_tokens
    else:
        tokens = max_tokens
        if trained_len is not None and max_tokens < trained_len:
            warnings.append(f"trained with completions of up to {trained_len} tokens, run with --max-tokens "
                            f"{max_tokens}: longer passes are cut and count invalid (drop --max-tokens to use "
                            f"{trained_len})")
    return GenerationDefaults(ctk, tokens, warnings)


# -- the calibrated k-pass rule (proofcheck.calibration): `proofcheck calibrate` and training's final
# held-out evaluation write it; `serve --rule card`, `verify --rule card` and `score prover` read it

def read_calibration(model_dir: str | Path) -> dict[str, Any] | None:
    """The card's `calibration` record, or None (no card, or a card without one)."""
    path = Path(model_dir) / CARD_FILE
    try:
        card = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except ValueError:
        return None
    value = card.get("calibration") if isinstance(card, dict) else None
    return value if isinstance(value, dict) else None


def write_calibration(model_dir: str | Path, record: dict[str, Any]) -> Path:
    """Store `record` (`proofcheck.calibration.calibration_record`) in the folder's card, keeping the
    rest of the card; a folder without a card gets a card holding only the calibration (its other
    settings stay unknown, so the commands' defaults apply). Returns the card's path."""
    from proofcheck.io import write_json_atomic

    card_rule({"calibration": record}, str(model_dir))  # refuse to write a record nobody could serve
    path = Path(model_dir) / CARD_FILE
    card: dict[str, Any] = {}
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
            card = old if isinstance(old, dict) else {}
        except ValueError:
            card = {}
    card["calibration"] = record
    write_json_atomic(path, card)
    return path


def card_rule(card: dict[str, Any] | None, where: str = "the model") -> tuple[str, int, str]:
    """(rule `at_least:t`, passes k, why) that `--rule card` serves: the card's calibrated choice.

    ValueError with the fix when there is none (no card, or a card never calibrated) or it is malformed.
    """
    from proofcheck.decision import check_rule

    record = (card or {}).get("calibration")
    if not isinstance(record, dict):
        raise ValueError(f"--rule card: {where} has no calibrated rule in its {CARD_FILE}; run `proofcheck calibrate "
                         "--model DIR --data labelled.jsonl` first (or a GRPO run with a held-out evaluation writes "
                         "it), or pick a rule: unanimous, majority, any, at_least:T")
    rule, passes = record.get("rule"), record.get("passes")
    try:
        if not isinstance(passes, int) or isinstance(passes, bool):
            raise ValueError(f"passes {passes!r} is not a whole number")
        check_rule(str(rule), passes)
    except ValueError as e:
        raise ValueError(f"--rule card: {where}'s {CARD_FILE} holds a malformed calibration ({e}); rerun "
                         "`proofcheck calibrate`, or pick a rule: unanimous, majority, any, at_least:T") from e
    from proofcheck.calibration import describe

    try:
        why = describe(record)
    except (KeyError, TypeError, ValueError):
        why = str(record.get("reason") or "calibrated")
    return str(rule), passes, why
