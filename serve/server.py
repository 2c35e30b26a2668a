"""Start the verification service: reserve the port, build the engine and service once, then run uvicorn.

`proofcheck serve` parses its flags (app/commands/serve.py) and calls `run_server`.
The engine is vLLM in-process (`--model`, optional `--lora name=path`, engine arguments passed
through) or a remote vLLM OpenAI-compatible server (`--endpoint` + `--endpoint-model`).
A model folder's `proofcheck_prompt.json` (the adapter's first) sets what the flags leave unset: the
prompt style, the chat template options and the tokens per pass it was trained with, and an engine
context long enough for them (`proofcheck.prompt_card.generation_defaults`). Fronting `--endpoint`,
`--card DIR` names the served model's folder, whose card applies the same way.
The decision rule: `--rule` (default unanimous, the paper's), or `--rule card`, the rule calibrated for
the model and stored in its card (`resolve_rule`); `GET /health` says which rule is served and why.
Shutdown (SIGINT/SIGTERM) is graceful: uvicorn stops accepting connections and waits for the
open requests, then the app's lifespan drains the service and closes the engine.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from typing import Any

from proofcheck.serve.verifier import DEFAULT_PASSES, DEFAULT_RULE


def parse_key_value(item: str, flag: str) -> tuple[str, str]:
    """`NAME=VALUE` -> (NAME, VALUE); a ValueError naming the flag otherwise."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise ValueError(f"{flag} expects NAME=VALUE, got {item!r}")
    return key.strip(), value.strip()


def parse_engine_args(items: list[str]) -> dict[str, Any]:
    """`--engine-arg KEY=VALUE` items -> vLLM engine kwargs (VALUE read as JSON when it parses)."""
    out: dict[str, Any] = {}
    for item in items:
        key, value = parse_key_value(item, "--engine-arg")
        try:
            out[key.replace("-", "_")] = json.loads(value)
        except ValueError:
            out[key.replace("-", "_")] = value
    return out


@dataclass
class ServeConfig:
    """Everything `proofcheck serve` needs; see `proofcheck serve --help` for each field."""

    model: str | None = None
    served_model_name: str | None = None
    lora: tuple[str, str] | None = None
    endpoint: str | None = None
    endpoint_model: str | None = None
    endpoint_api_key: str | None = None
    passes: int | None = None  # None: the card's k under --rule card, else 8
    rule: str = DEFAULT_RULE  # any proofcheck.decision rule, or "card"
    card: str | None = None  # with --endpoint: the served model's folder, whose proofcheck_prompt.json applies
    temperature: float = 1.0
    max_tokens: int | None = None  # None: the card's max_completion_length, else 1024
    max_model_len: int | None = None  # None: room for a prompt and max_tokens, at least 4096
    seed: int = 0
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    max_queue: int = 64
    max_proof_chars: int = 100_000
    drain_timeout_s: float = 600.0
    engine_args: dict[str, Any] = field(default_factory=dict)
    log_level: str = "info"
    constrain: str | None = None  # structured outputs on every pass (--constrain-format): "steps" or verdicts
    chat_template_kwargs: dict[str, Any] | None = None  # e.g. {"enable_thinking": true}; None: the card's, else {}
    prompt_style: str | None = None  # --prompt-style; None = the model's proofcheck_prompt.json, else full

    @property
    def adapter(self) -> str | None:
        """The LoRA adapter's folder (`--lora NAME=PATH`'s PATH), None without one."""
        return self.lora[1] if self.lora else None

    def __post_init__(self) -> None:
        if (self.model is None) == (self.endpoint is None):
            raise ValueError("give --model PATH (start vLLM in-process) or --endpoint URL (front a vLLM server)")
        if self.card is not None and self.model is not None:
            raise ValueError("--card names the served model's folder when fronting --endpoint; with --model the "
                             "service reads the model folder's own card: drop --card")
        if self.endpoint is not None and (self.lora or self.engine_args):
            raise ValueError("--lora and engine arguments apply to an in-process engine; with --endpoint, start "
                             "the vLLM server with --enable-lora --lora-modules NAME=PATH and pass --endpoint-model")


