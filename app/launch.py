"""One launcher: the SFT warm-up, GRPO and serving command lines the demo, the ablations and `proofcheck
train` run, and the one runner that runs them with their output in a log.

A run is a typed value (`SftRun`, `GrpoRun`, `ServeRun`) and `command()` turns it into the argument list,
so the flags the demo and the ablation (`benchmarks/ablate`) pass are written once. The entry points are found in
the installed package (`grpo_script`: `proofcheck.train.grpo`'s file; the warm-up runs as
`python -m proofcheck.train.sft`, serving as `python -m proofcheck.app.cli serve`) and a recipe is a path
or a shipped name (`recipe_path`: the package data `proofcheck.configs`), so a launch needs no checkout
and works from any working directory, as `proofcheck train` does. `run_logged` runs a command in the
caller's working directory: a relative path means the same to the caller and to the run.

A GRPO run trains on a curriculum the caller wrote (`proofcheck.data.assembly.write_curriculum`: a
dataset folder with train/eval splits) with the data flags that take it as written (`data_args`): the
held-out split is the caller's, every training row is used once. The benchmarks' short runs train on
synthetic tasks `train/grpo.py` draws itself (`SyntheticTasks`); they give their sizes as recipe overrides
(`grpo_args`, `flag_args`), so every GRPO command line, the demo's, the ablations', the benchmarks' and the
GPU check's, is built here.

Example:
    >>> run = SftRun(model="m", out="o", data="d.jsonl", steps=4, lr=1e-3, lora_r=0, seed=0, prompt_style="compact")
    >>> run.command()[3:]
    ['--model', 'm', '--out', 'o', '--data', 'd.jsonl', '--steps', '4', '--lr', '0.001', '--lora-r', '0', '--seed', '0', '--prompt-style', 'compact']
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofcheck.data.assembly import ORIGINS, Curriculum


def grpo_script() -> Path:
    """Path of the installed `proofcheck.train.grpo` module (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("proofcheck.train.grpo")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("proofcheck.train.grpo is not installed; reinstall proofcheck (make install)")
    return Path(spec.origin)


def shipped_configs() -> Path | None:
    """The `configs/` folder shipped with proofcheck: the installed package's, else this checkout's."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("proofcheck.configs")
    except (ImportError, ValueError):
        spec = None
    for where in (list(spec.submodule_search_locations or []) if spec else []):
        if (Path(where) / "grpo").is_dir():
            return Path(where)
    checkout = Path(__file__).resolve().parents[1] / "configs"
    return checkout if checkout.is_dir() else None


def resolve_config(value: str, kind: str) -> Path | None:
    """`value` as a path when it is a file, else the shipped `configs/<kind>/` file of that name
    (with or without `.yaml`, with or without the `configs/<kind>/` prefix); None when neither exists."""
    path = Path(value)
    if path.is_file():
        return path
    root = shipped_configs()
    if root is None:
        return None
    for name in (path.name, f"{path.name}.yaml"):
        if (root / kind / name).is_file():
            return root / kind / name
    return None


def shipped_names(kind: str) -> list[str]:
    """The names of the shipped `configs/<kind>/*.yaml` files (for error messages)."""
    root = shipped_configs()
    return sorted(p.stem for p in (root / kind).glob("*.yaml")) if root else []


def recipe_path(recipe: str | Path) -> Path:
    """A recipe as a file: the path when it is one, else the shipped `configs/grpo/` recipe of that name
    (`configs/grpo/smollm2-cpu.yaml`, `smollm2-cpu`); a FileNotFoundError naming the shipped ones otherwise."""
    found = resolve_config(str(recipe), "grpo")
    if found is None:
        raise FileNotFoundError(f"recipe {recipe}: no such file, and no shipped recipe of that name (shipped: "
                                f"{', '.join(shipped_names('grpo')) or 'none found'})")
    return found.resolve()


def recipe_values(recipe: str | Path) -> dict[str, Any]:
    """The recipe YAML's values (`recipe_path` finds it): the one source of a recipe's settings."""
    import yaml

    return yaml.safe_load(recipe_path(recipe).read_text(encoding="utf-8")) or {}


@dataclass(frozen=True)
class Delta:
    """One deliberate difference from a recipe's value (a recipe YAML key's new value), with its reason."""

    value: Any
    reason: str


def with_deltas(recipe: str | Path, deltas: dict[str, Delta]) -> dict[str, Any]:
    """The recipe's values with `deltas` applied: what a run built from them trains with."""
    return {**recipe_values(recipe), **{k: d.value for k, d in deltas.items()}}


