"""TRL-shaped reward functions: batched signature, completion forms, logging, pickling, registry."""

from __future__ import annotations

import asyncio
import inspect
import json
import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from proofcheck.parsing import format_verdict
from proofcheck.reward.functions import (
    REWARD_FUNCTIONS,
    AsyncMetaVerifierReward,
    FormatReward,
    MetaVerifierReward,
    PolarityReward,
    completion_text,
    get_reward_function,
)
from proofcheck.serve.scripted import Reply, ScriptedServer

ANN = json.dumps({"first_fatal_error_step": 2, "recoverable_error_steps": [0]})
STEPS = ["a = 1.", "b = 2.", "c = a + b = 4.", "Hence c = 4."]


def out(flagged: list[int]) -> str:
    return format_verdict("checked", [(s, "wrong") for s in flagged], min(flagged) if flagged else -1)


# completion -> (meta level key, training reward, format reward)
BATCH = [
    (out([0, 2]), "EXACT_MATCH", 1.0, 1.0),
    (out([2]), "BASIC_MATCH", 0.5, 1.0),
    (out([3]), "POOR_MATCH", 0.25, 1.0),
    (out([]), "WRONG_POLARITY", 0.0, 1.0),
    ("I cannot decide.", "invalid", 0.0, 0.0),
]


def columns(n: int, conversational: bool = False) -> dict[str, Any]:
    return {"annotation": [ANN] * n, "n_steps": [4] * n, "problem": ["Prove c = 3."] * n, "steps": [STEPS] * n}


@pytest.mark.parametrize("form", ["standard", "conversational"])
def test_meta_and_format_rewards(form: str) -> None:
    texts = [b[0] for b in BATCH]
    completions: list[Any] = texts if form == "standard" else [[{"role": "assistant", "content": t}] for t in texts]
    meta, fmt = MetaVerifierReward(), FormatReward()
    assert meta(completions, **columns(len(texts))) == [b[2] for b in BATCH]
    assert fmt(completions, **columns(len(texts))) == [b[3] for b in BATCH]
    assert meta.counts == {b[1]: 1 for b in BATCH}
    assert fmt.counts == {"valid": 4, "invalid": 1}


def test_benchmark_scale_and_dict_annotations() -> None:
    meta = MetaVerifierReward(scale="benchmark")
    texts = [b[0] for b in BATCH]
    anns = [json.loads(ANN)] * len(texts)
    assert meta(texts, annotation=anns, n_steps=[4] * len(texts)) == [1.0, 0.75, 0.5, 0.0, 0.0]


