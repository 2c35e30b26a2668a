"""The ablation's k-pass curve: the reference verifier served (`proofcheck serve`), `kpass_max` passes per
proof on held-out and shipped annotated proofs, the curves averaged over seeds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .config import REFERENCE, AblateConfig


def kpass_samples(cfg: AblateConfig, model: Path, proofs: list[dict[str, Any]], env: dict[str, str],
                  tag: str, seed: int) -> list[dict[str, Any]]:
    """`kpass_max` passes per proof from `proofcheck serve` on `model` (no early stop), as outcomes + tokens."""
    import asyncio

    from proofcheck.app.launch import ServeRun
    from proofcheck.process import ServiceProcess, free_port
    from proofcheck.serve.verifier import make_verifier

    serve = ServeRun(model=model, port=free_port(), passes=cfg.kpass_max, max_tokens=cfg.max_tokens)
    url = serve.url
    with ServiceProcess(serve.command(), url + "/health", cfg.out / "logs" / f"serve-{tag}.log", env=env):
        verifier = make_verifier(endpoint=url)

        async def one(p: dict[str, Any], sem: asyncio.Semaphore) -> dict[str, Any]:
            async with sem:
                r = await verifier.verify(p["problem"], p["steps"], None, passes=cfg.kpass_max, rule="unanimous",
                                          all_passes=True, seed=seed)
            return {"proof_id": p["proof_id"], "is_correct": p["is_correct"],
                    "passes": [{"outcome": x.outcome, "tokens": x.completion_tokens} for x in r.passes]}

        async def main() -> list[dict[str, Any]]:
            sem = asyncio.Semaphore(4)
            try:
                return list(await asyncio.gather(*(one(p, sem) for p in proofs)))
            finally:
                await verifier.aclose() if hasattr(verifier, "aclose") else None

        return asyncio.run(main())


def _mean_curves(curves: list[dict[str, Any]]) -> dict[str, Any]:
    """Seeds' k-pass curves averaged key by key (None where any seed has None)."""
    from statistics import fmean

    out: dict[str, Any] = {}
    for rule in curves[0]:
        out[rule] = {}
        for k in curves[0][rule]:
            vals = [c[rule][k] for c in curves]
            out[rule][k] = {key: (None if any(v[key] is None for v in vals) else fmean(v[key] for v in vals))
                            for key in vals[0]}
    return out


def kpass_report(cfg: AblateConfig, held_out: list[dict[str, Any]], seeds: list[int], env: dict[str, str],
                 stage: Any) -> dict[str, Any]:
    """The reference arm's k-pass curves: each seed's trained verifier served, `kpass_max` passes on the first
    `kpass_tasks` held-out proofs and on the shipped annotated proofs (cached per seed), averaged over seeds."""
    from proofcheck.data.loaders import SAMPLES_DIR, load_records

    from .report import kpass_curve

    annotated = [{"proof_id": p.proof_id, "problem": p.problem, "steps": list(p.steps),
                  "is_correct": bool(p.gold_is_correct)}
                 for p in load_records(SAMPLES_DIR / "annotated.jsonl", "annotated")]
    held = held_out[: cfg.kpass_tasks]
    curves: dict[str, list[dict[str, Any]]] = {"heldout": [], "annotated": []}
    ks = tuple(k for k in (1, 2, 4, 8) if k <= cfg.kpass_max)
    for seed in seeds:
        merged = Path(json.loads((cfg.out / "runs" / f"{REFERENCE}-s{seed}" / "run_summary.json").read_text())
                      ["saved"]["merged"])

        def sample(merged: Path = merged, seed: int = seed) -> None:
            cache = cfg.out / "kpass" / f"{REFERENCE}-s{seed}.json"
            if not cache.is_file():
                got = {"heldout": kpass_samples(cfg, merged, held + annotated, env, f"s{seed}", seed)}
                cache.parent.mkdir(parents=True, exist_ok=True)
                cache.write_text(json.dumps({"heldout": got["heldout"][: len(held)],
                                             "annotated": got["heldout"][len(held):]}))
            for where, proofs in json.loads(cache.read_text()).items():
                curves[where].append(kpass_curve(proofs, ks))

        stage(f"seed {seed}: k-pass curve of the {REFERENCE} verifier ({cfg.kpass_max} passes, "
              f"{len(held)} held-out + {len(annotated)} annotated proofs)", sample)
    return {"arm": REFERENCE, "ks": list(ks), "heldout_n": len(held), "annotated_n": len(annotated),
            **{w: _mean_curves(c) for w, c in curves.items() if c},
            "per_seed": {w: c for w, c in curves.items()}}
