"""The compute-dtype decision (proofcheck.precision) with the machine faked both ways, and every
consumer that takes its dtype from it: `bf16: auto` in the recipes, the vLLM engine arguments,
the SFT step sizing and the GRPO time budget."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from proofcheck import precision
from proofcheck.precision import Machine, cpu_flags, decide

AVX2 = Machine("cpu", "x86_64", frozenset({"avx", "avx2", "fma"}), "AVX2")
AVX512 = Machine("cpu", "x86_64", frozenset({"avx2", "avx512f", "avx512_vnni"}), "AVX512")   # no bf16 unit
AVX512_BF16 = Machine("cpu", "x86_64", frozenset({"avx2", "avx512f", "avx512_bf16"}), "AVX512")
AMX = Machine("cpu", "x86_64", frozenset({"avx512f", "amx_tile", "amx_bf16"}), "AMX")
ARM_BF16 = Machine("cpu", "aarch64", frozenset({"asimd", "sve", "bf16"}), "SVE")
ARM_OLD = Machine("cpu", "aarch64", frozenset({"asimd"}), "DEFAULT")
OTHER = Machine("cpu", "riscv64", frozenset({"bf16"}))
H200 = Machine("cuda", "x86_64", AVX2.cpu_flags, "AVX2", cuda_bf16=True, cuda_name="NVIDIA H200")
V100 = Machine("cuda", "x86_64", AVX2.cpu_flags, "AVX2", cuda_bf16=False, cuda_name="Tesla V100")


@pytest.mark.parametrize(("machine", "requested", "dtype", "in_reason"), [
    (AVX2, "auto", "float32", "AVX2, no native bf16"),
    (AVX512, "auto", "float32", "no native bf16"),
    (AVX512_BF16, "auto", "bfloat16", "avx512_bf16"),
    (AMX, "auto", "bfloat16", "amx_bf16"),
    (ARM_BF16, "auto", "bfloat16", "native bf16"),
    (ARM_OLD, "auto", "float32", "no native bf16"),
    (OTHER, "auto", "float32", "no native bf16"),        # unknown architecture: never guess bf16
    (H200, "auto", "bfloat16", "H200"),
    (V100, "auto", "float32", "no bf16"),
    (AVX2, "bfloat16", "bfloat16", "emulated"),          # forced: allowed, and the reason warns
    (AVX512_BF16, "float32", "float32", "forced"),
])
def test_decision_table(machine: Machine, requested: str, dtype: str, in_reason: str) -> None:
    choice = decide(machine, requested, "PROOFCHECK_DTYPE")
    assert choice.dtype == dtype
    assert in_reason in choice.reason
    assert choice.bf16 == (dtype == "bfloat16")
    assert choice.record()["native_bf16"] == machine.native_bf16()


@pytest.mark.parametrize(("flag", "env", "dtype", "source"), [
    (None, None, "float32", "auto"),
    (None, "bf16", "bfloat16", "PROOFCHECK_DTYPE"),
    (None, "auto", "float32", "auto"),
    ("fp32", "bf16", "float32", "--dtype"),       # the flag wins over the variable
    ("auto", "bfloat16", "bfloat16", "PROOFCHECK_DTYPE"),   # `--dtype auto` leaves the variable in charge
    ("bfloat16", None, "bfloat16", "--dtype"),
])
def test_flag_then_environment_then_machine(monkeypatch: pytest.MonkeyPatch, flag: str | None, env: str | None,
                                            dtype: str, source: str) -> None:
    monkeypatch.setattr(precision, "probe_machine", lambda device="auto": AVX2)
    if env is None:
        monkeypatch.delenv(precision.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(precision.ENV_VAR, env)
    choice = precision.choose_dtype(flag)
    assert (choice.dtype, choice.source) == (dtype, source)


@pytest.mark.parametrize(("flag", "env", "names"), [(None, "fp16", "PROOFCHECK_DTYPE='fp16'"),
                                                    ("half", None, "--dtype='half'")])
def test_bad_values_name_where_they_came_from(monkeypatch: pytest.MonkeyPatch, flag, env, names) -> None:
    monkeypatch.setattr(precision, "probe_machine", lambda device="auto": AVX2)
    monkeypatch.delenv(precision.ENV_VAR, raising=False)
    if env:
        monkeypatch.setenv(precision.ENV_VAR, env)
    with pytest.raises(ValueError, match="choose one of auto, bfloat16") as e:
        precision.choose_dtype(flag)
    assert names in str(e.value)


@pytest.mark.parametrize(("text", "expected"), [
    ("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu avx2 avx512_bf16\n",
     {"fpu", "avx2", "avx512_bf16"}),
    ("processor\t: 0\nFeatures\t: fp asimd bf16 sve\n", {"fp", "asimd", "bf16", "sve"}),
    ("processor\t: 0\nmodel name\t: something with avx512_bf16 in its name\n", set()),
])
def test_cpu_flags_read_proc_cpuinfo(tmp_path: Path, text: str, expected: set[str]) -> None:
    f = tmp_path / "cpuinfo"
    f.write_text(text)
    assert cpu_flags(f) == expected


def test_this_machine_agrees_with_torch() -> None:
    """The flag rule and oneDNN's own bf16 check agree on this host (both say no on AVX2)."""
    torch = pytest.importorskip("torch")
    m = precision.probe_machine("cpu")
    assert m.torch_capability == torch.backends.cpu.get_cpu_capability()
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        assert not m.native_bf16()


