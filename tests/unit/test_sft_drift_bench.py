"""benchmarks/sft_drift.py: the drift compares the first and last steps' medians, a finished arm is reused, and
the table reads each arm against the baseline."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import sft_drift  # noqa: E402


@pytest.mark.parametrize(("steps", "expected"), [
    ([5.0] * 32, {"first_s": 5.0, "last_s": 5.0, "drift": 1.0, "mean_s": 5.0}),
    ([5.0] * 16 + [7.5] * 16, {"first_s": 5.0, "last_s": 7.5, "drift": 1.5, "mean_s": 6.25}),
    # one slow step in a window moves its median only a little, not the mean's way
    ([5.0] * 15 + [50.0] + [5.0] * 16, {"first_s": 5.0, "last_s": 5.0, "drift": 1.0, "mean_s": 6.406}),
])
def test_drift_is_the_last_window_median_over_the_first(steps: list[float], expected: dict) -> None:
    assert sft_drift.drift(steps) == expected


def test_a_finished_arm_is_read_back_not_rerun(tmp_path: Path) -> None:
    row = {"env": {}, "steps": 64, "wall_s": 400.0, "peak_rss_gb": 9.5, "first_s": 5.6, "last_s": 7.0,
           "drift": 1.25, "mean_s": 6.2}
    (tmp_path / "glibc").mkdir()
    (tmp_path / "glibc" / "arm.json").write_text(json.dumps(row), encoding="utf-8")
    assert sft_drift.run_arm("glibc", {}, tmp_path / "no-model", tmp_path, 64) == row


def test_the_table_gives_each_arm_against_the_first() -> None:
    base = {"steps": 64, "first_s": 5.6, "last_s": 7.0, "drift": 1.25, "mean_s": 6.0, "peak_rss_gb": 9.6,
            "probe_gflops": [1100.0, 1090.0]}
    arm = {**base, "last_s": 5.8, "drift": 1.04, "mean_s": 5.0, "peak_rss_gb": 9.9}
    lines = sft_drift.table({"glibc": base, "no-trim": arm}).splitlines()
    assert "mean vs glibc" in lines[0]
    assert lines[2].endswith("| 1100, 1090 | 1.00x |") and "| 1.25x |" in lines[2]
    assert lines[3].endswith("| 1.20x |") and "| 1.04x |" in lines[3]


def test_an_arm_whose_library_is_missing_stops_before_any_run_with_the_install_command(monkeypatch, capsys,
                                                                                       tmp_path: Path) -> None:
    monkeypatch.setitem(sft_drift.ARMS, "jemalloc", {"LD_PRELOAD": str(tmp_path / "libjemalloc.so.2")})
    monkeypatch.setattr(sys, "argv", ["sft_drift.py", "--arms", "glibc,jemalloc", "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as stop:
        sft_drift.main()
    assert stop.value.code == 2 and "apt-get install libjemalloc2" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
