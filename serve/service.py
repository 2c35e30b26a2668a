"""The verification service: limits, a bounded queue, metrics and draining around a `Verifier`.

Built once at start-up and kept on `app.state.service` (see `proofcheck.serve.app`). The HTTP
layer only parses and routes; every rule about what is accepted lives here:
- size: a proof (or problem / reference) longer than `max_proof_chars` is a 413;
- load: at most `max_queue` verifications in flight (a batch takes one slot per item); beyond
  that a 429 with `Retry-After`, so clients back off instead of piling up;
- shutdown: `drain()` stops admitting (503) and waits until the in-flight work is answered;
- rule: a request's `rule` (and `passes`) must decide its passes (`at_least:T` with T <= k), and
  `card` is the served model's calibrated rule with its k; else a 422 with the reason and the fix.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from proofcheck.decision import CARD_RULE, check_rule
from proofcheck.protocol import DEFAULT_PROMPT_STYLE, ProofFormatError, split_steps
from proofcheck.serve.schemas import BatchRequest, BatchResponse, Health, VerifyRequest, VerifyResponse
from proofcheck.serve.verifier import SERVICE_NAME, Verifier


class ServiceError(Exception):
    """An error for the caller: HTTP status plus OpenAI-shaped type and code."""

    def __init__(self, status: int, message: str, type: str, code: Any = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.code = status, message, type, code
        self.headers = headers or {}


class ServiceMetrics:
    """Prometheus metrics in a registry of their own (several services can share a process)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter("proofcheck_requests", "HTTP requests by route and status code",
                                ["route", "code"], registry=self.registry)
        self.verifications = Counter("proofcheck_verifications", "proofs verified", registry=self.registry)
        self.passes = Counter("proofcheck_passes", "verifier passes by status", ["status"], registry=self.registry)
        self.decisions = Counter("proofcheck_decisions", "decisions by rule and decision", ["rule", "decision"],
                                 registry=self.registry)
        self.tokens = Counter("proofcheck_completion_tokens", "completion tokens generated", registry=self.registry)
        self.queue_depth = Gauge("proofcheck_queue_depth", "verifications in flight", registry=self.registry)
        self.rejected = Counter("proofcheck_rejected_requests", "requests refused (queue full, draining)",
                                ["reason"], registry=self.registry)
        self.latency = Histogram("proofcheck_verify_latency_seconds", "latency of one verification",
                                 buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
                                 registry=self.registry)

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class VerificationService:
    """Admission, limits and metrics in front of a `Verifier` (one per process)."""

    def __init__(self, verifier: Verifier, *, engine_kind: str, model_names: list[str], max_queue: int = 64,
                 max_proof_chars: int = 100_000, max_tokens: int | None = None,
                 trained_with_reference: bool | None = None, card_rule: tuple[str, int, str] | None = None,
                 rule_source: str = "default", rule_reason: str | None = None):
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.verifier = verifier
        self.engine_kind = engine_kind
        self.model_names = model_names
        self.max_queue = max_queue
        self.max_proof_chars = max_proof_chars
        self.max_tokens = max_tokens or verifier.max_tokens
        self.trained_with_reference = trained_with_reference  # from the model's proofcheck_prompt.json
        self.card_rule = card_rule  # (at_least:T, k, why) calibrated in the model's card, or None
        self.rule_source = rule_source  # default | flag | card: where the service's own rule came from
        self.rule_reason = rule_reason
        self.metrics = ServiceMetrics()
        self.in_flight = 0
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def default_model(self) -> str:
        return self.verifier.model or self.model_names[0]

    def health(self) -> Health:
        return Health(status="draining" if self.draining else "ok", service=SERVICE_NAME, engine=self.engine_kind,
                      model=self.default_model, models=self.model_names, passes=self.verifier.passes,
                      rule=self.verifier.rule, max_tokens=self.max_tokens, in_flight=self.in_flight,
                      max_queue=self.max_queue, trained_with_reference=self.trained_with_reference,
                      prompt_style=getattr(self.verifier, "prompt_style", DEFAULT_PROMPT_STYLE),
                      chat_template_kwargs=getattr(getattr(self.verifier, "engine", None), "chat_template_kwargs",
                                                   None) or {},
                      rule_source=self.rule_source,
                      **({"rule_reason": self.rule_reason} if self.rule_reason else {}),
                      card_rule=None if self.card_rule is None else dict(zip(("rule", "passes", "reason"),
                                                                               self.card_rule, strict=True)))

    # -- admission -------------------------------------------------------------------------
    def _admit(self, slots: int) -> None:
        if self.draining:
            self.metrics.rejected.labels("draining").inc()
            raise ServiceError(503, "the service is shutting down; retry against another replica",
                               "service_unavailable", "draining", {"Retry-After": "1"})
        if slots > self.max_queue:
            raise ServiceError(413, f"batch of {slots} items exceeds the queue size {self.max_queue} "
                               "(--max-queue); split it", "invalid_request_error", "batch_too_large")
        if self.in_flight + slots > self.max_queue:
            self.metrics.rejected.labels("queue_full").inc()
            raise ServiceError(429, f"queue full: {self.in_flight} verifications in flight, limit {self.max_queue}"
                               " (--max-queue); retry later", "rate_limit_error", "queue_full", {"Retry-After": "1"})
        self.in_flight += slots
        self._idle.clear()
        self.metrics.queue_depth.set(self.in_flight)

    def _release(self, slots: int) -> None:
        self.in_flight -= slots
        self.metrics.queue_depth.set(self.in_flight)
        if self.in_flight == 0:
            self._idle.set()

    # -- checks ---------------------------------------------------------------------------
    def _rule(self, req: VerifyRequest, where: str = "") -> tuple[int, str]:
        """(k, rule) the request runs with: its own, else the service's; `card` the model's calibrated
        rule and its k. A rule that cannot decide k passes is a 422 with the fix."""
        k, rule = req.passes, req.rule or self.verifier.rule
        if rule == CARD_RULE:
            if self.card_rule is None:
                raise ServiceError(422, f"{where}rule: 'card' asks for the model's calibrated rule, and its "
                                   "proofcheck_prompt.json has none (run `proofcheck calibrate` on the model, then "
                                   "restart the service); use unanimous, majority, any or at_least:T",
                                   "invalid_request_error", "bad_rule")
            rule, card_k = self.card_rule[0], self.card_rule[1]
            if k is not None and k != card_k:
                raise ServiceError(422, f"{where}passes: the card's rule is {rule} of {card_k} passes, this request "
                                   f"asks {k}; drop passes (or send {card_k}), or name the rule: at_least:T with "
                                   f"T <= {k}", "invalid_request_error", "bad_rule")
            k = card_k
        k = k or self.verifier.passes
        try:
            check_rule(rule, k)
        except ValueError as e:
            raise ServiceError(422, f"{where}rule: {e}", "invalid_request_error", "bad_rule") from e
        return k, rule

    def _check(self, req: VerifyRequest, where: str = "") -> list[str]:
        """Size, model and rule checks; the proof's steps."""
        self._rule(req, where)
        for name, size in (("proof" if req.proof is not None else "steps", req.proof_chars()),
                           ("problem", len(req.problem)), ("reference_solution", len(req.reference_solution or ""))):
            if size > self.max_proof_chars:
                raise ServiceError(413, f"{where}{name} has {size} characters; the limit is {self.max_proof_chars} "
                                   "(--max-proof-chars)", "invalid_request_error", "proof_too_large")
        if req.model is not None and req.model not in self.model_names:
            raise ServiceError(404, f"{where}model: {req.model!r} is not served here; served: "
                               f"{', '.join(self.model_names)}", "invalid_request_error", "model_not_found")
        if req.max_tokens is not None and req.max_tokens > self.max_tokens:
            raise ServiceError(422, f"{where}max_tokens: {req.max_tokens} exceeds the server limit {self.max_tokens}"
                               " (--max-tokens)", "invalid_request_error", "max_tokens_too_large")
        if req.steps is not None:
            return req.steps
        try:
            return split_steps(req.proof or "")
        except ProofFormatError as e:
            raise ServiceError(422, f"{where}proof: {e}", "invalid_request_error", "bad_proof") from e

    # -- work -----------------------------------------------------------------------------
    async def _run(self, req: VerifyRequest, steps: list[str]) -> VerifyResponse:
        t0 = time.perf_counter()
        k, rule = self._rule(req)
        result = await self.verifier.verify(req.problem, steps, req.reference_solution, passes=k,
                                            rule=rule, all_passes=req.all_passes, seed=req.seed,
                                            model=req.model, max_tokens=req.max_tokens)
        m = self.metrics
        m.latency.observe(time.perf_counter() - t0)
        m.verifications.inc()
        m.decisions.labels(result.rule, result.decision).inc()
        m.tokens.inc(result.completion_tokens)
        for p in result.passes:
            m.passes.labels(p.status).inc()
        return VerifyResponse.from_result(result, req.model or self.default_model)

    async def verify(self, req: VerifyRequest) -> VerifyResponse:
        steps = self._check(req)
        self._admit(1)
        try:
            return await self._run(req, steps)
        finally:
            self._release(1)

    async def verify_batch(self, batch: BatchRequest) -> BatchResponse:
        steps = [self._check(item, f"items[{i}].") for i, item in enumerate(batch.items)]
        self._admit(len(batch.items))
        try:
            results = await asyncio.gather(*(self._run(it, s) for it, s in zip(batch.items, steps, strict=True)))
        finally:
            self._release(len(batch.items))
        return BatchResponse(results=list(results))

    # -- lifecycle ------------------------------------------------------------------------
    async def drain(self, timeout_s: float | None = None) -> bool:
        """Stop admitting and wait for the in-flight work; True when it all finished in time."""
        self.draining = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
            return True
        except TimeoutError:
            return False

    async def aclose(self) -> None:
        await self.verifier.aclose()