@pytest.mark.parametrize(("argv", "yaml_bf16", "native", "expected"), [
    ([], "auto", False, ["--bf16", "false"]),
    ([], "auto", True, ["--bf16", "true"]),
    (["--bf16", "auto"], "true", False, ["--bf16", "false"]),
    (["--bf16=auto"], None, True, ["--bf16=true"]),
    (["--bf16", "true"], "auto", False, ["--bf16", "true"]),     # an explicit value is kept
    ([], "false", True, []),                                     # nothing to resolve
])
def test_recipe_bf16_auto_is_resolved_before_trl(monkeypatch, tmp_path, argv, yaml_bf16, native, expected) -> None:
    from proofcheck.train.args import resolve_auto_bf16

    machine = AVX512_BF16 if native else AVX2
    monkeypatch.setattr(precision, "probe_machine", lambda device="auto": machine)
    monkeypatch.delenv(precision.ENV_VAR, raising=False)
    cfg = tmp_path / "r.yaml"
    cfg.write_text("use_cpu: true\n" + (f"bf16: {yaml_bf16}\n" if yaml_bf16 else ""))
    assert resolve_auto_bf16(["--config", str(cfg), *argv], str(cfg)) == ["--config", str(cfg), *expected]


@pytest.mark.parametrize(("native", "env", "dtype"), [(False, None, "float32"), (True, None, "bfloat16"),
                                                      (True, "fp32", "float32"), (False, "bf16", "bfloat16")])
def test_vllm_cpu_engines_get_the_decided_dtype(monkeypatch, native, env, dtype) -> None:
    from proofcheck.serve import engine_args

    monkeypatch.setattr(engine_args, "on_cpu", lambda: True)
    monkeypatch.setattr(precision, "probe_machine", lambda device="auto": AVX512_BF16 if native else AVX2)
    monkeypatch.delenv(precision.ENV_VAR, raising=False)
    if env:
        monkeypatch.setenv(precision.ENV_VAR, env)
    assert engine_args.engine_kwargs()["dtype"] == dtype
    assert engine_args.engine_kwargs(dtype="float16")["dtype"] == "float16"   # an explicit engine arg wins


@pytest.mark.parametrize(("env", "dtype"), [(None, None), ("bf16", "bfloat16")])
def test_vllm_gpu_engines_keep_vllms_auto_unless_asked(monkeypatch, env, dtype) -> None:
    from proofcheck.serve import engine_args

    monkeypatch.setattr(engine_args, "on_cpu", lambda: False)
    monkeypatch.delenv(precision.ENV_VAR, raising=False)
    if env:
        monkeypatch.setenv(precision.ENV_VAR, env)
    assert engine_args.engine_kwargs().get("dtype") == dtype


@pytest.mark.parametrize(("first", "left", "max_steps", "steps"), [
    (30.0, 300.0, 16, 11),     # 1 timed + 10 more
    (30.0, 10_000.0, 16, 16),  # capped by --steps
    (573.0, 300.0, 16, 1),     # emulated bf16: only the step already taken
    (30.0, -50.0, 16, 1),      # already over budget
    (0.0, 5.0, 4, 4),
])
def test_sft_steps_that_fit(first: float, left: float, max_steps: int, steps: int) -> None:
    from proofcheck.train.sft import steps_that_fit

    assert steps_that_fit(first, left, max_steps) == steps


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run_budget(cb, clock, curve_every: int = 0) -> list[int]:
    """Steps of 10 s after 60 s of loading and evaluation; a 3 s curve point inside every
    `curve_every`-th step. Returns the step the budget stopped after (or nothing)."""
    state = SimpleNamespace(global_step=0, max_steps=50, is_world_process_zero=True)
    for step in range(1, 20):
        clock.now = 60.0 + 10.0 * step
        state.global_step = step
        control = SimpleNamespace(should_training_stop=False)
        cb.on_step_begin(None, state, control)
        if curve_every and step % curve_every == 0:
            cb.eval_cb.timeline.append(("curve", 3.0))
        cb.on_step_end(None, state, control)
        if control.should_training_stop:
            return [step]
    return []