def test_log_metric_gets_per_level_counts_every_call() -> None:
    logged: list[tuple[str, float]] = []
    meta = MetaVerifierReward()
    texts = [b[0] for b in BATCH] + [out([2])]
    meta(texts, **columns(len(texts)), log_metric=lambda name, value: logged.append((name, value)),
         trainer_state=object(), log_extra=lambda col, vals: None, prompts=["p"] * len(texts))
    counts = {k: v for k, v in logged if k.startswith("meta_verifier/")}
    assert counts == {"meta_verifier/count/EXACT_MATCH": 1.0, "meta_verifier/count/BASIC_MATCH": 2.0,
                            "meta_verifier/count/POOR_MATCH": 1.0, "meta_verifier/count/WRONG_POLARITY": 1.0,
                            "meta_verifier/count/invalid": 1.0, "meta_verifier/count/grader_failure": 0.0}
    flog: list[tuple[str, float]] = []
    FormatReward()(texts, steps=[STEPS] * len(texts), log_metric=lambda n, v: flog.append((n, v)))
    assert flog == [("format/valid_rate", 5 / 6)]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n_steps": [4]}, "annotation"),
    ({"annotation": [ANN]}, "n_steps"),
    ({"annotation": [ANN, ANN], "n_steps": [4, 4]}, "2 values for 1"),
])
def test_missing_or_short_columns_raise(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MetaVerifierReward()([out([2])], **kwargs)


def test_completion_text_forms() -> None:
    assert completion_text("x") == "x"
    assert completion_text([{"role": "assistant", "content": "y"}]) == "y"
    assert completion_text([{"role": "assistant", "content": None}]) == ""
    with pytest.raises(TypeError):
        completion_text(3)


def test_names_and_sync_async_shape() -> None:
    structural = MetaVerifierReward()
    hybrid = MetaVerifierReward(mode="hybrid", judge_endpoint="http://127.0.0.1:9/v1", judge_model="j")
    assert structural.__name__ == "meta_verifier" and FormatReward().__name__ == "format"
    assert MetaVerifierReward(name="meta_bench").__name__ == "meta_bench"
    assert type(structural) is MetaVerifierReward and isinstance(hybrid, AsyncMetaVerifierReward)
    assert not inspect.iscoroutinefunction(type(structural).__call__)
    assert inspect.iscoroutinefunction(type(hybrid).__call__) and inspect.iscoroutinefunction(hybrid.__call__)


@pytest.mark.parametrize("make", [
    lambda: MetaVerifierReward(),
    lambda: MetaVerifierReward(scale="benchmark", name="m2"),
    lambda: MetaVerifierReward(mode="judge", judge_endpoint="http://127.0.0.1:9/v1", judge_model="j",
                               concurrency=3, cache_dir="/tmp/x"),
    lambda: FormatReward(),
], ids=["structural", "benchmark", "judge", "format"])
def test_pickle_round_trip(make: Any) -> None:
    fn = make()
    texts = [b[0] for b in BATCH]
    if not isinstance(fn, AsyncMetaVerifierReward):
        fn(texts, **columns(len(texts)))  # counters filled before pickling
    copy = pickle.loads(pickle.dumps(fn))
    assert type(copy) is type(fn) and copy.__name__ == fn.__name__
    assert inspect.iscoroutinefunction(type(copy).__call__) == inspect.iscoroutinefunction(type(fn).__call__)
    if isinstance(fn, AsyncMetaVerifierReward):
        assert copy.grader.judge.config == fn.grader.judge.config and copy.mode == "judge"
    else:
        assert copy(texts, **columns(len(texts))) == fn(texts, **columns(len(texts)))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"mode": "hybrid"}, "needs a judge"),
    ({"judge_endpoint": "http://h/v1"}, "both judge_endpoint and judge_model"),
    ({"concurrency": 4}, "without a judge_endpoint"),
    ({"mode": "bogus"}, "unknown grading mode"),
    ({"scale": "bogus"}, "unknown scale"),
])
def test_bad_configuration_raises(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MetaVerifierReward(**kwargs)


@pytest.mark.parametrize(("name", "kwargs", "cls"), [
    ("meta_verifier", {}, MetaVerifierReward),
    ("meta_verifier", {"mode": "hybrid", "judge_endpoint": "http://h/v1", "judge_model": "j"},
     AsyncMetaVerifierReward),
    ("format", {}, FormatReward),
    ("polarity", {}, PolarityReward),
    ("proofcheck.reward.functions:FormatReward", {}, FormatReward),
    ("proofcheck.reward.functions.MetaVerifierReward", {"scale": "benchmark"}, MetaVerifierReward),
])
def test_registry_and_dotted_paths(name: str, kwargs: dict[str, Any], cls: type) -> None:
    assert type(get_reward_function(name, **kwargs)) is cls
    assert set(REWARD_FUNCTIONS) == {"meta_verifier", "polarity", "format"}


_FLAWED = '{"first_fatal_error_step": 1, "recoverable_error_steps": [-1]}'
_VALID = '{"first_fatal_error_step": -1, "recoverable_error_steps": [-1]}'


@pytest.mark.parametrize(("text", "annotation", "finish", "expected"), [
    # hand-written: polarity right at any level -> 1, wrong polarity or invalid -> 0
    (format_verdict("step 1", [(1, "x")], 1), _FLAWED, "stop", 1.0),      # exact match
    (format_verdict("step 2", [(2, "x")], 2), _FLAWED, "stop", 1.0),      # poor match: still the right polarity
    (format_verdict("fine", [], -1), _FLAWED, "stop", 0.0),               # accepts a flawed proof
    (format_verdict("fine", [], -1), _VALID, "stop", 1.0),
    (format_verdict("step 0", [(0, "x")], 0), _VALID, "stop", 0.0),       # rejects a valid proof
    (format_verdict("fine", [], -1), _VALID, "length", 0.0),              # cut off: invalid
    ("no answer here", _VALID, "stop", 0.0),
])
def test_polarity_reward_is_binary(text: str, annotation: str, finish: str, expected: float) -> None:
    fn = PolarityReward()
    assert fn([text], annotation=[annotation], n_steps=[3], finish_reason=[finish]) == [expected]
    assert pickle.loads(pickle.dumps(fn))([text], annotation=[annotation], n_steps=[3],
                                          finish_reason=[finish]) == [expected]


def test_dotted_path_to_a_plain_function() -> None:
    assert get_reward_function("proofcheck.reward.functions:completion_text") is completion_text
    with pytest.raises(ValueError, match="takes no constructor options"):
        get_reward_function("proofcheck.reward.functions:completion_text", mode="x")


@pytest.mark.parametrize(("name", "match"), [
    ("nonsense", "unknown reward function"),
    ("proofcheck.reward.nope:X", "cannot load"),
    ("proofcheck.reward.functions:Nope", "cannot load"),
    ("proofcheck.reward.levels:LEVEL_NAMES", "not callable"),
])
def test_registry_errors(name: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        get_reward_function(name)


# ---- the async judge reward over real HTTP (scripted judge) --------------------------------------


@pytest.fixture(scope="module")
def judge_url() -> Iterator[str]:
    def respond(req: dict[str, Any], i: int) -> Reply:
        user = req["messages"][-1]["content"]
        if "FAIL-ME" in user:
            return Reply(status=503)
        return Reply("<level>POOR_MATCH</level>" if "Step 0: wrong" in user else "<level>EXACT_MATCH</level>")

    with ScriptedServer(respond) as srv:
        yield srv.url


def test_async_hybrid_reward(judge_url: str) -> None:
    fn = MetaVerifierReward(mode="hybrid", judge_endpoint=judge_url, judge_model="judge", max_retries=1,
                            backoff_base_s=0.01, timeout_s=5)
    texts = [out([0, 2]), out([2]), out([]), "garbage",
             format_verdict("FAIL-ME", [(2, "wrong")], 2)]
    logged: dict[str, float] = {}
    rewards = asyncio.run(fn(texts, **columns(len(texts)), log_metric=logged.__setitem__))
    # judge lowers EXACT to POOR for the first; keeps BASIC (min) for the second; polarity and
    # invalid never reach the judge; the 503s end as None (a grader failure), not 0
    assert rewards == [0.25, 0.5, 0.0, 0.0, None]
    assert fn.counts == {"POOR_MATCH": 1, "BASIC_MATCH": 1, "WRONG_POLARITY": 1, "invalid": 1, "grader_failure": 1}
    assert logged["meta_verifier/count/grader_failure"] == 1.0
    s = fn.judge_stats
    assert (s.failures, s.calls, s.retries) == (1, 4, 1)


def test_async_judge_reward_needs_proof_columns(judge_url: str) -> None:
    fn = MetaVerifierReward(mode="judge", judge_endpoint=judge_url, judge_model="judge")
    with pytest.raises(ValueError, match="steps"):
        fn.call_sync([out([2])], annotation=[ANN], n_steps=[4])
