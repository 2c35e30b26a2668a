"""Request and response models of the verification service (pydantic), and its error shape.

Errors use OpenAI's shape: `{"error": {"message", "type", "code"}}`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from proofcheck.protocol import DEFAULT_PROMPT_STYLE
from proofcheck.verification import VerificationResult

MAX_PASSES = 64


class VerifyRequest(BaseModel):
    """One proof to verify: exactly one of `proof` (raw text, split into steps) or `steps`."""

    model_config = ConfigDict(extra="forbid")

    problem: str = Field(min_length=1, description="the problem statement")
    proof: str | None = Field(None, description="raw proof text; split on <step> tags, else blank lines")
    steps: list[str] | None = Field(None, description="the proof as a list of steps (index 0 first)")
    reference_solution: str | None = Field(None, description="optional reference solution shown to the verifier")
    passes: int | None = Field(None, ge=1, le=MAX_PASSES, description="k passes (default: the server's --passes)")
    rule: str | None = Field(None, description="decision rule: unanimous, majority, any, at_least:T (accept iff at "
                             "least T of the k passes accept), or card (the model's calibrated rule); default: "
                             "the server's --rule")
    all_passes: bool = Field(False, description="run all k passes even when the decision is fixed early")
    seed: int | None = Field(None, description="sampling seed (pass i uses seed + i)")
    model: str | None = Field(None, description="served model or LoRA adapter name (server default)")
    max_tokens: int | None = Field(None, ge=1, description="max tokens per pass, at most the server's --max-tokens")

    @field_validator("rule")
    @classmethod
    def _rule(cls, value: str | None) -> str | None:
        from proofcheck.decision import check_rule_name

        return None if value is None else check_rule_name(value, allow_card=True)  # T against k: the service

    @model_validator(mode="after")
    def _one_proof(self) -> VerifyRequest:
        if (self.proof is None) == (self.steps is None):
            raise ValueError("give exactly one of `proof` (text) or `steps` (list of strings)")
        if self.steps is not None:
            if not self.steps:
                raise ValueError("`steps` is empty: a proof needs at least one step")
            empty = [i for i, s in enumerate(self.steps) if not s.strip()]
            if empty:
                raise ValueError(f"`steps[{empty[0]}]` is empty: every step must be non-empty text")
        return self

    def proof_chars(self) -> int:
        return len(self.proof) if self.proof is not None else sum(len(s) for s in self.steps or [])


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[VerifyRequest] = Field(min_length=1, description="verify requests, answered in order")


class PassOut(BaseModel):
    status: Literal["valid", "invalid", "cancelled", "error"]  # error: the engine failed, no answer
    verdict: Literal["accept", "reject"] | None = None
    first_error_step: int | None = None
    flagged_steps: list[int] = Field(default_factory=list)
    invalid_reason: str | None = None
    text: str = ""
    finish_reason: str | None = None
    completion_tokens: int = 0
    error: str | None = None
    error_status: int | None = None


class Votes(BaseModel):
    accept: int = 0
    reject: int = 0
    invalid: int = 0
    cancelled: int = 0
    error: int = 0


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class VerifyResponse(BaseModel):
    decision: Literal["accept", "reject"]
    rule: str
    model: str | None = None
    passes: list[PassOut]
    votes: Votes
    first_error_step_votes: dict[str, int]
    usage: Usage
    latency_s: float

    @classmethod
    def from_result(cls, r: VerificationResult, model: str | None = None) -> VerifyResponse:
        return cls(decision=r.decision, rule=r.rule, model=model,
                   passes=[PassOut(**p.to_dict()) for p in r.passes], votes=Votes(**r.votes),
                   first_error_step_votes=r.first_error_step_votes,
                   usage=Usage(prompt_tokens=r.prompt_tokens, completion_tokens=r.completion_tokens,
                               total_tokens=r.prompt_tokens + r.completion_tokens),
                   latency_s=round(r.latency_s, 6))


class BatchResponse(BaseModel):
    results: list[VerifyResponse]


class Health(BaseModel):
    status: Literal["ok", "draining"]
    service: str
    engine: str
    model: str
    models: list[str]
    passes: int
    rule: str
    max_tokens: int
    in_flight: int
    max_queue: int
    # the prompt the served model was trained on (its proofcheck_prompt.json), None when unknown
    trained_with_reference: bool | None = None
    # the verifier prompt style this service renders (proofcheck.protocol.PROMPT_STYLES): by default the
    # one in the model's proofcheck_prompt.json, else full; `proofcheck serve --prompt-style` overrides it
    prompt_style: str = DEFAULT_PROMPT_STYLE
    # the chat template options every prompt is rendered with: by default those in the model's
    # proofcheck_prompt.json (what it was trained with); `proofcheck serve --chat-template-kwargs` overrides them
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    # where `rule` (and `passes`) come from: "default" (the paper's unanimous), "flag" (--rule), or "card" (the
    # rule calibrated for the model, stored in its proofcheck_prompt.json: `proofcheck serve --rule card`)
    rule_source: Literal["default", "flag", "card"] = "default"
    rule_reason: str = "the paper's pessimistic rule: accept only if every pass accepts"
    # the model card's calibrated rule {rule, passes, reason} whether served or not; requests may ask for it
    # with rule "card"; None when the card has none
    card_rule: dict[str, Any] | None = None


class ErrorDetail(BaseModel):
    message: str
    type: str
    code: Any = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


def error_body(message: str, type: str, code: Any = None) -> dict[str, Any]:
    """`{"error": {"message", "type", "code"}}` (OpenAI's shape)."""
    return ErrorResponse(error=ErrorDetail(message=message, type=type, code=code)).model_dump()
