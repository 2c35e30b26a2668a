"""The harder held-out evaluation: a trained verifier on proofs unlike any it was trained on (issue 49).

    python benchmarks/harder_heldout.py --model sft=runs/train-cpu/sft --model grpo=runs/train-cpu/grpo/merged \
        --avoid runs/train-cpu/data --n 64 --passes 4 --out runs/harder        # ~15 min per model, 2-core bf16
    python benchmarks/harder_heldout.py --out runs/harder --table-only              # the table from finished runs

Draws the slices of `proofcheck.data.heldout.HARDER` (unseen wordings, 3 more steps, 10x numbers, all three;
`--n` proofs each, half valid, every family in turn), disjoint by problem from the JSONL task sets in `--avoid`
(a demo / long-recipe run's data folder: its sft, grpo, dev and eval sets) and checked not to leak into them
(`leaks`: no shared problem, no held-out wording in a training proof), and writes them with their record
(`--out/data/split.json`). Each `--model NAME=DIR` is then run once over every slice by `proofcheck calibrate
--no-card` (`--passes` passes per proof, resumable: a finished run is reused) into `--out/NAME`, each pass allowed
the tokens the slices' longest gold verification needs (`pass_tokens`: a pass cut at its limit is never an
accept). The table gives, per model and slice (and per family within a slice with `--by-family`), the per-pass
TPR, TNR and Balanced F1 and the k-pass decision's (majority and unanimity of `--passes`) with standard errors
over proofs, from the records by `proofcheck.calibration` (the all-subsets rule). Written to `--out/HARDER.md`
and `--json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from _tables import publish

from proofcheck.calibration import ProofPasses, calibration_table, row_at
from proofcheck.data.families import family_names, family_selection
from proofcheck.data.heldout import HARDER, harder_splits, write_harder
from proofcheck.io import read_jsonl_tolerant

ALL_SLICES = "all slices"


def avoided_tasks(folder: str | Path | None) -> list[dict[str, Any]]:
    """Every task of the JSONL files in a run's data folder (its training and held-out sets)."""
    if folder is None:
        return []
    files = sorted(Path(folder).glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"{folder}: no task sets (*.jsonl) to keep the harder split apart from")
    return [t for f in files for t in read_jsonl_tolerant(f)]


def calibrate_command(model: str, data: Path, out: Path, passes: int, seed: int,
                      max_tokens: int | None = None) -> list[str]:
    """`proofcheck calibrate` over the slices, measuring only (the model card is left as it is), `max_tokens` a
    pass (`main` passes `pass_tokens`' choice; None: the limit the model was trained with)."""
    return [sys.executable, "-m", "proofcheck.app.cli", "calibrate", "--model", model, "--data", str(data),
            "--max-k", str(passes), "--no-card", "--seed", str(seed), "--out", str(out), "--resume",
            *(["--max-tokens", str(max_tokens)] if max_tokens else [])]


def pass_tokens(model: str, tasks: list[dict[str, Any]], given: int | None) -> tuple[int, str]:
    """Tokens per pass for `model` on `tasks`, and why: `given` (`--max-tokens`) as is, else the length the model
    was trained with raised to hold the slices' longest gold verification in the model's tokens, with 15% to
    spare (`data.rationale.fit_max_tokens`). The length slice's recomputed verifications run to ~700 tokens
    against 400 trained: at the trained length a valid long proof could not be judged correct."""
    if given is not None:
        return given, "--max-tokens"
    from transformers import AutoTokenizer

    from proofcheck.data.rationale import fit_max_tokens, longest_rationale
    from proofcheck.prompt_card import card_max_tokens, read_prompt_card

    tok = AutoTokenizer.from_pretrained(model)
    longest = longest_rationale(tasks, lambda text: len(tok(text, add_special_tokens=False)["input_ids"]))
    trained = card_max_tokens(read_prompt_card(model))
    tokens = fit_max_tokens(longest, trained)
    return tokens, f"the longest gold verification is {longest} tokens (+15%), trained with {trained or 'no record'}"


def cut_at(records: list[dict[str, Any]], tokens: int) -> list[dict[str, Any]]:
    """The records as a run limited to `tokens` a pass would have left them: a pass that wrote more is cut
    (`finish_reason` "length", which parses as invalid: never an accept). Seeded sampling writes the same first
    tokens whatever the limit, so one run at a larger limit also measures a smaller one."""
    def cut(t: dict[str, Any]) -> dict[str, Any]:
        return {**t, "finish_reason": "length"} if int(t["completion_tokens"]) > tokens else t
    return [{**r, "verifier_trials": [cut(t) for t in r["verifier_trials"]]} for r in records]


def slice_of(proof_id: str) -> str:
    """The slice a harder held-out proof belongs to, from its id (`synth-hard-size-00012-p0`)."""
    return next((name for name in HARDER if proof_id.startswith(f"synth-{name}-")), "other")