def test_time_budget_stops_when_one_more_step_and_the_tail_would_not_fit() -> None:
    from proofcheck.train import budget as budget_mod

    ticks = iter([0.0, 10.0] * 20)   # every step takes 10 s
    clock = _Clock()
    cb = budget_mod.TimeBudgetCallback(200.0, SimpleNamespace(timeline=[("full", 40.0)]), clock=clock,
                                       save_reserve_s=20.0, timer=lambda: next(ticks))
    # after step k the clock says 60 + 10k; one more step (10) + final eval (40) + save (20) must fit in 200:
    # after step 7 they end at exactly 200 (fits), after step 8 at 210
    assert _run_budget(cb, clock) == [8]
    assert cb.plan()["stopped_early_at"] == 8 and cb.plan()["median_step_s"] == 10.0


def test_time_budget_counts_the_final_full_evaluation_not_the_last_curve_point() -> None:
    """A cheap learning-curve evaluation inside a step is neither step time nor the final evaluation's
    estimate: the tail stays the last full evaluation (40 s)."""
    from proofcheck.train import budget as budget_mod

    ticks = iter([0.0, 10.0] * 20)
    clock = _Clock()
    cb = budget_mod.TimeBudgetCallback(200.0, SimpleNamespace(timeline=[("full", 40.0)]), clock=clock,
                                       save_reserve_s=20.0, timer=lambda: next(ticks))
    assert _run_budget(cb, clock, curve_every=2) == [8]  # as without curve points: tail = 40 + 20, not 3 + 20
    assert cb.step_s[:3] == [10.0, 7.0, 10.0]  # the step's 10 s less the 3 s curve point inside it


def test_time_budget_counts_the_pool_refresh_the_next_step_begins_with() -> None:
    """The uncertainty pool refreshes at the beginning of every 2nd step (30 s, not step time): the forecast
    after step k adds it when step k + 1 begins with one, so the run stops before a refresh would pass the
    budget, where it stopped after step 8 without the pool."""
    from proofcheck.train import budget as budget_mod

    pool = SimpleNamespace(next_refresh_s=lambda global_step: 30.0 if global_step % 2 == 0 else 0.0)
    ticks = iter([0.0, 10.0] * 20)
    clock = _Clock()
    cb = budget_mod.TimeBudgetCallback(200.0, SimpleNamespace(timeline=[("full", 40.0)]), clock=clock,
                                       save_reserve_s=20.0, timer=lambda: next(ticks), pool=pool)
    # after step k the clock says 60 + 10k; after an even step the next one begins with the refresh:
    # after step 4: 100 + 30 + 10 + 60 = 200 fits; after step 5: 110 + 10 + 60 fits; after step 6: 120 + 30 +
    # 10 + 60 = 220 does not
    assert _run_budget(cb, clock) == [6]


def test_time_budget_never_stops_the_last_step_or_a_run_that_fits() -> None:
    from proofcheck.train import budget as budget_mod

    ticks = iter([0.0, 1.0] * 10)
    cb = budget_mod.TimeBudgetCallback(1000.0, None, clock=_Clock(), save_reserve_s=0.0, timer=lambda: next(ticks))
    state = SimpleNamespace(global_step=0, max_steps=5, is_world_process_zero=True)
    for step in range(1, 6):
        state.global_step = step
        control = SimpleNamespace(should_training_stop=False)
        cb.on_step_begin(None, state, control)
        cb.on_step_end(None, state, control)
        assert not control.should_training_stop
    assert cb.plan()["stopped_early_at"] is None and cb.plan()["steps_timed"] == 5


