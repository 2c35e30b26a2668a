"""The strict verifier-output parser (SPEC section 2).

`parse_verifier_output(text, n_steps, finish_reason)` returns a `ParseResult` that is either
valid (with a `Verdict`) or invalid (with one reason from `INVALID_REASONS`). It reads only
the final answer: thinking is stripped first, and every verdict tag must occur exactly once,
so text echoed from a proof cannot add a second verdict without making the output invalid.

Example:
    >>> r = parse_verifier_output(
    ...     "<assessment>ok</assessment><errors></errors><first_error_step>-1</first_error_step>", 3)
    >>> r.valid, r.verdict.accepts
    (True, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from proofcheck.protocol import VERDICT_TAGS

INVALID_REASONS = (
    "non_stop_finish",
    "unfinished_thinking",
    "empty_output",
    "missing_tag",
    "duplicate_tag",
    "bad_step_index",
    "unlabelled_error",
    "inconsistent",
    "empty_assessment",
)

_THINK_CLOSE = re.compile(r"</think\s*>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think\s*>", re.IGNORECASE)
_HARMONY_FINAL = "<|channel|>final<|message|>"
_HARMONY_END = re.compile(r"<\|(?:end|return|call)\|>\s*$")
_INT = re.compile(r"^[+-]?\d+$")
_STEP_REF = re.compile(r"\bstep\s*#?\s*(\d+)\b", re.IGNORECASE)
_ITEM_START = re.compile(r"^\s*(?:[-*\u2022]\s*|\d+[.)]\s+)?step\s*#?\s*(\d+)\b", re.IGNORECASE)
_NONE_WORDS = {"", "none", "none.", "n/a", "no errors", "no errors."}


@dataclass(frozen=True)
class ErrorItem:
    """One item of `<errors>`: the step it names and its text."""

    step: int
    text: str


@dataclass(frozen=True)
class Verdict:
    """A valid verifier answer."""

    assessment: str
    errors: tuple[ErrorItem, ...]
    first_error_step: int
    flagged_steps: tuple[int, ...]

    @property
    def accepts(self) -> bool:
        """True when the verifier says the proof is valid."""
        return self.first_error_step == -1


@dataclass(frozen=True)
class ParseResult:
    """Either `verdict` is set (valid) or `invalid_reason` is (invalid)."""

    verdict: Verdict | None = None
    invalid_reason: str | None = None
    detail: str = ""
    final_text: str = field(default="", repr=False)

    @property
    def valid(self) -> bool:
        return self.verdict is not None


def _invalid(reason: str, detail: str, final: str = "") -> ParseResult:
    assert reason in INVALID_REASONS, reason
    return ParseResult(invalid_reason=reason, detail=detail, final_text=final)


def strip_thinking(text: str) -> str | None:
    """The final answer of a completion, or None when thinking never finished.

    Text after the last `</think>`; a Harmony completion's `final` channel; an unclosed
    `<think>` (or a Harmony completion without a final channel) has no final answer.
    """
    if "<|channel|>" in text:
        idx = text.rfind(_HARMONY_FINAL)
        if idx < 0:
            return None
        return _HARMONY_END.sub("", text[idx + len(_HARMONY_FINAL):])
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        return text[closes[-1].end():]
    if _THINK_OPEN.search(text):
        return None
    return text


def _tag_body(final: str, tag: str) -> tuple[str | None, ParseResult | None]:
    opens = re.findall(rf"<\s*{tag}\s*>", final, re.IGNORECASE)
    closes = re.findall(rf"<\s*/\s*{tag}\s*>", final, re.IGNORECASE)
    if len(opens) > 1 or len(closes) > 1:
        return None, _invalid("duplicate_tag", f"<{tag}> appears more than once", final)
    if not opens or not closes:
        return None, _invalid("missing_tag", f"<{tag}>...</{tag}> not found", final)
    m = re.search(rf"<\s*{tag}\s*>(.*?)<\s*/\s*{tag}\s*>", final, re.IGNORECASE | re.DOTALL)
    if m is None:
        return None, _invalid("missing_tag", f"</{tag}> comes before <{tag}>", final)
    return m.group(1).strip(), None


def _error_items(body: str, n_steps: int, final: str) -> tuple[list[ErrorItem], ParseResult | None]:
    """Split `<errors>` into items; every item must name an in-range step."""
    if body.strip().lower() in _NONE_WORDS:
        return [], None
    items: list[ErrorItem] = []
    for line in body.splitlines():
        if not line.strip():
            continue
        m = _ITEM_START.match(line) or _STEP_REF.search(line)
        if m is None:
            if items:  # a continuation line of the previous item
                prev = items[-1]
                items[-1] = ErrorItem(prev.step, prev.text + "\n" + line.strip())
                continue
            return [], _invalid("unlabelled_error", f"error item names no step: {line.strip()[:80]!r}", final)
        step = int(m.group(1))
        if not 0 <= step < n_steps:
            return [], _invalid("bad_step_index", f"error item names step {step}, proof has {n_steps}", final)
        items.append(ErrorItem(step, line.strip()))
    return items, None


def parse_verifier_output(text: str, n_steps: int, finish_reason: str | None = "stop") -> ParseResult:
    """Parse one verifier completion against a proof of `n_steps` steps.

    `finish_reason` is the engine's; anything but "stop" (or None, meaning unknown and
    taken as finished) makes the output invalid, because a cut-off answer is not an answer.
    """
    if finish_reason not in (None, "stop"):
        return _invalid("non_stop_finish", f"generation ended with finish_reason={finish_reason!r}")
    final = strip_thinking(text)
    if final is None:
        return _invalid("unfinished_thinking", "thinking was never closed: no final answer")
    if not final.strip():
        return _invalid("empty_output", "the final answer is empty")
    bodies: dict[str, str] = {}
    for tag in VERDICT_TAGS:
        body, err = _tag_body(final, tag)
        if err is not None:
            return err
        bodies[tag] = body or ""
    if not bodies["assessment"]:
        return _invalid("empty_assessment", "<assessment> is empty", final)
    raw_k = bodies["first_error_step"]
    if not _INT.match(raw_k):
        return _invalid("bad_step_index", f"first_error_step is not an integer: {raw_k[:40]!r}", final)
    k = int(raw_k)
    if not -1 <= k < n_steps:
        return _invalid("bad_step_index", f"first_error_step {k} outside -1..{n_steps - 1}", final)
    items, err = _error_items(bodies["errors"], n_steps, final)
    if err is not None:
        return err
    flagged = tuple(sorted({it.step for it in items}))
    if k == -1 and items:
        return _invalid("inconsistent", "errors listed but first_error_step is -1", final)
    if k >= 0 and not items:
        return _invalid("inconsistent", f"first_error_step is {k} but <errors> is empty", final)
    if k >= 0 and k != flagged[0]:
        return _invalid("inconsistent", f"first_error_step {k} but the first flagged step is {flagged[0]}", final)
    verdict = Verdict(bodies["assessment"], tuple(items), k, flagged)
    return ParseResult(verdict=verdict, final_text=final)


def format_verdict(assessment: str, errors: list[tuple[int, str]], first_error_step: int) -> str:
    """Write a verdict in the protocol format (used for gold answers and tests)."""
    err_lines = "\n".join(f"Step {s}: {t}" for s, t in errors)
    return (f"<assessment>{assessment}</assessment>\n<errors>{err_lines}</errors>\n"
            f"<first_error_step>{first_error_step}</first_error_step>")