def _row(proofs: list[ProofPasses], passes: int) -> dict[str, Any] | None:
    if not any(p.is_correct for p in proofs) or all(p.is_correct for p in proofs):
        return None  # TPR and TNR need both kinds
    table = calibration_table(proofs, passes, resamples=300)
    one, major, unan = row_at(table, 1, 1), row_at(table, passes, passes // 2 + 1), row_at(table, passes, passes)
    return {"n": len(proofs), **{f"{k}": one[k] for k in ("tpr", "tnr", "bal_f1", "bal_f1_se")},
            "majority_bal_f1": major["bal_f1"], "majority_tnr": major["tnr"], "unanimous_bal_f1": unan["bal_f1"],
            "unanimous_tnr": unan["tnr"]}


def model_rows(records: list[dict[str, Any]], families: dict[str, str], passes: int,
               by_family: bool) -> dict[str, dict[str, Any]]:
    """Rows by slice (and `slice / family`), plus every slice together, from one model's calibrate records."""
    from proofcheck.bench.calibrate import proofs_from_records

    proofs = proofs_from_records(records)
    groups: dict[str, list[ProofPasses]] = {ALL_SLICES: proofs}
    for p in proofs:
        groups.setdefault(slice_of(p.proof_id), []).append(p)
        if by_family:
            groups.setdefault(f"{slice_of(p.proof_id)} / {families.get(p.proof_id, '?')}", []).append(p)
    return {name: row for name in sorted(groups, key=lambda g: (g != ALL_SLICES, g))
            if (row := _row(groups[name], passes)) is not None}


def markdown(results: dict[str, dict[str, dict[str, Any]]], passes: int) -> str:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}"
    lines = [f"| model | slice | n | per pass Bal-F1 | TPR | TNR | majority of {passes} Bal-F1 (TNR) | "
             f"unanimity of {passes} Bal-F1 (TNR) |", "|---|---|---|---|---|---|---|---|"]
    for model, rows in results.items():
        for name, r in rows.items():
            lines.append(f"| {model} | {name} | {r['n']} | {f(r['bal_f1'])} +- {f(r['bal_f1_se'])} | {f(r['tpr'])} | "
                         f"{f(r['tnr'])} | {f(r['majority_bal_f1'])} ({f(r['majority_tnr'])}) | "
                         f"{f(r['unanimous_bal_f1'])} ({f(r['unanimous_tnr'])}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", action="append", default=[], metavar="NAME=DIR", help="a trained verifier folder "
                   "(repeat: e.g. sft=runs/train-cpu/sft grpo=runs/train-cpu/grpo/merged)")
    p.add_argument("--avoid", help="a run's data folder: its *.jsonl task sets share no problem with the slices")
    p.add_argument("--n", type=int, default=64, help="proofs per slice (default 64, half valid)")
    p.add_argument("--families", default="all", help="families of the slices (default all)")
    p.add_argument("--passes", type=int, default=4, help="passes per proof (default 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, help="tokens per pass (default: the length the model was trained with, "
                   "raised to hold the slices' longest gold verification with 15%% to spare; a cut pass is invalid, never "
                   "an accept, and at the trained 400 most long expansions, equations and parity proofs could not be finished)")
    p.add_argument("--cut-at", type=int, metavar="TOKENS", help="also rows for the same passes cut at TOKENS (e.g. "
                   "the trained 400): what a smaller limit costs, from this run's records")
    p.add_argument("--out", default="runs/harder")
    p.add_argument("--by-family", action="store_true", help="also a row per family within each slice")
    p.add_argument("--table-only", action="store_true", help="the table from the finished runs in --out")
    p.add_argument("--json", help="write the rows as JSON here")
    args = p.parse_args(argv)
    models = dict(m.split("=", 1) if "=" in m else (Path(m).name, m) for m in args.model)
    out, data = Path(args.out), Path(args.out) / "data"
    if not args.table_only:
        if not models:
            p.error("give at least one --model NAME=DIR (or --table-only)")
        if not (data / "harder.jsonl").is_file():
            sets = harder_splits(args.n, seed=args.seed, families=family_selection(family_names(args.families)),
                                 avoid=avoided_tasks(args.avoid))
            write_harder(data, sets, args.seed, train=avoided_tasks(args.avoid))
            (data / "harder.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n"
                                                       for ts in sets.values() for t in ts), encoding="utf-8")
    tasks = read_jsonl_tolerant(data / "harder.jsonl")
    if not args.table_only:
        from proofcheck.app.launch import run_logged

        for name, model in models.items():
            tokens, why = pass_tokens(model, tasks, args.max_tokens)
            print(f"[harder] {name}: {model}, {tokens} tokens a pass ({why})", flush=True)
            run_logged(calibrate_command(model, data / "harder.jsonl", out / name, args.passes, args.seed, tokens),
                       out / "logs" / f"{name}.log")
    families = {t["proof_id"]: t["family"] for t in tasks}
    results = {}
    for run in sorted(d for d in out.iterdir() if (d / "records.jsonl").is_file()):
        from proofcheck.rundir import latest_records

        records = latest_records(read_jsonl_tolerant(run / "records.jsonl"), ("proof_id",), str(run))
        results[run.name] = model_rows(records, families, args.passes, args.by_family)
        if args.cut_at:
            results[f"{run.name}, cut at {args.cut_at}"] = model_rows(cut_at(records, args.cut_at), families,
                                                                     args.passes, args.by_family)
    return publish(out, "HARDER.md", results, lambda r: markdown(r, args.passes), args.json)


if __name__ == "__main__":
    sys.exit(main())