@pytest.mark.parametrize(("trl_kwargs", "min_seqs", "expected"), [
    # TRL 1.16's colocate arguments for the SmolLM2 recipe: 16 sequences, 4096 batched tokens
    ({"max_num_seqs": 16, "max_num_batched_tokens": 4096, "max_model_len": 1024}, 256,
     {"max_num_seqs": 256, "max_num_batched_tokens": 32768}),
    ({"max_num_seqs": 64, "max_num_batched_tokens": 4096, "max_model_len": 65536}, 8,
     {"max_num_seqs": 64, "max_num_batched_tokens": 65536}),   # whole prompts: at least max_model_len
    ({"max_num_seqs": None}, 0, {"max_num_seqs": None, "max_num_batched_tokens": 32768}),
])
def test_trl_colocated_engine_arguments_on_cpu(trl_kwargs: dict, min_seqs: int, expected: dict) -> None:
    from proofcheck.train.vllm_cpu_fix import colocated_engine_kwargs

    out = colocated_engine_kwargs({"model": "m", **trl_kwargs}, "float32", min_seqs)
    assert out["model"] == "m" and out["dtype"] == "float32"
    assert out["enable_chunked_prefill"] is False and out["enforce_eager"] is True
    assert {k: out[k] for k in expected} == expected


# The plan's sizing to a wall clock: `--budget-min 20` (the demo's default is its steps, the budget a guard only),
# with 2 repeats of the shipped annotated proofs, the setting these figures were measured with (the default is 1)
BUDGET_MODE_S = 1200.0


@pytest.mark.parametrize(("first_step_s", "eval_tasks", "passes", "repeats"), [
    (9.0, 64, 8, 2),      # as fast as the reference or faster: the default sizes
    (11.0, 64, 8, 2),
    (14.0, 50, 8, 2),     # r = 0.79
    (22.0, 32, 2, 1),     # r = 0.5
    (35.0, 20, 2, 1),     # a quiet 2-core AVX2 host in fp32 (r = 0.31)
    (180.0, 16, 2, 1),    # never fewer than 16 held-out proofs
])
def test_demo_scales_evaluation_and_scoring_by_the_measured_sft_step(first_step_s, eval_tasks, passes,
                                                                    repeats) -> None:
    from proofcheck.app.demo import DemoConfig, Plan

    plan = Plan(DemoConfig(budget_s=BUDGET_MODE_S, repeats=2), decide(AVX2))
    plan.record["sft"] = {"first_step_s": first_step_s}
    plan.scale_work()
    assert (plan.eval_tasks, plan.passes, plan.repeats) == (eval_tasks, passes, repeats)
    assert plan.eval_tasks % 2 == 0


@pytest.mark.parametrize(("sft", "eval_tasks"), [
    ({"first_step_s": 111.0, "median_step_s": 11.0}, 64),   # a first step slowed by other work: the median sizes
    ({"first_step_s": 11.0, "median_step_s": 35.0}, 20),
    ({"first_step_s": 35.0}, 20),                           # an older plan file without the median
])
def test_demo_sizes_its_evaluation_from_the_median_sft_step(sft, eval_tasks) -> None:
    from proofcheck.app.demo import DemoConfig, Plan

    plan = Plan(DemoConfig(budget_s=BUDGET_MODE_S, repeats=2), decide(AVX2))
    plan.record["sft"] = sft
    plan.scale_work()
    assert plan.eval_tasks == eval_tasks


@pytest.mark.parametrize(("median_s", "left_s", "eval_tasks", "passes", "repeats"), [
    (11.0, 980.0, 62, 8, 2),    # the reference host: GRPO gets all but the 480 s reserve and a 30 s margin
    (26.7, 860.0, 18, 2, 1),    # the AVX2 demo of 2026-12-04 (it ran GRPO 570 s of a 350 s budget, sized by r alone)
    (60.0, 831.0, 16, 2, 1),    # slower still: the floors (16 proofs, 2 passes), and the finish line says OVER
])
def test_demo_fits_evaluation_and_scoring_to_the_time_left(median_s, left_s, eval_tasks, passes, repeats) -> None:
    import time

    from proofcheck.app.demo import DemoConfig, Plan

    plan = Plan(DemoConfig(budget_s=BUDGET_MODE_S, repeats=2), decide(AVX2))
    plan.t0 = time.perf_counter() - (plan.cfg.budget_s - left_s)
    plan.record["sft"] = {"median_step_s": median_s}
    plan.scale_work()
    assert (plan.eval_tasks, plan.passes, plan.repeats) == (eval_tasks, passes, repeats)
    assert plan.grpo_budget() + plan.score_plan_s + 30.0 == pytest.approx(left_s, abs=1.0)