def fill_from_recipe(config: Any, fields: dict[str, str]) -> dict[str, Any]:
    """Set each attribute of `config` named in `fields` (attribute -> recipe key) that is None to the recipe's value
    with `config.deltas` applied; one given a different value becomes one more delta ("set by the caller").
    `config` has `recipe` and `deltas` (a dict, copied here). Returns the recipe's values with the deltas."""
    config.deltas = dict(config.deltas)
    values = with_deltas(config.recipe, config.deltas)
    for name, key in fields.items():
        given = getattr(config, name)
        if given is None:
            if key not in values:
                raise ValueError(f"recipe {config.recipe} sets no {key}: give {name} or a delta")
            setattr(config, name, values[key])
        elif given != values.get(key):
            config.deltas[key] = Delta(given, "set by the caller")
    return values


def delta_flags(deltas: dict[str, Delta], passed: Iterable[str]) -> list[str]:
    """`train/grpo.py` flags for the deltas a run does not pass by name (`passed`: the recipe keys it sets
    itself), e.g. `uncertainty_pool`: every delta reaches the trainer.

    >>> delta_flags({"learning_rate": Delta(1e-4, ""), "uncertainty_pool": Delta(64, ""), "x": Delta(True, "")},
    ...             ["learning_rate"])
    ['--uncertainty_pool', '64', '--x', 'true']
    """
    skip = set(passed)
    return [part for k, d in deltas.items() if k not in skip
            for part in (f"--{k}", str(d.value).lower() if isinstance(d.value, bool) else str(d.value))]


def recipe_line(recipe: str | Path, deltas: dict[str, Delta]) -> str:
    """One line naming the recipe and every delta with its reason (printed when a demo or ablation starts)."""
    parts = ", ".join(f"{k}={d.value:g} ({d.reason})" if isinstance(d.value, float) else f"{k}={d.value} ({d.reason})"
                      for k, d in deltas.items())
    return f"recipe {recipe} + deltas: {parts or 'none'}"


def recipe_record(recipe: str | Path, deltas: dict[str, Delta]) -> dict[str, Any]:
    """The recipe and its deltas as recorded in a summary: `{"path": ..., "deltas": {key: {value, reason}}}`."""
    return {"path": str(recipe), "deltas": {k: {"value": d.value, "reason": d.reason} for k, d in deltas.items()}}


@dataclass(frozen=True)
class SyntheticTasks:
    """Training data `train/grpo.py` draws itself: `count` synthetic tasks, `eval_fraction` of their problems
    held out (None: the recipe's); with `expert_files`, those files mixed in at `mix_ratios` (expert, repaired,
    synthetic)."""

    count: int
    eval_fraction: float | None = None
    expert_files: tuple[str | Path, ...] = ()
    mix_ratios: tuple[float, float, float] | None = None


def data_args(data: Curriculum | SyntheticTasks) -> list[str]:
    """train/grpo.py's data flags: a curriculum as written (every training row once, its eval split the held-out
    set, nothing added), or synthetic tasks.

    >>> data_args(Curriculum(Path("ds"), {"synthetic": 6, "repaired": 2}, 4))
    ['--expert_files', 'ds', '--synthetic_count', '0', '--mix_ratios', '0', '2', '6', '--train_size', '8', '--eval_fraction', '0']
    >>> data_args(SyntheticTasks(32, eval_fraction=0.2))
    ['--synthetic_count', '32', '--eval_fraction', '0.2']
    """
    if isinstance(data, Curriculum):
        n = sum(data.train_by_origin.values())
        return ["--expert_files", str(data.folder), "--synthetic_count", "0",
                "--mix_ratios", *(str(data.train_by_origin.get(o, 0)) for o in ORIGINS), "--train_size", str(n),
                "--eval_fraction", "0"]
    out = ["--expert_files", *map(str, data.expert_files)] if data.expert_files else []
    out += ["--mix_ratios", *map(str, data.mix_ratios)] if data.mix_ratios else []
    out += ["--synthetic_count", str(data.count)]
    return out + (["--eval_fraction", str(data.eval_fraction)] if data.eval_fraction is not None else [])


def flag_args(flags: dict[str, Any]) -> list[str]:
    """Recipe overrides as train/grpo.py flags: booleans as true/false, a list or tuple as several values.

    >>> flag_args({"use_vllm": False, "max_steps": 3, "reward_weights": (1.0, 0.1)})
    ['--use_vllm', 'false', '--max_steps', '3', '--reward_weights', '1.0', '0.1']
    """
    def one(v: Any) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)

    return [part for k, v in flags.items()
            for part in (f"--{k}", *(map(one, v) if isinstance(v, list | tuple) else (one(v),)))]


