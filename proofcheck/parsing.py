"""The verifier-output parser (docs/protocol.md), read as the AdvancedMathBench release reads it.

`parse_verifier_output(text, n_steps, finish_reason)` returns a `ParseResult` that is either
valid (with a `Verdict`) or invalid (with one reason from `INVALID_REASONS`). Every consumer
(scoring, metrics, rewards, serving, curation) calls this one function, so a verdict means the
same thing everywhere. The rules, taken from the release's behaviour:

- the generation must have ended with `finish_reason == "stop"`: a cut-off, aborted or unknown
  (None) ending is not an answer;
- only the final answer is read: text after the last `</think>` (or after a Harmony `final`
  channel marker); an unclosed `<think>` means there is no final answer; an empty one is invalid;
- `<assessment>`, `<errors>` and `<first_error_step>` must each match exactly once as an
  open...close pair (`<tag>` with optional spaces before `>`, `</ tag >`, any case);
- the assessment must be non-empty; `<first_error_step>` must be a plain integer (`-?\\d+`:
  `+1`, `1.0`, `two` are invalid) with `-1 <= k < n_steps`;
- `<errors>` is free text: whatever it says never makes an output invalid. Polarity and the
  first error come from `<first_error_step>` alone.

Our deliberate differences from the release (README, "Deliberate differences"): think tags
match case-insensitively, and a Harmony completion with no `final` channel has no answer.

`Verdict.flagged_steps` is what the structural grader compares: the in-range step labels that
`<errors>` names (`Step 3: ...`), plus the first error step itself.

Example:
    >>> r = parse_verifier_output(
    ...     "<assessment>ok</assessment><errors></errors><first_error_step>-1</first_error_step>", 3, "stop")
    >>> r.valid, r.verdict.accepts
    (True, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from proofcheck.protocol import VERDICT_TAGS

NON_STOP_FINISH = "non_stop_finish"  # the engine did not stop the pass itself: cut at the token limit, or aborted
INVALID_REASONS = (
    NON_STOP_FINISH,
    "unfinished_thinking",
    "empty_output",
    "missing_tag",
    "duplicate_tag",
    "bad_step_index",
    "empty_assessment",
)

_THINK_CLOSE = re.compile(r"</think\s*>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think\s*>", re.IGNORECASE)
_HARMONY_CHANNEL = "<|channel|>"
_HARMONY_FINAL = "<|channel|>final<|message|>"
_HARMONY_END = re.compile(r"<\|(?:end|return|call)\|>\s*$")
_INT = re.compile(r"-?\d+")
_STEP_LABEL = re.compile(r"\bstep\s*#?\s*(\d+)\b", re.IGNORECASE)
_TAG_PAIRS = {tag: re.compile(rf"<{tag}\s*>(.*?)</\s*{tag}\s*>", re.IGNORECASE | re.DOTALL)
              for tag in VERDICT_TAGS}


@dataclass(frozen=True)
class Verdict:
    """A valid verifier answer: the three fields as written, and the steps it flags."""

    assessment: str
    errors: str
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
    """The final answer of a completion, or None when there is none.

    A Harmony completion (it has `<|channel|>`) keeps what follows its last `final` channel
    marker, and has no answer without one. Then the text after the last `</think>` is kept;
    a `<think>` still open after that means thinking never finished (None).
    """
    if _HARMONY_CHANNEL in text:
        idx = text.rfind(_HARMONY_FINAL)
        if idx < 0:
            return None
        text = _HARMONY_END.sub("", text[idx + len(_HARMONY_FINAL):])
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end():]
    if _THINK_OPEN.search(text):
        return None
    return text


def step_labels(errors: str, n_steps: int) -> tuple[int, ...]:
    """The distinct in-range step indices that free-text errors name (`Step 3`, `step #3`), sorted."""
    found = {int(m.group(1)) for m in _STEP_LABEL.finditer(errors)}
    return tuple(sorted(s for s in found if 0 <= s < n_steps))


def parse_verifier_output(text: str, n_steps: int, finish_reason: str | None) -> ParseResult:
    """Parse one verifier completion against a proof of `n_steps` steps (see module docstring).

    `finish_reason` is the engine's; anything but "stop" (None included) makes the output
    invalid. Callers that know a generation finished say so with "stop".
    """
    if finish_reason != "stop":
        return _invalid(NON_STOP_FINISH, f"generation ended with finish_reason={finish_reason!r}, not 'stop'")
    final = strip_thinking(text)
    if final is None:
        return _invalid("unfinished_thinking", "thinking was never closed: no final answer")
    if not final.strip():
        return _invalid("empty_output", "the final answer is empty")
    bodies: dict[str, str] = {}
    for tag, pattern in _TAG_PAIRS.items():
        hits = pattern.findall(final)
        if not hits:
            return _invalid("missing_tag", f"<{tag}>...</{tag}> not found", final)
        if len(hits) > 1:
            return _invalid("duplicate_tag", f"<{tag}>...</{tag}> appears {len(hits)} times", final)
        bodies[tag] = hits[0].strip()
    if not bodies["assessment"]:
        return _invalid("empty_assessment", "<assessment> is empty", final)
    raw_k = bodies["first_error_step"]
    if not _INT.fullmatch(raw_k):
        return _invalid("bad_step_index", f"first_error_step is not an integer: {raw_k[:40]!r}", final)
    k = int(raw_k)
    if not -1 <= k < n_steps:
        return _invalid("bad_step_index", f"first_error_step {k} outside -1..{n_steps - 1}", final)
    flagged = () if k < 0 else tuple(sorted({k, *step_labels(bodies["errors"], n_steps)}))
    verdict = Verdict(bodies["assessment"], bodies["errors"], k, flagged)
    return ParseResult(verdict=verdict, final_text=final)


def format_verdict(assessment: str, errors: list[tuple[int, str]], first_error_step: int) -> str:
    """Write a verdict in the protocol format (used for gold answers and tests)."""
    err_lines = "\n".join(f"Step {s}: {t}" for s, t in errors)
    return (f"<assessment>{assessment}</assessment>\n<errors>{err_lines}</errors>\n"
            f"<first_error_step>{first_error_step}</first_error_step>")


def finish_reason_from_ids(ids: list[int], eos_token_ids: set[int] | frozenset[int] | list[int],
                           max_tokens: int | None) -> str:
    """"stop" or "length" for a generation known only by its token ids (TRL's rewards, HF generate).

    The rule the AdvancedMathBench release applies to local generation: a completion stopped
    when its last token is an end-of-sequence token, or when it is shorter than the token
    limit (a stop string ended it); otherwise the limit cut it ("length"). TRL's own clipped
    ratio uses the same last-token test.

    >>> finish_reason_from_ids([5, 6, 2], {2}, 3), finish_reason_from_ids([5, 6, 7], {2}, 3)
    ('stop', 'length')
    """
    if ids and ids[-1] in set(eos_token_ids):
        return "stop"
    if max_tokens is not None and len(ids) < max_tokens:
        return "stop"
    return "length"