def served_style(cfg: ServeConfig, card: dict[str, Any] | None) -> str:
    """The prompt style the service renders: --prompt-style, else the card's, else full (warns on a mismatch)."""
    import sys

    from proofcheck.prompt_card import choose_style, weights_folder

    style, warning = choose_style(cfg.prompt_style, card)
    if warning:
        print(f"warning: {weights_folder(cfg.model, cfg.adapter)}: {warning}", file=sys.stderr)
    return style


def served_card(cfg: ServeConfig) -> dict[str, Any] | None:
    """The served weights' card: the adapter's first (requests use it), else the model folder's; None
    when fronting an endpoint or for weights not trained by proofcheck."""
    from proofcheck.prompt_card import read_prompt_card, weights_card

    if not cfg.model:
        return read_prompt_card(cfg.card) if cfg.card else None
    return weights_card(cfg.model, cfg.adapter)


def served_calibration(cfg: ServeConfig) -> dict[str, Any] | None:
    """The calibration record in the served weights' card (the adapter's first, as `served_card`), or None."""
    from proofcheck.prompt_card import read_calibration

    folders = [cfg.adapter, cfg.model] if cfg.model else [cfg.card]
    return next((c for f in folders if f and (c := read_calibration(f)) is not None), None)


@dataclass
class ServedRule:
    """What the service decides with, and why (`GET /health`)."""

    rule: str
    passes: int
    source: str  # default | flag | card
    reason: str
    card_rule: tuple[str, int, str] | None  # the card's calibrated rule, served or not


def resolve_rule(cfg: ServeConfig) -> ServedRule:
    """The rule and k the service serves: `--rule card` the card's calibrated choice (its k unless
    `--passes` says the same), else `--rule` with `--passes` (default 8). ValueError with the fix for
    a rule that cannot decide k passes, or `--rule card` without a calibrated card."""
    import sys

    from proofcheck.decision import CARD_RULE, check_rule, check_rule_name
    from proofcheck.prompt_card import card_rule

    check_rule_name(cfg.rule, allow_card=True)
    where = cfg.adapter or cfg.model or cfg.card or "the endpoint's model (name its folder with --card DIR)"
    record = served_calibration(cfg)
    calibrated = None
    if record is not None or cfg.rule == CARD_RULE:
        try:
            calibrated = card_rule({"calibration": record} if record is not None else None, where)
        except ValueError:
            if cfg.rule == CARD_RULE:
                raise
            print(f"warning: {where}: its card's calibration is malformed and is ignored", file=sys.stderr)
    if cfg.rule == CARD_RULE:
        assert calibrated is not None
        rule, k, why = calibrated
        if cfg.passes is not None and cfg.passes != k:
            raise ValueError(f"--passes {cfg.passes}: the card's rule is {rule} of {k} passes; drop --passes, or "
                             f"name a rule for {cfg.passes} passes (e.g. --rule at_least:T)")
        return ServedRule(rule, k, "card", f"calibrated for this model (--rule card): {why}", calibrated)
    k = cfg.passes or DEFAULT_PASSES
    check_rule(cfg.rule, k)
    if cfg.rule == DEFAULT_RULE:
        return ServedRule(cfg.rule, k, "default", "the paper's pessimistic rule (the default): accept only if "
                          f"all {k} passes accept", calibrated)
    return ServedRule(cfg.rule, k, "flag", f"--rule {cfg.rule} of {k} passes", calibrated)


def served_generation(cfg: ServeConfig, card: dict[str, Any] | None, warn: bool = True) -> tuple[Any, int]:
    """(`GenerationDefaults`: template options and tokens per pass, engine context) for `cfg`: each flag
    set wins, else the card's, else the defaults; with `warn`, a warning on stderr for each flag that
    departs from the card. A context shorter than a pass may be is a ValueError with the fix."""
    import sys

    from proofcheck.prompt_card import generation_defaults, weights_folder

    gen = generation_defaults(card, cfg.chat_template_kwargs, cfg.max_tokens)
    for warning in gen.warnings if warn else []:
        print(f"warning: {weights_folder(cfg.model, cfg.adapter)}: {warning}", file=sys.stderr)
    model_len = cfg.max_model_len or gen.max_model_len
    if cfg.model and model_len < gen.max_tokens:
        raise ValueError(f"--max-model-len {model_len} is shorter than --max-tokens {gen.max_tokens} (the most a "
                         f"pass may generate); raise --max-model-len to at least {gen.max_model_len}, or drop it")
    return gen, model_len


