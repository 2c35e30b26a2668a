"""`make gpu-wheels` (benchmarks/gpu_check/wheels.py): the wheels carried to the lent GPU machine are the
project's versions for CPython 3.12, and they fit what one device call carries (64 MiB with the tree)."""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
MIB = 2**20


def test_wheel_versions_are_the_pins_and_what_the_pins_resolved_to() -> None:
    from gpu_check.wheels import WHEELS

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for v in project["optional-dependencies"].values() for r in v]
    pins = {r.split("==")[0]: r.split("==")[1] for r in reqs if "==" in r}
    for name in ("trl", "datasets", "pydantic"):
        assert WHEELS[name] == pins[name]
    for name in WHEELS:  # the project's virtualenv was installed from those pins
        assert WHEELS[name] == version(name), name


@pytest.mark.parametrize(("wheels_mib", "tree_mib", "refused"), [
    (4.4, 2.3, None), (47.0, 16.0, None), (49.0, 0.0, "over their 48 MiB share"),
    (40.0, 30.0, "exceed the 64 MiB"),
])
def test_the_wheels_must_fit_one_device_call(wheels_mib: float, tree_mib: float, refused: str | None) -> None:
    from gpu_check.wheels import fits

    got = fits(int(wheels_mib * MIB), int(tree_mib * MIB))
    assert got is None if refused is None else refused in got


def test_other_versions_in_the_folder_are_stale(tmp_path: Path) -> None:
    from gpu_check.wheels import stale_wheels

    for name in ("trl-1.15.0-py3-none-any.whl", "trl-1.16.0-py3-none-any.whl", "requests-2.0-py3-none-any.whl",
                 "pydantic_core-2.50.5-cp312-cp312-manylinux_2_17_x86_64.whl"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in stale_wheels(tmp_path)] == ["requests-2.0-py3-none-any.whl", "trl-1.15.0-py3-none-any.whl"]


def test_download_asks_for_cpython_312_manylinux_binaries_without_dependencies(tmp_path: Path) -> None:
    from gpu_check.wheels import download_command

    cmd = download_command("pydantic-core", "2.50.5", tmp_path)
    assert cmd[-1] == "pydantic-core==2.50.5" and {"--no-deps", "--only-binary=:all:"} <= set(cmd)
    assert cmd[cmd.index("--python-version") + 1] == "3.12" and "manylinux2014_x86_64" in cmd


def test_downloaded_wheels_are_complete_and_fit() -> None:
    from gpu_check.wheels import DEFAULT_DEST, WHEEL_LIMIT, WHEELS, wheel_name

    paths = sorted(DEFAULT_DEST.glob("*.whl"))
    if not paths:
        pytest.skip("no .gpu-wheels here (make gpu-wheels)")
    names = sorted(wheel_name(p) for p in paths)
    assert names == sorted((n.replace("-", "_"), v) for n, v in WHEELS.items())
    assert sum(p.stat().st_size for p in paths) <= WHEEL_LIMIT
