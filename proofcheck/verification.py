"""From raw pass completions to a k-pass verification result (pure, engine-agnostic).

Engines (serve/) produce completions; this module parses each one with the strict parser
and applies a decision rule. Scoring, curation and the HTTP service all build their results
here, so "what counts as an accept" is defined once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from proofcheck.decision import decide, first_error_votes, vote_counts
from proofcheck.parsing import parse_verifier_output


@dataclass
class PassResult:
    """One pass: status valid | invalid | cancelled | error, the verdict when valid.

    "error" is an endpoint failure (HTTP status, timeout, malformed body): the pass has no
    answer at all, so it is neither an invalid output nor a verdict. Runs count it, say they
    are incomplete, and `--resume` retries it.
    """

    status: str
    verdict: str | None = None  # "accept" | "reject" when valid
    first_error_step: int | None = None
    flagged_steps: list[int] = field(default_factory=list)
    invalid_reason: str | None = None
    text: str = ""
    finish_reason: str | None = None
    completion_tokens: int = 0
    error: str | None = None  # transport/engine error, when the pass failed to generate
    error_status: int | None = None  # the HTTP status of that error (None: no response)

    @property
    def outcome(self) -> str:
        """The decision outcome: accept | reject | invalid | cancelled | error."""
        if self.status == "valid":
            return self.verdict or "invalid"
        return self.status

    def to_dict(self) -> dict:
        return asdict(self)


def parse_pass(text: str, n_steps: int, finish_reason: str | None, completion_tokens: int = 0,
               error: str | None = None, error_status: int | None = None) -> PassResult:
    """Parse one completion into a PassResult; an engine error gives status "error", never a verdict."""
    if error is not None:
        return PassResult("error", text=text, finish_reason=finish_reason, completion_tokens=completion_tokens,
                          error=error, error_status=error_status)
    r = parse_verifier_output(text, n_steps, finish_reason)
    if not r.valid:
        return PassResult("invalid", invalid_reason=r.invalid_reason, text=text, finish_reason=finish_reason,
                          completion_tokens=completion_tokens)
    v = r.verdict
    return PassResult("valid", "accept" if v.accepts else "reject", v.first_error_step, list(v.flagged_steps),
                      None, text, finish_reason, completion_tokens)


def error_pass(message: str, status: int | None = None) -> PassResult:
    """A pass that got no answer from the endpoint (see `proofcheck.http_errors`)."""
    return PassResult("error", error=message, error_status=status)


def cancelled_pass() -> PassResult:
    return PassResult("cancelled")


@dataclass
class VerificationResult:
    """The k-pass result for one proof."""

    decision: str
    rule: str
    passes: list[PassResult]
    votes: dict[str, int]
    first_error_step_votes: dict[str, int]
    completion_tokens: int
    prompt_tokens: int = 0
    latency_s: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["passes"] = [p.to_dict() for p in self.passes]
        return d


def summarise(passes: list[PassResult], rule: str, prompt_tokens: int = 0, latency_s: float = 0.0) -> VerificationResult:
    """Decision, vote counts and first-error histogram for a list of passes."""
    outcomes = [p.outcome for p in passes]
    return VerificationResult(
        decision=decide(outcomes, rule),
        rule=rule,
        passes=passes,
        votes=vote_counts(outcomes),
        first_error_step_votes=first_error_votes([p.first_error_step for p in passes if p.status == "valid"]),
        completion_tokens=sum(p.completion_tokens for p in passes),
        prompt_tokens=prompt_tokens,
        latency_s=latency_s,
    )
