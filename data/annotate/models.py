"""Request / response models of the annotation API, and the input item schema.

The label rules themselves live in `proofcheck.schemas`; these models
only describe what crosses the wire. Field names follow the AdvancedMathBench release.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from proofcheck.schemas import CandidateProof

ANNOTATOR_NAME = re.compile(r"^[\w.@ -]{1,64}$")

# Scalar statistics that `proofcheck data select` (or a similar step) may leave on a record;
# shown to the annotator next to the verifier passes when present.
SELECTION_KEYS: tuple[str, ...] = (
    "entropy", "entropy_bits", "accept_rate", "n_accept", "n_reject", "n_invalid", "n_passes",
    "n_trials", "selected", "selection_models",
)


class QueueItem(CandidateProof):
    """One proof to annotate: problem fields + `proof_id` + `steps` (+ anything else, kept).

    An `annotation` already on the record (e.g. from the AMB release) is neither shown nor
    validated: the annotator judges for themselves, and the output replaces it.
    """

    verifier_passes: list[Any] | None = None

    def selection_stats(self) -> dict[str, Any]:
        """Selection statistics carried by the record (a `selection` object and known scalars)."""
        extra = self.model_extra or {}
        stats: dict[str, Any] = {}
        if isinstance(extra.get("selection"), dict):
            stats.update(extra["selection"])
        for key in SELECTION_KEYS:
            if key in extra and not isinstance(extra[key], dict | list):
                stats[key] = extra[key]
        return stats


class SaveRequest(BaseModel):
    """An annotation as the page sends it (`proofcheck.schemas` labels; `[-1]` means no recoverable)."""

    model_config = ConfigDict(extra="forbid")

    first_fatal_error_step: StrictInt
    recoverable_error_steps: list[StrictInt]
    reviewer_comment: str = ""
    remark: str = ""
    first_error_reason: str = ""


class BrokenRequest(BaseModel):
    """"Report error case": the item itself is broken (bad statement, garbled proof, ...)."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, description="what is wrong with the item")

    @field_validator("reason")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("say what is wrong with the item")
        return v


class Progress(BaseModel):
    """How many queue items this annotator has finished (annotated or reported broken)."""

    done: int
    total: int


class QueueEntry(BaseModel):
    """One row of the queue as an annotator sees it."""

    index: int
    proof_id: str
    problem_id: str
    subject: str
    n_steps: int
    status: Literal["todo", "annotated", "broken"]


class QueueResponse(BaseModel):
    annotator: str
    items: list[QueueEntry]
    progress: Progress
    resume_index: int = Field(description="first item this annotator has not finished (last one when all are)")


class MyWork(BaseModel):
    """This annotator's saved work on an item (for editing); never another annotator's."""

    kind: Literal["annotated", "broken"]
    annotation: dict[str, Any] | None = None
    reason: str | None = None
    created_at: str
    updated_at: str


class ItemResponse(BaseModel):
    index: int
    total: int
    proof_id: str
    problem_id: str
    problem: str
    reference_solution: str | None
    reference_answer: str | None
    domain: str
    subject: str
    policy: str | None
    steps: list[str]
    verifier_passes: list[Any]
    selection: dict[str, Any]
    mine: MyWork | None
    n_annotators: int = Field(description="how many people have finished this item (self included)")


class SaveResponse(BaseModel):
    record: dict[str, Any]
    progress: Progress


class ConfigResponse(BaseModel):
    auth_required: bool
    total: int
    input: str
    out: str
