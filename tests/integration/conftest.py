"""Fixtures of the integration tests: the test rewards module (tests/integration/grpo_runs.py) on sys.path."""

from __future__ import annotations

from pathlib import Path

import pytest
from grpo_runs import REWARD_MODULE


@pytest.fixture(scope="module")
def reward_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("rewards")
    (d / "pc_test_rewards.py").write_text(REWARD_MODULE, encoding="utf-8")
    return d


@pytest.fixture
def test_rewards(reward_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(reward_dir))
    return reward_dir
