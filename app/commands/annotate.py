"""`proofcheck annotate`: the expert annotation web app, and agreement between annotators."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import Any

from proofcheck.app.commands._common import EXIT_USAGE, add_command, fail

DESCRIPTION = """\
Serve a queue of stepped proofs to expert annotators in the browser (http://HOST:PORT/).
For each proof they mark the first fatal error step (at most one), the recoverable error
steps before it, a reviewer comment and a remark, or report the item as broken. Every save
is validated (the label rules of data/samples/README.md) and fsynced to OUT's journal (X.journal.jsonl) before
it is acknowledged; OUT (one AdvancedMathBench record per proof and annotator) and
X.broken.jsonl are rebuilt atomically from it, so a restart resumes where the queue was.

  proofcheck annotate --input proofs.jsonl --out annotated.jsonl [--port 8800]
  ANNOTATE_TOKENS=alice:s3cret,bob:hunter2 proofcheck annotate ... --token-env ANNOTATE_TOKENS
  proofcheck annotate --agreement annotated.jsonl     # kappa, fatal-step agreement, disagreements"""


def register(sub: Any) -> None:
    p = add_command(sub, "annotate", "Expert annotation web app; --agreement compares annotators.", DESCRIPTION)
    p.add_argument("--input", help="proofs to annotate (JSONL: problem fields + proof_id + steps; "
                                   "optional verifier_passes / selection statistics are shown collapsed)")
    p.add_argument("--out", help="annotated output JSONL (journal and broken-items file are written beside it)")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    p.add_argument("--port", type=int, default=8800, help="TCP port")
    p.add_argument("--token-env", default=None, metavar="VAR",
                   help="environment variable holding `name:token,name2:token2`; without it annotators "
                        "just type a name (fine on 127.0.0.1 only)")
    p.add_argument("--agreement", default=None, metavar="ANNOTATED",
                   help="instead of serving: print agreement between annotators of this output file")
    p.set_defaults(handler=_annotate)


def _agreement(path: str) -> int:
    from proofcheck.data.annotate.agreement import compute_agreement, format_report, load_annotations

    try:
        labelled = load_annotations(path)
    except (FileNotFoundError, ValueError) as e:
        return fail(str(e))
    sys.stdout.write(format_report(compute_agreement(labelled), path))
    return 0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _annotate(args: argparse.Namespace) -> int:
    if args.agreement:
        if args.input or args.out:
            return fail("--agreement reads an output file; do not combine it with --input/--out", EXIT_USAGE)
        return _agreement(args.agreement)
    if not args.input or not args.out:
        return fail("pass --input PROOFS.jsonl and --out ANNOTATED.jsonl (or --agreement ANNOTATED.jsonl)", EXIT_USAGE)
    if not 0 < args.port < 65536:
        return fail(f"--port {args.port} is not a TCP port", EXIT_USAGE)

    from proofcheck.data.annotate.auth import Authenticator, parse_tokens

    tokens = None
    if args.token_env:
        spec = os.environ.get(args.token_env)
        if spec is None:
            return fail(f"--token-env {args.token_env}: the variable is not set; "
                        f"export {args.token_env}=name:token,name2:token2", EXIT_USAGE)
        try:
            tokens = parse_tokens(spec, f"${args.token_env}")
        except ValueError as e:
            return fail(str(e))
    elif not _is_loopback(args.host):
        print(f"warning: serving on {args.host} without --token-env: anyone who can reach it can annotate "
              "under any name", file=sys.stderr)

    from proofcheck.data.annotate.service import AnnotationService

    try:
        service = AnnotationService.open(args.input, args.out)
    except (FileNotFoundError, ValueError) as e:
        return fail(str(e))

    import uvicorn

    from proofcheck.data.annotate.app import create_app

    app = create_app(service, Authenticator(tokens))
    print(f"proofcheck annotate: {service.total} proofs from {args.input}; {service.n_saved} saved "
          f"annotation(s) resumed from {service.journal_path}; output {args.out}", flush=True)
    print(f"open http://{args.host}:{args.port}/ in a browser", flush=True)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        service.close()
    return 0
