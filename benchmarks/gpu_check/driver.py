"""GPU check for the machine the project can borrow: one H200, ~8 minutes, every stage under its own limit.

    bash benchmarks/gpu_check.sh                 # on the lent machine (docs/gpu-check.md)
    python benchmarks/gpu_check --device cpu     # the CPU rehearsal: the tiny model, same stages

Stages, each a child process in its own session, killed as a whole (`os.killpg` on the handle's
process group) when it outruns its limit or leaves processes behind; each writes its figures to
`<work>/stages/<stage>.json`, and after every stage this driver rewrites `gpu_check.json` and
`gpu_check.md` and copies them (with the stages' log tails) to `--out` (at most 8 small files: what the
device tool brings back from $OUT). The model, checkpoints and logs live in `--work` (under /tmp).
1. preflight: versions against the project's pins, requirements of the carried wheels, nvidia-smi,
   free disk; stops the check with what is missing;
2. machine: memory bandwidth and bf16 matmul peak measured now (the roofline and MFU's peak);
3. build: a Qwen3-8B-shaped random model with Qwen3's real vocabulary (151,936) and the tiny
   tokenizer (the CPU rehearsal: the tiny model);
4. plan: `train/grpo.py --plan` for the training stage's exact arguments (the longest prompt of its
   data as prompt length), set beside `torch.cuda.max_memory_allocated` measured by the next stage;
5. train: GRPO steps of configs/grpo/qwen3-8b-lora-1gpu.yaml with transformers generation
   (`use_vllm false`: no vLLM wheel fits the device tool), step split, tokens/s, MFU, and the
   held-out evaluation on that path;
6. decide: the k = 8 pass decision through an in-process transformers pass engine
   (gpu_check/hf_engine.py), passes/s against the memory-bandwidth roofline;
7. resume: a run resumed from the training stage's checkpoint, SIGKILLed between two checkpoints,
   then resumed from the newest complete one.
Exit 0 when every stage passed, 1 when one failed, timed out or was skipped, 2 when preflight
stopped the check; skipped (exit 0, says why) when `--device auto` finds no CUDA device.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(__file__).resolve().parent  # benchmarks/gpu_check: `python PACKAGE stage NAME` runs one stage
MIB = 2**20
OUT_MAX_FILES = 8            # the device tool brings back at most 8 files from $OUT ...
OUT_MAX_BYTES = 16 * MIB     # ... of at most 16 MiB each
LOG_TAIL_BYTES = 64 * 1024   # per stage, in stage_logs.txt
SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class Stage:
    """One stage: its limits in seconds on the GPU and in the CPU rehearsal, and the stages it needs."""

    name: str
    gpu_limit_s: float
    cpu_limit_s: float
    needs: tuple[str, ...] = ()
    required: bool = False  # a failure stops the check (nothing after it can run)


STAGES = (Stage("preflight", 60, 90, required=True), Stage("machine", 45, 60),
          Stage("build", 150, 90, required=True), Stage("plan", 45, 60, ("build",)),
          Stage("train", 150, 120, ("build",)), Stage("decide", 90, 90, ("build", "machine")),
          Stage("resume", 150, 150, ("train",)))
MIN_STAGE_S = 10  # a stage is skipped when less than this is left of the budget

# sizes per model shape: GRPO steps, completions per step (= generations of one prompt), tokens per
# completion, held-out proofs x passes, decision proofs x k, synthetic rows, free disk needed (GiB: the 8B
# model's 16.4 GB, two LoRA checkpoints of ~2.1 GB (fp32 adapter + AdamW states), one being written, the adapter)
SIZES: dict[str, dict[str, Any]] = {
    "qwen3-8b": {"steps": 3, "batch": 8, "generations": 8, "completion": 256, "eval_proofs": 8, "eval_passes": 4,
                 "decide_proofs": 4, "decide_passes": 8, "decide_tokens": 256, "synthetic": 64, "disk_gib": 26},
    "tiny": {"steps": 2, "batch": 4, "generations": 4, "completion": 16, "eval_proofs": 4, "eval_passes": 4,
             "decide_proofs": 2, "decide_passes": 8, "decide_tokens": 16, "synthetic": 32, "disk_gib": 1},
}


@dataclass
class StageRun:
    """What running one stage gave: "ok", "failed" or "timed_out", its seconds, exit code and stdout."""

    status: str
    seconds: float
    returncode: int | None
    stdout: str


def _kill_group(pgid: int) -> None:
    """SIGKILL the process group `pgid` (a stage's session: its children included); gone already is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_stage_detail(name: str, cmd: list[str], timeout_s: float, log: Path,
                     env: dict[str, str] | None = None) -> StageRun:
    """Run one stage in its own session; past `timeout_s` its whole process group is killed. After a
    normal end the group is killed too: a child it left running (a stray generation worker) would
    keep the GPU. Prints a message naming the stage, its limit and its log when it did not pass."""
    t0 = time.monotonic()
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env or dict(os.environ),
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=max(timeout_s, 1))
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            out, _ = proc.communicate()
            print(f"gpu_check: stage {name!r} did not finish within its {timeout_s:.0f} s limit: killed with its "
                  f"child processes. Log: {log}\n{_tail(log)}", flush=True)
            return StageRun("timed_out", time.monotonic() - t0, None, out or "")
        finally:  # also when this driver is stopped (SIGTERM from the outer limit): the stage's session goes too
            _kill_group(proc.pid)
    took = time.monotonic() - t0
    if proc.returncode != 0:
        print(f"gpu_check: stage {name!r} failed (exit {proc.returncode}) after {took:.0f} s. Log: {log}\n{_tail(log)}",
              flush=True)
        return StageRun("failed", took, proc.returncode, out)
    print(f"gpu_check: stage {name!r} done in {took:.0f} s", file=sys.stderr, flush=True)
    return StageRun("ok", took, 0, out)


