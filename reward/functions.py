"""TRL reward functions: `MetaVerifierReward`, `PolarityReward` and `FormatReward` (README "Rewards").

Both follow TRL's batched signature `fn(completions, **kwargs) -> list[float | None]`, where
kwargs carry the dataset columns (`annotation` as JSON text or a dict, `n_steps`, `problem`,
`steps`) and TRL's extras (`prompts`, `completion_ids`, `trainer_state`, `log_extra`,
`log_metric`). Completions are strings or conversational message lists.

Truncation follows the one rule of the protocol: a completion cut by the token limit is invalid
(0), exactly as in serving and scoring. TRL does not pass a finish reason to reward functions,
but it does pass `completion_ids`; `configure_truncation(eos_token_ids, max_completion_length)`
(train/run.py calls it with the trainer's values) lets the reward derive "stop" / "length" from
them with `proofcheck.parsing.finish_reason_from_ids`. Called outside TRL, a `finish_reason`
column is used when given; plain completion strings without either are taken as finished.

They are picklable callable classes. `MetaVerifierReward(mode="structural")` is synchronous;
with a judge (`mode="judge" | "hybrid"`) the constructor returns an `AsyncMetaVerifierReward`
whose `__call__` is `async def`, which TRL's GRPOTrainer gathers with its other async rewards.
`None` is a grader failure; invalid verifier output is 0. TRL drops a row only when every reward is None,
so the GRPO trainer (`train/trainer.py`) drops every row whose grade failed (`grades = True` on the class).
Per-level counts, invalid outputs and grader failures go to TRL's `log_metric` when given and
are always kept in `self.counts`.

Example:
    >>> from proofcheck.parsing import format_verdict
    >>> fn = get_reward_function("meta_verifier")
    >>> fn([format_verdict("bad", [(1, "x")], 1)],
    ...    annotation=['{"first_fatal_error_step": 1, "recoverable_error_steps": [-1]}'], n_steps=[3])
    [1.0]
"""

from __future__ import annotations

import asyncio
import importlib
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from proofcheck.parsing import finish_reason_from_ids, parse_verifier_output
from proofcheck.reward.client import JudgeConfig
from proofcheck.reward.diagnostics import Outcome, annotation_facts, batch_diagnostics, log_diagnostics
from proofcheck.reward.grading import GradeItem, Grader
from proofcheck.reward.levels import BALANCED_BONUS, INCENTIVES, SCALES, GradeResult, Level, Scale


