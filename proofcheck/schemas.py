"""Record schemas, field names as in the AdvancedMathBench release.

Unknown extra fields are kept (release files load unchanged); the label rules are enforced:
step labels are integers (never booleans), the fatal step is -1 or a valid index, the
recoverable list is exactly `[-1]` or a non-empty list of valid indices, and `is_correct` /
`first_error_step` must agree with the annotation when present.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator

Domain = Literal["ugd", "qe"]
Origin = Literal["expert", "repaired", "synthetic"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", str_strip_whitespace=False)


class Problem(_Record):
    """A ProverBench problem."""

    problem_id: str = Field(min_length=1)
    problem: str = Field(min_length=1)
    reference_solution: str | None = None
    reference_answer: str | None = None
    domain: Domain
    subject: str = ""
    source_id: str | None = None


class Annotation(_Record):
    """An expert's labels for one proof."""

    first_fatal_error_step: StrictInt
    recoverable_error_steps: list[StrictInt]
    reviewer_comment: str = ""
    first_error_reason: str | None = ""
    remark: str | None = ""

    @field_validator("first_fatal_error_step")
    @classmethod
    def _fatal_range(cls, v: int) -> int:
        if v < -1:
            raise ValueError("must be -1 (no fatal error) or a step index >= 0")
        return v

    @field_validator("recoverable_error_steps")
    @classmethod
    def _recoverable_shape(cls, v: list[int]) -> list[int]:
        if v == [-1]:
            return v
        if not v:
            raise ValueError("must be [-1] (none) or a non-empty list of step indices, not []")
        if any(s < 0 for s in v):
            raise ValueError(f"{v}: -1 may only appear alone as [-1]; indices must be >= 0")
        if len(set(v)) != len(v):
            raise ValueError(f"{v}: repeated step index")
        return v

    @property
    def recoverable(self) -> list[int]:
        """Recoverable steps without the -1 marker."""
        return [s for s in self.recoverable_error_steps if s >= 0]

    @property
    def is_correct(self) -> bool:
        return self.first_fatal_error_step == -1 and not self.recoverable

    @property
    def first_error_step(self) -> int:
        labels = self.recoverable + ([self.first_fatal_error_step] if self.first_fatal_error_step >= 0 else [])
        return min(labels) if labels else -1


class CandidateProof(Problem):
    """A proof awaiting curation (selection, annotation): problem fields, `proof_id`, `steps`.

    Any labels it carries are kept as extra fields and not required.
    """

    proof_id: str = Field(min_length=1)
    steps: list[str] = Field(min_length=1)
    policy: str | None = None

    @field_validator("steps")
    @classmethod
    def _steps_nonempty(cls, v: list[str]) -> list[str]:
        for i, s in enumerate(v):
            if not s.strip():
                raise ValueError(f"step {i} is empty")
        return v


class AnnotatedProof(CandidateProof):
    """A VerifierBench / training record: a problem, a stepped proof and its annotation."""

    annotation: Annotation
    is_correct: StrictBool | None = None
    first_error_step: StrictInt | None = None
    origin: Origin | None = None

    @model_validator(mode="after")
    def _labels_agree(self) -> AnnotatedProof:
        n, a = len(self.steps), self.annotation
        if a.first_fatal_error_step >= n:
            raise ValueError(f"annotation.first_fatal_error_step={a.first_fatal_error_step} but the proof has {n} steps")
        bad = [s for s in a.recoverable if s >= n]
        if bad:
            raise ValueError(f"annotation.recoverable_error_steps has {bad} but the proof has {n} steps")
        if self.is_correct is not None and self.is_correct != a.is_correct:
            raise ValueError(f"is_correct={self.is_correct} disagrees with the annotation (implies {a.is_correct})")
        if self.first_error_step is not None and self.first_error_step != a.first_error_step:
            raise ValueError(
                f"first_error_step={self.first_error_step} disagrees with the annotation (implies {a.first_error_step})")
        return self

    @property
    def gold_is_correct(self) -> bool:
        return self.annotation.is_correct

    @property
    def gold_first_error_step(self) -> int:
        return self.annotation.first_error_step


class Submission(_Record):
    """A prover's proof of one problem: raw `proof` text or a `steps` list (exactly one)."""

    problem_id: str = Field(min_length=1)
    sample: StrictInt = Field(ge=0)
    proof: str | None = None
    steps: list[str] | None = None
    policy: str | None = None
    proof_id: str | None = None
    failed: StrictBool = False  # a generation that was truncated/empty: scores 0, never verified

    @model_validator(mode="after")
    def _one_body(self) -> Submission:
        if (self.proof is None) == (self.steps is None) and not self.failed:
            raise ValueError("exactly one of `proof` (text) or `steps` (list) is required")
        if self.proof_id is None:
            self.proof_id = f"{self.problem_id}#{self.sample}"
        return self

    def step_list(self) -> list[str]:
        """The proof's steps (split from `proof` when needed); raises ProofFormatError."""
        from proofcheck.protocol import ProofFormatError, split_steps

        if self.steps is not None:
            if not self.steps or any(not s.strip() for s in self.steps):
                raise ProofFormatError("steps must be a non-empty list of non-empty strings")
            return self.steps
        return split_steps(self.proof or "")


class VerifierOutput(_Record):
    """One raw verifier completion for one proof (what `metrics verifier` and `grade` read)."""

    proof_id: str = Field(min_length=1)
    repeat: StrictInt = Field(default=0, ge=0)
    text: str
    finish_reason: str | None = "stop"


SCHEMAS: dict[str, type[BaseModel]] = {
    "problem": Problem,
    "annotated": AnnotatedProof,
    "submission": Submission,
    "output": VerifierOutput,
    "candidate": CandidateProof,
}
ID_FIELDS: dict[str, tuple[str, ...]] = {
    "problem": ("problem_id",),
    "annotated": ("proof_id",),
    "submission": ("problem_id", "sample"),
    "output": ("proof_id", "repeat"),
    "candidate": ("proof_id",),
}
