"""Every shipped recipe trains on a dataset built from expert proofs alone (the README's GPU path).

The README's walkthrough builds its training set with `proofcheck data build --expert ...` and
no repaired proofs; a recipe whose `mix_ratios` gives repaired rows a share would stop at the
training step with a MixError. Each recipe in configs/grpo is parsed with that folder as its
`expert_files` and its training rows are assembled exactly as train/grpo.py does, without a model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from proofcheck.app.cli import main

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted((REPO / "configs" / "grpo").glob("*.yaml"))


@pytest.fixture(scope="module")
def expert_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder `proofcheck data build --expert data/samples/annotated.jsonl` writes (no other origin)."""
    out = tmp_path_factory.mktemp("expert-only") / "dataset"
    rc = main(["data", "build", "--expert", str(REPO / "data" / "samples" / "annotated.jsonl"),
               "--eval-fraction", "0.1", "--out", str(out)])
    assert rc == 0
    return out


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_recipe_accepts_an_expert_only_dataset(path: Path, expert_only: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from proofcheck.train.args import parse
    from proofcheck.train.data import build_training_data

    monkeypatch.chdir(REPO)
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    gpu = bool(raw.get("bf16")) and not raw.get("use_cpu")
    script, _, _ = parse(["--config", str(path), "--expert_files", str(expert_only),
                          *(["--bf16", "false"] if gpu else [])], require_data=False)
    data = build_training_data(script)  # raises ConfigError (MixError inside) when the mix cannot be met
    assert data.train_counts.get("expert", 0) > 0, data.train_counts
    assert set(data.train_counts) <= {"expert", "synthetic"}
    assert data.eval, "the folder's eval split (or the hold-out) gives a held-out set"


def test_a_mix_that_needs_repaired_rows_still_names_the_fix(expert_only: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check the recipes used to fail stays loud: a repaired share without repaired data is an error."""
    from proofcheck.train.args import parse
    from proofcheck.train.config import ConfigError
    from proofcheck.train.data import build_training_data

    monkeypatch.chdir(REPO)
    script, _, _ = parse(["--config", str(REPO / "configs/grpo/tiny-cpu.yaml"), "--expert_files", str(expert_only),
                          "--mix_ratios", "0.7", "0.3", "0.0"], require_data=False)
    with pytest.raises(ConfigError, match="set that share to 0"):
        build_training_data(script)
