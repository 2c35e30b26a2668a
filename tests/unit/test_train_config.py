"""Training configuration, data mixing and bad-input handling of train/grpo.py (no model loaded).

Bad input (unknown key, missing data file, invalid records, num_generations not dividing the
generation batch) must end with exit code 2 and one clear message BEFORE any model is loaded:
every such config points at a model folder that does not exist, so an attempt to load it would
fail differently (an uncaught OSError), not with this message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from proofcheck.data.loaders import DataError
from proofcheck.data.synth import make_tasks
from proofcheck.train.config import ConfigError, ProofcheckScriptArguments, check_compatible, check_paths
from proofcheck.train.data import build_training_data

REPO = Path(__file__).resolve().parents[2]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("kwargs, fragment", [
    ({"synthetic_count": 4}, None),
    ({}, "no training data"),
    ({"synthetic_count": -1, "expert_files": ["x.jsonl"]}, "synthetic_count=-1"),
    ({"synthetic_count": 4, "mix_ratios": [1, 1]}, "three non-negative numbers"),
    ({"synthetic_count": 4, "mix_ratios": [0, 0, 0]}, "positive sum"),
    ({"synthetic_count": 4, "mix_ratios": [1, -1, 1]}, "three non-negative numbers"),
    ({"synthetic_count": 4, "train_size": 10}, "train_size needs mix_ratios"),
    ({"synthetic_count": 4, "eval_fraction": 1.0}, "eval_fraction=1.0"),
    ({"synthetic_count": 4, "eval_passes": 0}, "eval_passes=0"),
    ({"synthetic_count": 4, "eval_every_steps": -1}, "eval_every_steps=-1"),
    ({"synthetic_count": 4, "eval_curve_samples": -2}, "eval_curve_samples=-2"),
    ({"synthetic_count": 4, "synthetic_families": ["linear", "geometry"]}, "unknown proof family 'geometry'; choose from chain"),
    ({"synthetic_count": 4, "synthetic_families": ["all"]}, None),
    ({"synthetic_count": 4, "eval_temperature": 0.0}, "eval_temperature=0.0"),
    ({"synthetic_count": 4, "reward_funcs": []}, "reward_funcs is empty"),
    ({"synthetic_count": 4, "reward_mode": "vibes"}, "choose one of structural, judge, hybrid"),
    ({"synthetic_count": 4, "reward_mode": "hybrid"}, "needs a judge"),
    ({"synthetic_count": 4, "judge_endpoint": "http://x/v1", "judge_model": "j"}, "reward_mode is structural"),
    ({"synthetic_count": 4, "reward_mode": "judge", "judge_endpoint": "http://x/v1", "judge_model": "j"}, None),
    ({"synthetic_count": 4, "reward_scale": "linear"}, "choose one of training, benchmark"),
])
def test_script_arguments_validation(kwargs: dict, fragment: str | None) -> None:
    if fragment is None:
        ProofcheckScriptArguments(**kwargs)
    else:
        with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace("[", r"\[")):
            ProofcheckScriptArguments(**kwargs)


def test_every_field_has_help() -> None:
    for f in fields(ProofcheckScriptArguments):
        assert f.metadata.get("help"), f"{f.name} has no help text"


@pytest.mark.parametrize("name, expected", [
    ("meta_verifier", {"mode": "structural", "scale": "training"}),
    ("format", {}),
    ("pkg.mod:Custom", {}),
])
def test_reward_kwargs(name: str, expected: dict) -> None:
    assert ProofcheckScriptArguments(synthetic_count=1).reward_kwargs(name) == expected


class _Training:
    def __init__(self, reward_weights=None, use_vllm=False, vllm_mode="colocate", shuffle_dataset=True,
                 per_device_train_batch_size=16, num_generations=4):
        self.reward_weights, self.use_vllm, self.vllm_mode = reward_weights, use_vllm, vllm_mode
        self.shuffle_dataset, self.per_device_train_batch_size = shuffle_dataset, per_device_train_batch_size
        self.num_generations = num_generations


class _Model:
    def __init__(self, path="m", use_peft=False):
        self.model_name_or_path, self.use_peft = path, use_peft


@pytest.mark.parametrize("script_kw, training, model, fragment", [
    ({}, _Training([1.0, 0.1]), _Model(), None),
    ({}, _Training([1.0]), _Model(), "reward_weights has 1 value"),
    ({}, _Training(), _Model(path=None), "model_name_or_path is not set"),
    ({"save_merged": False, "save_adapter": False}, _Training(), _Model(), "nothing but checkpoints"),
    ({"save_merged": False}, _Training(), _Model(use_peft=False), "save_adapter without use_peft"),
    ({"save_merged": False}, _Training(), _Model(use_peft=True), None),
    ({}, _Training(use_vllm=True, vllm_mode="remote"), _Model(), "vllm_mode='remote'"),
    ({"balanced_batches": True}, _Training(), _Model(), "set shuffle_dataset: false"),
    ({"balanced_batches": True}, _Training(shuffle_dataset=False, per_device_train_batch_size=12), _Model(),
     "12 / num_generations 4 = 3"),
    ({"balanced_batches": True}, _Training(shuffle_dataset=False), _Model(), None),
])
def test_check_compatible(script_kw: dict, training: _Training, model: _Model, fragment: str | None) -> None:
    script = ProofcheckScriptArguments(synthetic_count=1, **script_kw)
    if fragment is None:
        check_compatible(script, training, model)
    else:
        with pytest.raises(ConfigError, match=fragment):
            check_compatible(script, training, model)


def test_check_paths_names_each_missing_file(tmp_path: Path) -> None:
    ok = write_jsonl(tmp_path / "ok.jsonl", make_tasks(2))
    script = ProofcheckScriptArguments(expert_files=[str(ok), "nope.jsonl"], repaired_files=["gone/"])
    with pytest.raises(ConfigError) as e:
        check_paths(script)
    assert "expert_files: nope.jsonl" in str(e.value) and "repaired_files: gone/" in str(e.value)
    assert str(ok) not in str(e.value)


def test_a_mix_the_data_cannot_meet_is_a_config_error(tmp_path: Path) -> None:
    """The shared mixing rule (tests/unit/test_assembly.py) surfaces as a ConfigError naming the fields."""
    expert = write_jsonl(tmp_path / "expert.jsonl", [{**t, "origin": "expert"} for t in make_tasks(4, seed=1)])
    args = ProofcheckScriptArguments(expert_files=[str(expert)], mix_ratios=[1, 1, 0], eval_fraction=0.0)
    with pytest.raises(ConfigError, match=r"mix_ratios=\[1\.0, 1\.0, 0\.0\].*repaired"):
        build_training_data(args)


def test_build_from_jsonl_synthetic_and_dataset_folder(tmp_path: Path) -> None:
    import datasets

    from proofcheck.data.loaders import annotated_to_dataset
    from proofcheck.schemas import AnnotatedProof

    expert = write_jsonl(tmp_path / "expert.jsonl", [{**t, "origin": None, "problem_id": f"e{i}",
                                                      "proof_id": f"e{i}-p"} for i, t in
                                                     enumerate(make_tasks(6, seed=1))])
    recs = [AnnotatedProof.model_validate({**t, "problem_id": f"r{i}", "proof_id": f"r{i}-p", "origin": "repaired"})
            for i, t in enumerate(make_tasks(6, seed=2))]
    dd = datasets.DatasetDict({"train": annotated_to_dataset(recs[:4]), "eval": annotated_to_dataset(recs[4:])})
    dd.save_to_disk(str(tmp_path / "built"))
    args = ProofcheckScriptArguments(expert_files=[str(expert)], repaired_files=[str(tmp_path / "built")],
                                     synthetic_count=5, eval_fraction=0.2, mix_seed=3)
    data = build_training_data(args)
    assert data.pool_counts == {"expert": 6, "repaired": 6, "synthetic": 5}
    assert {r["proof_id"] for r in data.eval} >= {"r4-p", "r5-p"}  # the folder's eval split
    assert not {r["problem_id"] for r in data.train} & {r["problem_id"] for r in data.eval}
    for row in data.train + data.eval:
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert "first_fatal_error_step" not in row["prompt"][1]["content"]  # never the annotation
        json.loads(row["annotation"])
        assert row["n_steps"] == len(row["steps"])


def test_dataset_folder_with_invalid_rows_names_row_and_field(tmp_path: Path) -> None:
    import datasets

    from proofcheck.data.loaders import annotated_to_dataset
    from proofcheck.schemas import AnnotatedProof

    rows = annotated_to_dataset([AnnotatedProof.model_validate(t) for t in make_tasks(3, seed=4)]).to_list()
    rows[1]["annotation"] = json.dumps({"first_fatal_error_step": 99, "recoverable_error_steps": [-1]})
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "bad"))
    with pytest.raises(DataError) as e:
        build_training_data(ProofcheckScriptArguments(expert_files=[str(tmp_path / "bad")]))
    assert "bad[train] row 1" in str(e.value) and "first_fatal_error_step=99" in str(e.value)


# --- the entry point: bad input -> exit 2 with one clear message, before any model is loaded ---

def _recipe(tmp_path: Path, **overrides: object) -> Path:
    import yaml

    model = tmp_path / "model-that-must-not-be-loaded"  # a folder with a config: the path checks pass
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    base = {"model_name_or_path": str(model), "output_dir": str(tmp_path / "out"), "use_cpu": True, "bf16": False,
            "report_to": "none", "synthetic_count": 8, "per_device_train_batch_size": 4, "num_generations": 4,
            "max_steps": 1, "reward_weights": [1.0, 0.1]}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({**base, **overrides}), encoding="utf-8")
    return path


def _bad_records(tmp_path: Path) -> Path:
    good = make_tasks(2, seed=5)
    bad = {**good[1], "proof_id": "x", "annotation": {**good[1]["annotation"], "recoverable_error_steps": []}}
    return write_jsonl(tmp_path / "bad.jsonl", [good[0], bad])


@pytest.mark.parametrize("case, overrides, cli, fragments", [
    ("unknown key", {"num_generation": 4}, [], ["unknown key(s)", "'num_generation'",
                                                "did you mean 'num_generations'"]),
    ("missing data file", {"expert_files": ["data/nope.jsonl"]}, [], ["expert_files: data/nope.jsonl",
                                                                      "no such file"]),
    ("invalid records", {"expert_files": "BAD"}, [], ["bad.jsonl:2", "recoverable_error_steps"]),
    ("num_generations", {"num_generations": 3}, [], ["must be divisible by num_generations (3)", "Fix:"]),
    ("cli override", {}, ["--num_generations", "3"], ["must be divisible by num_generations (3)"]),
    ("weights", {"reward_weights": [1.0]}, [], ["reward_weights has 1 value"]),
    ("resume", {}, ["--resume_from_checkpoint", "last"], ["no checkpoint-* folder"]),
])
def test_entry_point_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture, case: str, overrides: dict,
                               cli: list[str], fragments: list[str]) -> None:
    from proofcheck.train.grpo import main

    if overrides.get("expert_files") == "BAD":
        overrides = {**overrides, "expert_files": [str(_bad_records(tmp_path))], "synthetic_count": 0}
    rc = main(["--config", str(_recipe(tmp_path, **overrides)), *cli])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("error: ")
    for frag in fragments:
        assert frag in err, (case, err)
    assert "Traceback" not in err


def test_help_is_light_and_lists_our_options() -> None:
    code = ("import sys; from proofcheck.train.args import quick_help; h = quick_help(); "
            "print('torch' in sys.modules, '--expert_files' in h, '--lora_target_modules' in h, '--help-all' in h)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split() == ["False", "True", "True", "True"]


def test_help_all_lists_trl_options(capsys: pytest.CaptureFixture) -> None:
    from proofcheck.train.grpo import main

    assert main(["--help-all"]) == 0
    out = capsys.readouterr().out
    for opt in ("--num_generations", "--vllm_mode", "--reward_weights", "--eval_passes", "--use_peft"):
        assert opt in out


def test_reads_the_folder_proofcheck_data_build_writes(tmp_path: Path) -> None:
    """`proofcheck data build --out DIR` output loads as is (DIR or DIR/dataset), up-sampled rows kept."""
    from proofcheck.data.build import build_dataset

    expert = write_jsonl(tmp_path / "expert.jsonl", [{**t, "origin": "expert", "problem_id": f"e{i}",
                                                      "proof_id": f"e{i}-p"} for i, t in
                                                     enumerate(make_tasks(10, seed=6))])
    build_dataset(tmp_path / "built", expert=str(expert), shares={"expert": 1.0, "repaired": 0.0, "synthetic": 0.0},
                  train_size=16, eval_fraction=0.2, seed=0)  # 2 of 10 problems held out, 8 proofs x 2
    for folder in (tmp_path / "built", tmp_path / "built" / "dataset"):
        data = build_training_data(ProofcheckScriptArguments(expert_files=[str(folder)], eval_max_samples=100))
        n_eval = len({r["proof_id"] for r in data.eval})
        assert n_eval == len(data.eval) > 0  # the build's eval split
        assert n_eval == 2 and len(data.train) == 16  # every training proof twice
        assert not {r["problem_id"] for r in data.train} & {r["problem_id"] for r in data.eval}


@pytest.mark.parametrize("families, expected", [
    (["chain"], {"chain"}),
    (["linear", "parity"], {"linear", "parity"}),
    (["all"], {"chain", "prose", "linear", "expand", "parity", "inequality"}),
])
def test_synthetic_rows_of_the_chosen_families(families: list[str], expected: set[str]) -> None:
    from proofcheck.data.families import family_of
    from proofcheck.train.data import synthetic_rows

    rows = synthetic_rows(24, seed=3, families=families)
    assert {family_of(r) for r in rows} == expected
    assert sum(r["is_correct"] for r in rows) == 12  # valid/flawed pairs


def test_balanced_batches_make_every_batch_half_valid() -> None:
    """With balanced_batches the rows come in valid/flawed pairs: every batch of 4 prompts (TRL with
    shuffle_dataset false takes them in order) is 2 valid + 2 flawed; without, the mix shuffles."""
    from proofcheck.train.data import build_training_data

    def batches(**kw: object) -> list[int]:
        rows = build_training_data(ProofcheckScriptArguments(synthetic_count=96, eval_fraction=0.0,
                                                             synthetic_families=["all"], **kw)).train
        return [sum(r["is_correct"] for r in rows[i:i + 4]) for i in range(0, len(rows), 4)]

    assert batches(balanced_batches=True) == [2] * 24
    assert set(batches()) != {2}  # the shuffled mix leaves some batches one-sided or 3:1
