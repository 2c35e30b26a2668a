"""The demo's launches need no checkout: from a copy of the package laid out as pip installs it (pyproject's
`packages`, `package-dir` and `package-data`, nothing else) and another working directory, the demo's SFT,
GRPO and serving command lines name only installed files (the entry script, the shipped recipe), keep the
demo's relative paths relative to the caller's directory, and the entry points answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import importlib.util, json
from pathlib import Path
import proofcheck
from proofcheck.app.demo import DemoConfig, grpo_run, sft_run
from proofcheck.app.launch import ServeRun
from proofcheck.data.assembly import Curriculum
out = {"proofcheck": proofcheck.__file__,
       "modules": {m: importlib.util.find_spec(m).origin for m in
                   ("proofcheck.train.sft", "proofcheck.train.grpo", "proofcheck.app.cli")}}
for name, cfg in (("default", DemoConfig()), ("quick", DemoConfig.quick()), ("full", DemoConfig.full_recipe())):
    data = cfg.workdir / "data"
    cur = Curriculum(data / "dataset", {"synthetic": 8}, 4)
    out[name] = {"recipe": cfg.recipe, "grpo": grpo_run(cfg, cfg.workdir / "sft", cur, 600.0).command(),
                 "sft": sft_run(cfg, cfg.workdir / "model", data, 300.0).command()}
out["serve"] = ServeRun(model="runs/demo/grpo/merged", port=8765, passes=2, max_tokens=8).command()
print(json.dumps(out))
"""


def install_copy(site: Path) -> Path:
    """The package as setuptools installs it, under `site`: each listed package's modules and its package data."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    dirs = tool["package-dir"]
    for pkg in tool["packages"]:
        root = next(p for p in sorted(dirs, key=len, reverse=True) if pkg == p or pkg.startswith(p + "."))
        src = REPO / dirs[root] / Path(*pkg[len(root):].lstrip(".").split(".")) if pkg != root else REPO / dirs[root]
        dst = site / Path(*pkg.split("."))
        dst.mkdir(parents=True, exist_ok=True)
        for f in src.glob("*.py"):
            shutil.copy2(f, dst / f.name)
        for pattern in tool["package-data"].get(pkg, []):
            for f in src.glob(pattern):
                if f.is_file():
                    (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, dst / f.relative_to(src))
    return site


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("installed")
    site = install_copy(base / "site")
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}  # the installed copy, not the checkout
    return site, elsewhere, env


def test_the_demos_command_lines_name_only_installed_files(installed: tuple[Path, Path, dict[str, str]]) -> None:
    site, elsewhere, env = installed
    got = subprocess.run([sys.executable, "-c", PROBE], cwd=elsewhere, env=env, capture_output=True, text=True,
                         timeout=120)
    assert got.returncode == 0, got.stderr[-3000:]
    out = json.loads(got.stdout)
    assert Path(out["proofcheck"]).is_relative_to(site)
    assert all(Path(origin).is_relative_to(site) for origin in out["modules"].values()), out["modules"]
    for name in ("default", "quick", "full"):
        grpo, sft = out[name]["grpo"], out[name]["sft"]
        script, recipe = Path(grpo[1]), Path(grpo[grpo.index("--config") + 1])
        assert script == Path(out["modules"]["proofcheck.train.grpo"]) and script.is_file()
        assert recipe.is_file() and recipe.is_relative_to(site / "proofcheck" / "configs" / "grpo"), recipe
        assert recipe.name == Path(out[name]["recipe"]).name
        assert sft[1:3] == ["-m", "proofcheck.train.sft"]
        for cmd in (grpo, sft):  # relative paths stay relative: the run resolves them in the caller's directory
            assert not any(str(REPO) in arg for arg in cmd[1:]), cmd
            for flag in ("--output_dir", "--expert_files", "--out", "--data"):
                if flag in cmd:
                    assert not Path(cmd[cmd.index(flag) + 1]).is_absolute(), (flag, cmd)
    assert out["serve"][1:4] == ["-m", "proofcheck.app.cli", "serve"]


@pytest.mark.parametrize("entry", [["{grpo}", "--help"], ["-m", "proofcheck.train.sft", "--help"],
                                   ["-m", "proofcheck.app.cli", "serve", "--help"]])
def test_the_installed_entry_points_answer_from_another_directory(installed: tuple[Path, Path, dict[str, str]],
                                                                  entry: list[str]) -> None:
    site, elsewhere, env = installed
    cmd = [sys.executable, *(a.format(grpo=site / "proofcheck" / "train" / "grpo.py") for a in entry)]
    got = subprocess.run(cmd, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr[-3000:]
    assert "usage" in got.stdout.lower() or "--config" in got.stdout


def test_a_launch_runs_in_the_callers_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from proofcheck.app.launch import run_logged

    monkeypatch.chdir(tmp_path)
    shown: list[str] = []
    seconds = run_logged([sys.executable, "-c", "import os; print(os.getcwd())"], "logs/run.log", show=shown.append)
    assert seconds >= 0 and Path(shown[0].strip()).resolve() == tmp_path.resolve()
    assert (tmp_path / "logs" / "run.log").read_text().strip() == shown[0].strip()
    with pytest.raises(RuntimeError, match="exited 3; log logs/fail.log"):
        run_logged([sys.executable, "-c", "raise SystemExit(3)"], "logs/fail.log")


@pytest.mark.parametrize("setting", ["", "glibc"])
def test_a_launch_runs_on_the_allocator_its_environment_chooses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 setting: str) -> None:
    from proofcheck.allocator import ENV_VAR, choose_allocator
    from proofcheck.app.launch import run_logged

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    shown: list[str] = []
    code = "from proofcheck.allocator import loaded_allocator; print(loaded_allocator())"
    run_logged([sys.executable, "-c", code], "logs/alloc.log", env={ENV_VAR: setting}, show=shown.append)
    assert shown[-1].strip() == choose_allocator(setting).name   # glibc's when asked, TCMalloc where installed