def grpo_args(recipe: str | Path | None, model: str | Path, output_dir: str | Path,
              data: Curriculum | SyntheticTasks, flags: dict[str, Any] | None = None) -> list[str]:
    """train/grpo.py's arguments (no interpreter, no script) for a run of `recipe` (None: the trainer's defaults)
    on `data`, with `flags` (`flag_args`) last: what an in-process trainer parses (`proofcheck.train.args.parse`)
    and what `grpo_command` runs."""
    head = ["--config", str(recipe_path(recipe))] if recipe is not None else []
    return [*head, "--model_name_or_path", str(model), "--output_dir", str(output_dir), *data_args(data),
            *flag_args(flags or {})]


def grpo_command(recipe: str | Path | None, model: str | Path, output_dir: str | Path,
                 data: Curriculum | SyntheticTasks, flags: dict[str, Any] | None = None) -> list[str]:
    """The command line that runs `grpo_args`' run: this interpreter on the installed `train/grpo.py`."""
    return [sys.executable, str(grpo_script()), *grpo_args(recipe, model, output_dir, data, flags)]


@dataclass
class SftRun:
    """One supervised warm-up (`python -m proofcheck.train.sft`) on a task file."""

    model: str | Path
    out: str | Path
    data: str | Path
    steps: int
    lr: float
    lora_r: int
    seed: int
    prompt_style: str
    time_budget_s: float | None = None   # None: every step
    lora_layers: int | None = None       # with LoRA: only the top N layers

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "proofcheck.train.sft", "--model", str(self.model), "--out", str(self.out),
               "--data", str(self.data), "--steps", str(self.steps), "--lr", str(self.lr),
               "--lora-r", str(self.lora_r), "--seed", str(self.seed)]
        cmd += ["--time-budget", f"{self.time_budget_s:.0f}"] if self.time_budget_s is not None else []
        cmd += ["--lora-layers", str(self.lora_layers)] if self.lora_r and self.lora_layers else []
        return [*cmd, "--prompt-style", self.prompt_style]


@dataclass
class GrpoRun:
    """One `train/grpo.py` run on a recipe plus named deltas, trained on the caller's curriculum (the demo's
    and the ablations' runs: held-out evaluation, no checkpoints)."""

    recipe: str | Path
    model: str | Path
    output_dir: str | Path
    dataset: Curriculum | SyntheticTasks  # a DatasetDict folder: train split, eval split (held out)
    max_steps: int
    learning_rate: float
    seed: int
    prompt_style: str
    eval_tasks: int
    eval_passes: int
    eval_at_start: bool = True
    eval_every_steps: int = 0
    eval_curve_samples: int | None = None  # held-out proofs of each curve point (with eval_every_steps)
    time_budget_s: float | None = None     # None: every step
    overrides: list[str] = field(default_factory=list)  # more train/grpo.py flags, last (they win)

    def command(self) -> list[str]:
        flags: dict[str, Any] = {"max_steps": self.max_steps, "learning_rate": self.learning_rate,
                                 "eval_at_start": self.eval_at_start, "eval_every_steps": self.eval_every_steps}
        if self.eval_curve_samples is not None:
            flags["eval_curve_samples"] = self.eval_curve_samples
        flags.update(prompt_style=self.prompt_style, eval_max_samples=self.eval_tasks, eval_passes=self.eval_passes,
                     include_reference_solution=False, save_strategy="no", seed=self.seed)
        if self.time_budget_s is not None:
            flags["time_budget_s"] = f"{self.time_budget_s:.0f}"
        return [*grpo_command(self.recipe, self.model, self.output_dir, self.dataset, flags), *self.overrides]


@dataclass
class ServeRun:
    """`proofcheck serve` on a trained model folder (the demo's scoring, the ablations' k-pass curve)."""

    model: str | Path
    port: int
    passes: int
    max_tokens: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "proofcheck.app.cli", "serve", "--model", str(self.model),
                "--port", str(self.port), "--passes", str(self.passes), "--max-tokens", str(self.max_tokens)]


def run_logged(cmd: list[str], log: str | Path, env: dict[str, str] | None = None,
               show: Callable[[str], None] | None = None) -> float:
    """Run `cmd` to its end in this working directory, its whole output kept in `log` and every line
    passed to `show` (progress); returns its seconds. A failure raises RuntimeError with the log's tail.

    The run gets the allocator `PROOFCHECK_ALLOCATOR` chooses (`proofcheck.allocator`: TCMalloc where installed),
    so every launched training run, the demo's and the benchmarks' alike, runs on the same one."""
    from proofcheck.allocator import ENV_VAR, choose_allocator

    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    child = {**os.environ, **(env or {})}
    child.update(choose_allocator(child.get(ENV_VAR, "")).env(child))
    t0 = time.perf_counter()
    with open(log, "w") as f, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                               env=child) as proc:
        for line in proc.stdout:
            f.write(line)
            if show is not None:
                show(line)
    if proc.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-15:])
        raise RuntimeError(f"`{' '.join(cmd[:4])} ...` exited {proc.returncode}; log {log}:\n{tail}")
    return time.perf_counter() - t0