def run_stage(name: str, cmd: list[str], timeout_s: float, log: Path, env: dict[str, str] | None = None) -> str | None:
    """`run_stage_detail`'s stdout (trainer log rows dropped), or None when the stage failed or timed out."""
    run = run_stage_detail(name, cmd, timeout_s, log, env)
    if run.status != "ok":
        return None
    return "\n".join(line for line in run.stdout.splitlines() if not line.startswith("{'"))


def _tail(log: Path, n: int = 3000) -> str:
    return log.read_text(errors="replace")[-n:] if log.is_file() else ""


def copy_out(files: list[Path], out: Path, max_files: int = OUT_MAX_FILES, max_bytes: int = OUT_MAX_BYTES
             ) -> dict[str, list[str]]:
    """Copy `files` (in order of importance) to the top of `out`: at most `max_files` plain files with
    safe names, each cut to its last `max_bytes`. Returns what was copied, cut and left out (and why)."""
    out.mkdir(parents=True, exist_ok=True)
    done: dict[str, list[str]] = {"copied": [], "truncated": [], "left_out": []}
    for f in files:
        if not f.is_file() or not SAFE_NAME.match(f.name):
            done["left_out"].append(f"{f.name} (not a plain file with a safe name)")
        elif len(done["copied"]) >= max_files:
            done["left_out"].append(f"{f.name} (over the {max_files}-file limit)")
        else:
            data = f.read_bytes()
            if len(data) > max_bytes:
                data = data[-max_bytes:]
                done["truncated"].append(f.name)
            tmp = out / f".{f.name}.tmp"
            tmp.write_bytes(data)
            tmp.replace(out / f.name)
            done["copied"].append(f.name)
    return done


def stage_logs(work: Path, names: list[str]) -> Path:
    """One file with the tail of every stage's log (one file, so that the 8-file limit holds)."""
    parts = []
    for n in names:
        log = work / "logs" / f"{n}.log"
        if log.is_file():
            data = log.read_bytes()[-LOG_TAIL_BYTES:].decode(errors="replace")
            parts.append(f"===== {n} ({log}, last {LOG_TAIL_BYTES // 1024} KiB) =====\n{data}")
    path = work / "stage_logs.txt"
    path.write_text("\n".join(parts))
    return path


def parse_limits(items: list[str]) -> dict[str, float]:
    """`--stage-limit NAME=SECONDS` items as a dict; a name that is no stage is refused."""
    names = {s.name for s in STAGES}
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in names or not value:
            raise SystemExit(f"--stage-limit {item}: give NAME=SECONDS with NAME one of {', '.join(sorted(names))}")
        out[name] = float(value)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                    help="auto: the GPU when torch sees one, else skip (exit 0); cpu: the rehearsal")
    ap.add_argument("--shape", choices=tuple(SIZES), help="model shape (default: qwen3-8b on cuda, tiny on cpu)")
    ap.add_argument("--work", help="work folder for the model, checkpoints and logs (default: a new /tmp folder, "
                    "removed at the end unless --keep-work)")
    ap.add_argument("--keep-work", action="store_true", help="keep --work at the end")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "runs" / "gpu_check"),
                    help="where the JSON, the Markdown and the log tails go (default: $OUT, else runs/gpu_check)")
    ap.add_argument("--budget", type=float, default=480, help="seconds for all stages together (default 480)")
    ap.add_argument("--stage-limit", action="append", default=[], metavar="NAME=SECONDS",
                    help="override one stage's limit (repeatable)")
    ap.add_argument("--only", help="comma-separated stages to run (the stages they need are not added)")
    ap.add_argument("--quick", action="store_true", help="accepted for run_all.py; same as the default")
    return ap.parse_args(argv)