def test_demo_on_a_bf16_host_keeps_the_scoring_share_it_measured() -> None:
    """avx512_bf16 host, 2026-12-04: SFT median 7.16 s, 830 s left; scoring (8 passes, 2 repeats: 31 waves)
    took 171 s (121 s and 126 s in two later demos). Estimated at 0.65 SFT steps an 8-pass wave and 5 for the
    engine's start: (5 + 0.65 x 31) x 7.16 = 180 s, not the 480 s reserve (nor the 236 s of one 0.9 for every
    pass count)."""
    import time

    from proofcheck.app.demo import DemoConfig, Plan

    plan = Plan(DemoConfig(budget_s=BUDGET_MODE_S, repeats=2), decide(AVX512_BF16))
    plan.t0 = time.perf_counter() - (plan.cfg.budget_s - 830.0)
    plan.record["sft"] = {"median_step_s": 7.16}
    plan.scale_work()
    assert (plan.eval_tasks, plan.passes, plan.repeats) == (64, 8, 2)
    assert plan.score_plan_s == pytest.approx(180.1, abs=0.5)
    assert plan.grpo_budget() == pytest.approx(830.0 - 180.1 - 30.0, abs=1.0)


@pytest.mark.parametrize("full", [False, True])
def test_without_scoring_the_reserve_goes_to_training(full) -> None:
    """--no-score (leave one family out): no reserve before SFT, no scoring share after it; a 22-minute long
    recipe with its 720 s reserve gave the warm-up 430 s of 1293 (2026-12-07)."""
    import time

    from proofcheck.app.demo import DemoConfig, Plan

    make = DemoConfig.full_recipe if full else DemoConfig
    scored, unscored = (Plan(make(budget_s=1320.0, score=s), decide(AVX512_BF16)) for s in (True, False))
    for plan in (scored, unscored):
        plan.t0 = time.perf_counter() - 27.0
    assert unscored.cfg.score_reserve_s == 0.0
    assert unscored.sft_budget() == pytest.approx(1293.0 * unscored.cfg.sft_share, abs=1.0)
    assert unscored.sft_budget() - scored.sft_budget() == pytest.approx(scored.cfg.score_reserve_s * scored.cfg.sft_share,
                                                                        abs=1.0)
    unscored.record["sft"] = {"median_step_s": 5.7}
    unscored.scale_work()
    assert unscored.score_plan_s == 0.0


@pytest.mark.parametrize(("total_s", "score_s", "grpo_s", "says"), [
    (1100.0, 300.0, 340.0, None),                                   # within the budget: no blame
    (1300.0, 500.0, 340.0, "serving and scoring took 500 s of a 480 s reserve"),
    (1300.0, 200.0, 340.0, "slower than the smallest plan"),
    (1428.0, 488.0, 570.0, "GRPO took 570 s of its 350 s"),         # the demo of 2026-12-04: GRPO overran
])
def test_demo_plan_names_what_overran(total_s, score_s, grpo_s, says) -> None:
    from proofcheck.app.demo import DemoConfig, Plan

    plan = Plan(DemoConfig(budget_s=BUDGET_MODE_S, repeats=2), decide(AVX2))
    plan.record["grpo"] = {"budget_s": 350}
    line = plan.finish(total_s, score_s, grpo_s)
    assert ("OVER by" in line) == (says is not None) and (says is None or says in line)
    assert plan.record["within_budget"] == (says is None) and plan.record["score_s"] == score_s


@pytest.mark.parametrize(("machine", "median_s", "score_s"), [
    (AVX512_BF16, 7.21, 122.6),   # 2026-12-05: (5 + 1.2 x 10 waves) x 7.21; it scored in 109 s of a 720 s reserve
    (AVX2, 25.0, 600.0),          # fp32: (2 + 2.2 x 10) x 25
    (AVX2, 40.0, 720.0),          # never more than the reserve
])
def test_the_long_recipe_gives_grpo_what_its_scoring_leaves(machine, median_s, score_s) -> None:
    """4 passes x 1 repeat: 8 proofs a wave, 25 submissions + 48 annotated proofs = 4 + 6 waves."""
    import time

    from proofcheck.app.demo import DemoConfig, Plan

    plan = Plan(DemoConfig.full_recipe(), decide(machine))
    plan.t0 = time.perf_counter() - (plan.cfg.budget_s - 4700.0)
    plan.record["sft"] = {"median_step_s": median_s}
    plan.scale_work()
    assert plan.score_plan_s == pytest.approx(score_s, abs=0.5)
    assert plan.grpo_budget() == pytest.approx(4700.0 - score_s - 30.0, abs=1.0)