def completion_text(completion: Any) -> str:
    """The text of one completion: a string, or the last assistant message's content."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        msgs = [m for m in completion if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
        if msgs:
            return msgs[-1].get("content") or ""
    if isinstance(completion, Sequence) and not completion:
        return ""
    raise TypeError(f"a completion must be a string or a list of messages, not {type(completion).__name__}")


def _column(kwargs: dict[str, Any], name: str, n: int) -> list[Any]:
    values = kwargs.get(name)
    if values is None:
        raise ValueError(f"the reward needs the dataset column {name!r}; it was not passed")
    if len(values) != n:
        raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
    return list(values)


class TruncationMixin:
    """Derives each completion's finish reason from TRL's `completion_ids` (see module docstring)."""

    eos_token_ids: tuple[int, ...] | None = None
    max_completion_length: int | None = None

    def configure_truncation(self, eos_token_ids: list[int] | int | None, max_completion_length: int | None) -> None:
        """Set what tells a finished completion from one cut by the limit (the trainer's values)."""
        if isinstance(eos_token_ids, int):
            eos_token_ids = [eos_token_ids]
        self.eos_token_ids = tuple(eos_token_ids or ())
        self.max_completion_length = max_completion_length

    def finish_reasons(self, kwargs: dict[str, Any], n: int) -> list[str | None]:
        """One finish reason per completion: from completion_ids, a finish_reason column, or "stop"."""
        ids = kwargs.get("completion_ids")
        if ids is not None:
            if not self.eos_token_ids and self.max_completion_length is None:
                raise ValueError(f"{type(self).__name__} got completion_ids but cannot tell a cut-off completion: "
                                 "call configure_truncation(eos_token_ids, max_completion_length) first "
                                 "(train/run.py does it with the trainer's tokenizer and GRPOConfig)")
            return [finish_reason_from_ids(list(x), self.eos_token_ids or (), self.max_completion_length)
                    for x in _column(kwargs, "completion_ids", n)]
        if kwargs.get("finish_reason") is not None:
            return list(_column(kwargs, "finish_reason", n))
        return ["stop"] * n


def _n_steps(kwargs: dict[str, Any], n: int) -> list[int]:
    if kwargs.get("n_steps") is not None:
        return [int(x) for x in _column(kwargs, "n_steps", n)]
    if kwargs.get("steps") is not None:
        return [len(s) for s in _column(kwargs, "steps", n)]
    raise ValueError("the reward needs the dataset column 'n_steps' (or 'steps'); neither was passed")


class FormatReward(TruncationMixin):
    """1.0 when the completion is a valid verifier answer (docs/protocol.md), else 0.0."""

    def __init__(self) -> None:
        self.__name__ = "format"
        self.counts: Counter = Counter()

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        n_steps = _n_steps(kwargs, len(completions))
        finishes = self.finish_reasons(kwargs, len(completions))
        scores = [1.0 if parse_verifier_output(completion_text(c), k, f).valid else 0.0
                  for c, k, f in zip(completions, n_steps, finishes, strict=True)]
        valid = int(sum(scores))
        self.counts.update({"valid": valid, "invalid": len(scores) - valid})
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric(f"{self.__name__}/valid_rate", valid / len(scores) if scores else 0.0)
        return scores


class MetaVerifierReward(TruncationMixin):
    """The meta-verifier level of each completion as a reward (training scale by default).

    Args:
        mode: "structural" (step indices), "judge" (LLM judge) or "hybrid" (min of both).
        scale: the accept/reject incentive (`levels.INCENTIVES`, README "Rewards"): "training"
            (1/0.5/0.25/0, the paper's), "benchmark" (1/0.75/0.5/0), "balanced" (polarity 1/0 and the
            training grade centred per group: `balance_groups`), "polarity" (1/1/1/0); or a `Scale`.
        judge_endpoint, judge_model: the judge's OpenAI-compatible base URL and model name.
        judge_kwargs: more `JudgeConfig` fields (concurrency, timeout_s, max_retries, cache_dir, ...).
        name: the name TRL logs the reward under (`rewards/<name>/mean`).

    `grades = True` tells the GRPO trainer that this reward's None is a failed grade: the row then carries no
    advantage whatever the other rewards say (`train/trainer.py`), since a row scored by `format` alone
    would train as a wrong-polarity answer.
    """

    grades = True

    def __new__(cls, mode: str = "structural", *args: Any, **kwargs: Any) -> MetaVerifierReward:
        if cls is MetaVerifierReward and mode in ("judge", "hybrid"):
            cls = AsyncMetaVerifierReward
        return super().__new__(cls)

    def __init__(self, mode: str = "structural", scale: str | Scale = "training",
                 judge_endpoint: str | None = None, judge_model: str | None = None,
                 name: str = "meta_verifier", **judge_kwargs: Any):
        judge = None
        if judge_endpoint is not None or judge_model is not None:
            if not (judge_endpoint and judge_model):
                raise ValueError("a judge needs both judge_endpoint and judge_model")
            judge = JudgeConfig(endpoint=judge_endpoint, model=judge_model, **judge_kwargs)
        elif judge_kwargs:
            raise ValueError(f"judge options {sorted(judge_kwargs)} given without a judge_endpoint")
        if mode in ("judge", "hybrid") and not isinstance(self, AsyncMetaVerifierReward):
            raise ValueError(f"mode {mode!r} needs AsyncMetaVerifierReward (use MetaVerifierReward(mode=...))")
        if isinstance(scale, str) and scale not in INCENTIVES:
            raise ValueError(f"unknown scale {scale!r} (the reward incentive); choose one of {', '.join(INCENTIVES)}")
        self.incentive = scale if isinstance(scale, str) else getattr(scale, "name", "custom")
        # `balanced` grades on the training scale and then centres the grades per group (balance_groups)
        self.grader = Grader(mode, "training" if scale == "balanced" else scale, judge)
        self.mode = mode
        self.__name__ = name
        self.counts: Counter = Counter()

    @property
    def judge_stats(self) -> Any:
        """The judge's `JudgeStats` (calls, retries, cache hits, failures), or None."""
        return self.grader.judge.stats if self.grader.judge is not None else None

    def _items(self, completions: list[Any], kwargs: dict[str, Any]) -> list[GradeItem]:
        n = len(completions)
        anns = _column(kwargs, "annotation", n)
        n_steps = _n_steps(kwargs, n)
        if self.grader.judge is not None:  # the judge reads the proof
            steps, problems = _column(kwargs, "steps", n), _column(kwargs, "problem", n)
        else:  # step indices only: the count is all the parser needs
            steps, problems = [["(step)"] * k for k in n_steps], [""] * n
        finishes = self.finish_reasons(kwargs, n)
        return [GradeItem(problem=p, steps=list(s), text=completion_text(c), annotation=a, finish_reason=f)
                for c, a, s, p, f in zip(completions, anns, steps, problems, finishes, strict=True)]

    def _finish(self, items: list[GradeItem], results: list[GradeResult], kwargs: dict[str, Any]
                ) -> list[float | None]:
        """Scores from the grades (made polarity-neutral per group under `balanced`), with the level
        counts and the batch's checking diagnostics (`reward/diagnostics.py`) logged."""
        log_metric = kwargs.get("log_metric")
        batch: Counter = Counter()
        for r in results:
            key = "grader_failure" if r.grader_error else "invalid" if not r.valid else r.level.name
            batch[key] += 1
        self.counts.update(batch)
        if callable(log_metric):
            for key in (*[lvl.name for lvl in Level], "invalid", "grader_failure"):
                log_metric(f"{self.__name__}/count/{key}", float(batch.get(key, 0)))
        groups = _group_keys(kwargs, len(items))
        facts = [annotation_facts(it.annotation) for it in items]  # (gold flawed, proof family)
        flawed = [f for f, _ in facts]
        scores = [r.score for r in results]
        if self.incentive == "balanced":
            if groups is None:
                raise ValueError("reward_scale balanced centres grades per proof: it needs the dataset column "
                                 "'proof_id' (or TRL's prompts) to group completions")
            scores = balance_groups(results, flawed, groups)
        outcomes = [Outcome(f, _accepted(it), r, s, fam)
                    for it, r, s, (f, fam) in zip(items, results, scores, facts, strict=True)]
        log_diagnostics(batch_diagnostics(outcomes), log_metric)
        return scores

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        items = self._items(completions, kwargs)
        return self._finish(items, [self.grader.grade_sync(it) for it in items], kwargs)


def _group_keys(kwargs: dict[str, Any], n: int) -> list[str] | None:
    """Which completions answer the same proof (a GRPO group): the `proof_id` column, else TRL's
    prompts; None when the caller passed neither."""
    for name in ("proof_id", "prompts"):
        if kwargs.get(name) is not None:
            return [str(x) for x in _column(kwargs, name, n)]
    return None


def _accepted(item: GradeItem) -> bool:
    """A valid output whose verdict accepts (the parser's rule, as serving counts an accept)."""
    parsed = parse_verifier_output(item.text, len(item.steps), item.finish_reason)
    return parsed.verdict is not None and parsed.verdict.accepts


def balance_groups(results: list[GradeResult], flawed: list[bool], groups: list[str],
                   bonus: float = BALANCED_BONUS) -> list[float | None]:
    """The `balanced` incentive: right polarity earns 1, wrong polarity and invalid output 0, and a
    rejection of a flawed proof moves by `bonus` x (its training-scale grade - the mean grade of the
    right-polarity rejections of the same proof in the batch).

    The location bonus is zero-mean within each group, so rejecting a flawed proof earns exactly 1 on
    average, as accepting a valid one does: the belief at which accepting and rejecting earn the same
    is 0.5 whatever grade the verifier's rejections reach, while a better-located rejection still
    beats a worse one of the same proof. A grader failure stays None.

    Example:
        >>> from proofcheck.reward.levels import Level
        >>> g = lambda lvl: GradeResult(level=lvl, score=None, valid=True)
        >>> balance_groups([g(Level.EXACT_MATCH), g(Level.POOR_MATCH), g(Level.WRONG_POLARITY)],
        ...                [True, True, True], ["p", "p", "p"])
        [1.1875, 0.8125, 0.0]
    """
    training = SCALES["training"]
    rejects: dict[str, list[float]] = defaultdict(list)
    for r, f, g in zip(results, flawed, groups, strict=True):
        if f and r.valid and r.level is not None and r.level is not Level.WRONG_POLARITY:
            rejects[g].append(training.score(r.level))
    out: list[float | None] = []
    for r, f, g in zip(results, flawed, groups, strict=True):
        if r.grader_error is not None:
            out.append(None)
        elif not r.valid or r.level is None or r.level is Level.WRONG_POLARITY:
            out.append(0.0)
        elif f:
            mean = sum(rejects[g]) / len(rejects[g])
            out.append(1.0 + bonus * (training.score(r.level) - mean))
        else:
            out.append(1.0)
    return out


class AsyncMetaVerifierReward(MetaVerifierReward):
    """`MetaVerifierReward` with a judge: `__call__` is a coroutine (TRL gathers it)."""

    async def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:  # type: ignore[override]
        items = self._items(completions, kwargs)
        return self._finish(items, await self.grader.grade(items), kwargs)

    def call_sync(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        """Run `__call__` in a fresh event loop (for scripts outside an event loop)."""
        return asyncio.run(self(completions, **kwargs))


POLARITY_SCALE = Scale("polarity", 1.0, 1.0, 1.0, 0.0)


class PolarityReward(MetaVerifierReward):
    """The binary baseline of the reward ablation: 1.0 when the verdict's polarity is right (a valid
    output that accepts a correct proof or rejects a flawed one, whichever steps it flags), else 0.0.

    The structural grader with every matching level scored 1 (`POLARITY_SCALE`): an invalid or
    cut-off output is 0 as in every reward, a grader failure is None (TRL drops it), never 0.
    Registered as `polarity`; it takes no options (`reward_scale` applies to `meta_verifier` only).

    Example:
        >>> from proofcheck.parsing import format_verdict
        >>> fn = PolarityReward()
        >>> ann = '{"first_fatal_error_step": 1, "recoverable_error_steps": [-1]}'
        >>> fn([format_verdict("bad", [(2, "x")], 2), format_verdict("fine", [], -1)],
        ...    annotation=[ann, ann], n_steps=[3, 3])
        [1.0, 0.0]
    """

    def __init__(self, name: str = "polarity") -> None:
        super().__init__(mode="structural", scale=POLARITY_SCALE, name=name)


REWARD_FUNCTIONS: dict[str, type] = {
    "meta_verifier": MetaVerifierReward,
    "polarity": PolarityReward,
    "format": FormatReward,
}


def get_reward_function(name_or_path: str, **kwargs: Any) -> Callable[..., Any]:
    """A reward function by registry name or dotted path ("pkg.mod:Attr" or "pkg.mod.Attr").

    Classes are instantiated with `kwargs`; plain functions are returned as they are (then
    `kwargs` must be empty).
    """
    if name_or_path in REWARD_FUNCTIONS:
        return REWARD_FUNCTIONS[name_or_path](**kwargs)
    if ":" in name_or_path:
        module_name, _, attr = name_or_path.partition(":")
    elif "." in name_or_path:
        module_name, _, attr = name_or_path.rpartition(".")
    else:
        raise ValueError(f"unknown reward function {name_or_path!r}: use one of {', '.join(REWARD_FUNCTIONS)} "
                         "or a dotted path such as 'package.module:Class'")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot load reward function {name_or_path!r}: {e}") from e
    if isinstance(obj, type):
        return obj(**kwargs)
    if kwargs:
        raise ValueError(f"{name_or_path!r} is a function; it takes no constructor options {sorted(kwargs)}")
    if not callable(obj):
        raise ValueError(f"{name_or_path!r} is not callable")
    return obj