def check_config(cfg: ServeConfig) -> None:
    """Raise ValueError (with the fix) for settings that contradict each other or the model's card,
    before an engine starts."""
    served_generation(cfg, served_card(cfg), warn=False)
    resolve_rule(cfg)


def build_service(cfg: ServeConfig) -> Any:
    """The engine, verifier and service for `cfg` (heavy imports happen here)."""
    from proofcheck.serve.service import VerificationService
    from proofcheck.serve.verifier import Verifier, first_model

    card = served_card(cfg)
    served = resolve_rule(cfg)
    style = served_style(cfg, card)
    gen, model_len = served_generation(cfg, card)
    if cfg.endpoint is not None:
        from proofcheck.serve.engines import RemoteEngine

        name = cfg.endpoint_model or first_model(cfg.endpoint, api_key=cfg.endpoint_api_key)
        engine: Any = RemoteEngine(cfg.endpoint, name, api_key=cfg.endpoint_api_key,
                                   chat_template_kwargs=gen.chat_template_kwargs)
        kind, names, default = "remote", [name], name
    else:
        from proofcheck.serve.inprocess import InProcessEngine

        engine = InProcessEngine(cfg.model or "", lora=cfg.lora, seed=cfg.seed, max_model_len=model_len,
                                 served_name=cfg.served_model_name,
                                 chat_template_kwargs=gen.chat_template_kwargs, **cfg.engine_args)
        kind, names, default = "in-process", engine.model_names(), engine.default_model
    verifier = Verifier(engine, passes=served.passes, rule=served.rule, temperature=cfg.temperature, constrain=cfg.constrain,
                        max_tokens=gen.max_tokens, model=default, prompt_style=style)
    return VerificationService(verifier, engine_kind=kind, model_names=names, max_queue=cfg.max_queue,
                               max_proof_chars=cfg.max_proof_chars, max_tokens=gen.max_tokens,
                               trained_with_reference=card["with_reference"] if card else None,
                               card_rule=served.card_rule, rule_source=served.source, rule_reason=served.reason)


class ServerThread:
    """Run an app with uvicorn in a background thread on 127.0.0.1 (tests, benchmarks).

    `stop()` asks uvicorn to exit the way a signal does (graceful: open requests finish, then
    the lifespan drains the service) and joins the thread.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0):
        import uvicorn

        self._server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                                     timeout_graceful_shutdown=60))
        self.host = host
        self.port = port
        self._thread: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> ServerThread:
        import threading
        import time

        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the service thread did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self, timeout_s: float = 120.0) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def reserve_port(host: str, port: int) -> socket.socket:
    """Bind `host:port` now (listening starts once the service is up), or exit saying who must move.

    Taken before the engine loads: a busy port fails in a second rather than after the model is
    built, and the engine's own ports (vLLM picks free ones while it starts) cannot land on ours.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise SystemExit(f"proofcheck serve: cannot listen on {host}:{port}: {exc.strerror}. Another process "
                         f"holds the port: stop it, or pass a free one with --port.") from exc
    return sock


def run_server(cfg: ServeConfig) -> None:
    """Reserve the port, build everything once, then serve until SIGINT/SIGTERM (graceful)."""
    import uvicorn

    from proofcheck.serve.app import create_app

    sock = reserve_port(cfg.host, cfg.port)
    service = build_service(cfg)
    app = create_app(service, api_key=cfg.api_key, drain_timeout_s=cfg.drain_timeout_s)
    print(f"proofcheck serve: {service.engine_kind} engine, model {service.default_model}, "
          f"{service.verifier.passes} passes ({service.verifier.rule}: {service.rule_reason}), up to {service.max_tokens} tokens a pass, on "
          f"http://{cfg.host}:{cfg.port}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, host=cfg.host, port=cfg.port, log_level=cfg.log_level,
                                           timeout_graceful_shutdown=int(cfg.drain_timeout_s)))
    server.run(sockets=[sock])
    if not server.started:
        raise SystemExit("proofcheck serve: the HTTP server did not start; see the log above")