@pytest.mark.parametrize(("dtype", "passes", "steps"), [
    ("bfloat16", 2, 1.2), ("bfloat16", 4, 1.2), ("bfloat16", 7, 1.2),   # few passes: a wave is 8-16 whole proofs
    ("bfloat16", 8, 0.65), ("bfloat16", 16, 0.65),   # 8 or more: a reject cancels the proof's other passes
    ("float32", 2, 2.2), ("float32", 8, 2.2),
])
def test_a_scoring_wave_costs_what_its_passes_measured(dtype, passes, steps) -> None:
    from proofcheck.app.demo_plan import score_wave_steps

    assert score_wave_steps(dtype, passes) == steps


@pytest.mark.parametrize(("machine", "median_s", "eval_tasks"), [
    (AVX512_BF16, 5.68, 192),   # 2026-12-07: 192 x 4 took ~220 s each, GRPO 42 steps: every proof stays
    (AVX512_BF16, 71.0, 48),    # a slow first step alone does not cut it (the median sizes): a slow median does
    (AVX2, 12.0, 108),          # half of GRPO's ~1,560 s holds 116 proofs x 4 passes: 108, 18 per family
    (AVX2, 20.5, 48),           # 2026-12-07, 2-core AVX2 fp32: 192 x 4 was ~1,100 s each, more than GRPO's share;
                                # half of its ~1,360 s holds 59: never fewer than 48 (8 per family)
])
def test_the_long_recipe_cuts_its_evaluation_only_where_it_does_not_fit(machine, median_s, eval_tasks) -> None:
    """The two held-out evaluations take at most half of GRPO's time; in multiples of 12 (each family's pairs)."""
    import time

    from proofcheck.app.demo import DemoConfig, Plan
    from proofcheck.app.demo_plan import EVAL_PASS_STEPS, LONG_EVAL_SHARE

    plan = Plan(DemoConfig.full_recipe(), decide(machine))
    plan.t0 = time.perf_counter() - (plan.cfg.budget_s - 1881.0)   # what the 90-minute recipe leaves after SFT
    plan.record["sft"] = {"first_step_s": 9.0 if median_s < 10 else 71.0, "median_step_s": median_s}
    plan.scale_work()
    assert (plan.eval_tasks, plan.passes, plan.repeats) == (eval_tasks, 4, 1)
    assert plan.eval_tasks % 12 == 0
    evals_s = 2 * plan.eval_tasks * plan.cfg.eval_passes * EVAL_PASS_STEPS * median_s
    assert evals_s <= LONG_EVAL_SHARE * plan.grpo_budget() or plan.eval_tasks == 48


def test_a_long_recipe_told_its_evaluation_keeps_it() -> None:
    """`--eval-tasks` given (leave one family out: 144, 24 per family): the plan keeps it on a slow host."""
    import time

    from proofcheck.app.demo import DemoConfig, Plan

    plan = Plan(DemoConfig.full_recipe(eval_tasks=144, fit_eval=False), decide(AVX2))
    plan.t0 = time.perf_counter() - (plan.cfg.budget_s - 1881.0)
    plan.record["sft"] = {"median_step_s": 20.5}
    plan.scale_work()
    assert plan.eval_tasks == 144


def test_flush_denormals_reads_a_denormal_as_zero_until_turned_off() -> None:
    """The training stages' `flush_denormal`: on, a denormal float reads as 0 (the CPU's FTZ/DAZ modes); off, the
    CPU's default again. Turned off in any case: the mode is the thread's, and other tests run in this one."""
    import torch

    from proofcheck.precision import flush_denormals

    denormal = 1e-323   # far below float64's smallest normal, 2.2e-308
    try:
        assert flush_denormals(True), "x86-64 CPUs have FTZ/DAZ (SSE3)"
        assert torch.tensor([denormal], dtype=torch.float64).item() == 0.0
        assert (torch.tensor([1e-30]) * torch.tensor([1e-10])).item() == 0.0   # a denormal float32 product
    finally:
        flush_denormals(False)
    assert torch.tensor([denormal], dtype=torch.float64).item() > 0.0
    assert (torch.tensor([1e-30]) * torch.tensor([1e-10])).item() > 0.0