def resolve_device(asked: str) -> str | None:
    """cuda / cpu, or None when `auto` finds no CUDA device (the check is then skipped)."""
    if asked != "auto":
        return asked
    import torch

    return "cuda" if torch.cuda.is_available() else None


def write_results(doc: dict[str, Any], work: Path, out: Path) -> None:
    """gpu_check.json and gpu_check.md in `work`, then copied (with the log tails) to `out`."""
    from .report import render

    (work / "gpu_check.json.tmp").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    (work / "gpu_check.json.tmp").replace(work / "gpu_check.json")
    (work / "gpu_check.md").write_text(render(doc))
    logs = stage_logs(work, list(doc["stages"]))
    doc["out"] = copy_out([work / "gpu_check.json", work / "gpu_check.md", logs], out)
    (work / "gpu_check.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    copy_out([work / "gpu_check.json"], out)


def blocked_by(stage: Stage, doc: dict[str, Any], left: float) -> str | None:
    """Why `stage` cannot run now (a stage it needs did not pass, or too little time is left), or None."""
    for need in stage.needs:
        got = doc["stages"].get(need, {}).get("status")
        if got != "ok":
            return f"needs stage {need!r}, which {'did not run' if got is None else got.replace('_', ' ')}"
    if left < MIN_STAGE_S:
        return f"{left:.0f} s left of the budget (a stage needs at least {MIN_STAGE_S} s)"
    return None


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM (gpu_check.sh's outer `timeout`) as SystemExit, so the running stage's session is killed
    on the way out: stages run in sessions of their own, which the signal to this group does not reach."""
    raise SystemExit(128 + signum)


def run_stages(doc: dict[str, Any], work: Path, out: Path, limits: dict[str, float], only: set[str] | None,
               budget: float) -> None:
    """Run the stages in order within `budget` seconds, recording each in `doc` and writing the results
    after each; a stage whose needs did not pass, or after a failed required one, is skipped with why."""
    device = doc["settings"]["device"]
    deadline = time.monotonic() + budget
    stopped = False
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    for stage in STAGES:
        if only is not None and stage.name not in only:
            continue
        left = deadline - time.monotonic()
        why = "an earlier required stage failed" if stopped else blocked_by(stage, doc, left)
        if why:
            print(f"gpu_check: stage {stage.name!r} skipped: {why}", flush=True)
            doc["stages"][stage.name] = {"status": "skipped", "reason": why}
            write_results(doc, work, out)
            continue
        limit = min(limits.get(stage.name, stage.gpu_limit_s if device == "cuda" else stage.cpu_limit_s), left)
        run = run_stage_detail(stage.name, [sys.executable, str(PACKAGE), "stage", stage.name, "--work",
                                            str(work)], limit, work / "logs" / f"{stage.name}.log", env)
        doc["stages"][stage.name] = {"status": run.status, "seconds": round(run.seconds, 1), "limit_s": round(limit),
                                     "returncode": run.returncode}
        if (result := work / "stages" / f"{stage.name}.json").is_file():
            doc[stage.name] = json.loads(result.read_text())
        stopped = stopped or (run.status != "ok" and stage.required)
        write_results(doc, work, out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    limits = parse_limits(args.stage_limit)
    device = resolve_device(args.device)
    if device is None:
        print("gpu_check: skipped (no CUDA device on this machine; --device cpu runs the CPU rehearsal)")
        return 0
    shape = args.shape or ("qwen3-8b" if device == "cuda" else "tiny")
    work = Path(args.work or tempfile.mkdtemp(prefix="proofcheck-gpu-check-", dir="/tmp")).resolve()
    out = Path(args.out).resolve()
    for sub in ("logs", "stages"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    settings = {"device": device, "shape": shape, "sizes": SIZES[shape], "work": str(work), "repo": str(REPO),
                "model": str(work / "model")}
    (work / "settings.json").write_text(json.dumps(settings, indent=2))
    doc: dict[str, Any] = {"check": "benchmarks/gpu_check", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                           "settings": settings, "budget_s": args.budget, "stages": {}}
    run_stages(doc, work, out, limits, {s.strip() for s in args.only.split(",")} if args.only else None, args.budget)
    from .report import render

    bad = [n for n, s in doc["stages"].items() if s["status"] != "ok"]
    doc.update(finished=time.strftime("%Y-%m-%d %H:%M:%S"), not_passed=bad)
    write_results(doc, work, out)
    print(render(doc))
    print(f"\nJSON: {out / 'gpu_check.json'}" + (f"; not passed: {', '.join(bad)}" if bad else ""))
    if args.work is None and not args.keep_work:
        try:
            shutil.rmtree(work)  # the model alone is 16 GB
        except OSError as e:
            print(f"gpu_check: could not remove the work folder {work}: {e}", file=sys.stderr)
    if doc["stages"].get("preflight", {}).get("status") not in (None, "ok"):
        return 2
    return 1 if bad else 0
