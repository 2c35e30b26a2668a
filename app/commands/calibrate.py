"""`proofcheck calibrate`: the k-pass rule calibrated for a verifier, stored in its model card.

Only argparse here; the handler imports vLLM / httpx when it runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from proofcheck.app.commands._common import EXIT_INCOMPLETE, EXIT_USAGE, add_command, fail, print_json

DESCRIPTION = """\
Verify labelled proofs (VerifierBench format: proofs with their expert label) with --max-k passes
once, and derive from those passes every rule "at least T of k" for k <= max-k: TPR, TNR and
Balanced F1 with standard errors, and tokens per proof with early stop. A k below max-k is the
average over all k-subsets of the passes. The operating point: by default the highest Balanced F1
among rules whose TNR is not below one pass's; --max-false-accept X: the fewest tokens per proof
among rules that accept at most a share X of flawed proofs.

Writes, in --out: the run's records (resumable with --resume), calibration.json, calibration.md
and calibration.png. The choice, the table and the data they were measured on go into the model's
proofcheck_prompt.json (--model DIR, or --card DIR with --endpoint; --no-card to measure only), where
`proofcheck serve --rule card` and `verify --rule card` read it and `score prover` reports its score
beside the pessimistic one. Calibrate on held-out proofs the model was not trained on."""


def register(sub: Any) -> None:
    from proofcheck.app.commands.score import _add_verifier_args

    p = add_command(sub, "calibrate", "Calibrate the k-pass decision rule on labelled proofs (max-k passes once, "
                    "every at_least:T of k) and store the choice in the model card.", DESCRIPTION)
    p.add_argument("--data", required=True, help="labelled proofs JSONL (VerifierBench format), held out from training")
    p.add_argument("--max-k", type=int, default=8, help="passes per proof; the table covers every k <= max-k")
    p.add_argument("--max-false-accept", type=float, default=None, metavar="X",
                   help="choose the fewest tokens per proof among rules whose false-accept rate (1 - TNR) is <= X "
                        "(default: the highest Balanced F1 with TNR not below one pass's)")
    p.add_argument("--with-reference", action="store_true", help="show the verifier the reference solution (as it "
                   "will be served; off by default)")
    p.add_argument("--card", metavar="DIR", help="with --endpoint: the served model's folder, whose card gets the "
                   "calibration")
    p.add_argument("--no-card", action="store_true", help="measure only: leave the model card as it is")
    _add_verifier_args(p)
    p.set_defaults(handler=_calibrate)


def _card_folder(args: argparse.Namespace) -> str | None:
    if args.no_card:
        return None
    return args.model if args.model else args.card


def _calibrate(args: argparse.Namespace) -> int:
    from proofcheck.app.commands.score import _check, _make_verifier, _model_card, _style, _template

    args.repeats = args.max_k  # _check's name for passes per proof
    if args.max_k < 1:
        return fail("--max-k must be >= 1", EXIT_USAGE)
    if args.max_false_accept is not None and not 0.0 <= args.max_false_accept <= 1.0:
        return fail(f"--max-false-accept {args.max_false_accept}: a rate between 0 and 1", EXIT_USAGE)
    if args.card and args.model:
        return fail("--card names the model folder for --endpoint; with --model the card is the folder's own: "
                    "drop --card", EXIT_USAGE)
    if (msg := _check(args)) is not None:
        return fail(msg, EXIT_USAGE)
    card = _model_card(args)
    try:
        style = _style(args, card)
    except ValueError as e:
        return fail(str(e), EXIT_USAGE)
    from proofcheck.bench.calibrate import calibrate
    from proofcheck.data.loaders import DataError
    from proofcheck.http_errors import EndpointStop
    from proofcheck.prompt_card import write_calibration
    from proofcheck.rundir import RunDirError

    try:
        template, phash = _template(args, style)
        verifier, verifier_id = _make_verifier(args, template, style, card)
        result = calibrate(args.data, verifier, verifier_id, args.out, max_k=args.max_k,
                           max_false_accept=args.max_false_accept, concurrency=args.concurrency, resume=args.resume,
                           max_tokens=verifier.max_tokens, seed=args.seed, with_reference=args.with_reference,
                           prompt_hash=phash)
    except EndpointStop as e:
        return fail(f"{e} (records so far are kept in {args.out}; rerun with --resume)", EXIT_INCOMPLETE)
    except (DataError, RunDirError, FileNotFoundError, ValueError) as e:
        return fail(str(e))
    if not result["complete"]:
        return fail(f"the run is incomplete ({result['run'].get('missing') or 'errored passes'}): no calibration; "
                    f"rerun with --resume (records are kept in {args.out})", EXIT_INCOMPLETE)
    folder = _card_folder(args)
    written = None
    if result["record"] is not None and folder:
        written = str(write_calibration(folder, result["record"]))
    if args.json:
        print_json({"choice": result["choice"], "card": written, "report": f"{args.out}/calibration.md",
                    "measured_on": result["measured_on"], "table": result["table"]})
    else:
        _print(result, written, args)
    return 0 if result["record"] is not None else 1


def _print(result: dict[str, Any], written: str | None, args: argparse.Namespace) -> None:
    from proofcheck.calibration import describe, lowest_false_accept

    if result["record"] is None:
        low = lowest_false_accept(result["table"])
        print(f"no rule meets --max-false-accept {args.max_false_accept:g}: the lowest false-accept rate is "
              f"{low['false_accept_rate']:.3f} ({low['rule']} of {low['k']}); raise it or --max-k", file=sys.stderr)
    else:
        print(f"chosen: {describe(result['record'])}")
    print(f"report: {args.out}/calibration.md  table: {args.out}/calibration.json  plot: {args.out}/calibration.png")
    if written:
        print(f"card: {written} (serve it with `proofcheck serve --model ... --rule card`)")
