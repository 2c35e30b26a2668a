"""Helpers shared by the CLI subcommands (all light: no heavy imports)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from proofcheck.protocol import PROMPT_STYLES


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows each option's default once, and keeps the description's line breaks.

    argparse's defaults formatter appends "(default: X)" to every option, so an option whose help
    already says its default ("(default: the first model it lists)") read "... (default: None)".
    Here the default is appended only when it says something: not for None, False or "" (unset
    options, flags), and not when the help text already names the default.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text.lower() or action.default is None or action.default is False or action.default == "":
            return text
        return super()._get_help_string(action)


def add_command(sub: Any, name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
    """Add a subcommand parser with our formatter."""
    return sub.add_parser(name, help=help, description=description or help, formatter_class=HelpFormatter)


CARD_DEFAULT = "what the model's proofcheck_prompt.json says it was trained with"
MAX_TOKENS_CLIENT_HELP = ("max tokens per pass (default: with --model, " + CARD_DEFAULT + ", else 1024; against a "
                          "proofcheck service, the service's own --max-tokens, which is also the most it allows)")


def add_chat_template_kwargs(p: argparse.ArgumentParser) -> None:
    """`--chat-template-kwargs JSON`: the chat template's switches, set explicitly on every prompt."""
    p.add_argument("--chat-template-kwargs", type=chat_template_kwargs, metavar="JSON",
                   help="keyword arguments for the model's chat template, a JSON object, e.g. "
                        "'{\"enable_thinking\": true}' for Qwen3 (default: with --model, " + CARD_DEFAULT +
                        "; a proofcheck service applies its own). A thinking verifier needs --max-tokens large "
                        "enough to finish thinking: a pass cut at the cap is invalid")


def generation_settings(card: dict[str, Any] | None, args: argparse.Namespace, where: str | None) -> Any:
    """`GenerationDefaults` for a run on a local model: --chat-template-kwargs and --max-tokens when given,
    else the card's (`proofcheck.prompt_card.generation_defaults`); prints each warning on stderr."""
    from proofcheck.prompt_card import generation_defaults

    gen = generation_defaults(card, args.chat_template_kwargs, args.max_tokens)
    for warning in gen.warnings:
        print(f"warning: {where}: {warning}", file=sys.stderr)
    return gen


PROMPT_STYLE_HELP = ("the verifier prompt style, full or compact (default: the style recorded in the model's "
                     "proofcheck_prompt.json by training, else full); a value that differs from it is warned about")


def add_prompt_style(p: argparse.ArgumentParser) -> None:
    """`--prompt-style {full,compact}`: override the style the model was trained with (rarely right)."""
    p.add_argument("--prompt-style", choices=PROMPT_STYLES, default=None, metavar="STYLE",
                   help=PROMPT_STYLE_HELP)


def prompt_style(flag: str | None, card: dict[str, Any] | None, where: str | None) -> str:
    """The style to run with (flag > card > "full"); prints a warning when the flag differs from the card."""
    from proofcheck.prompt_card import choose_style

    style, warning = choose_style(flag, card)
    if warning:
        print(f"warning: {where}: {warning}", file=sys.stderr)
    return style


def chat_template_kwargs(value: str) -> dict[str, Any]:
    """Parse `--chat-template-kwargs` (argparse type): a JSON object, or an error that shows one."""
    try:
        out = json.loads(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON ({e}); give an object, e.g. '{{\"enable_thinking\": false}}'") from e
    if not isinstance(out, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"enable_thinking\": false}}', got {value!r}")
    return out


def read_judge_template(path: str) -> str:
    """The text of a release-format judge prompt file, checked (ValueError naming the file)."""
    from proofcheck.reward.judge import check_judge_template

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"--judge-prompt-file {path}: cannot read it ({e.strerror})") from e
    check_judge_template(text, path)
    return text


EXIT_OK = 0  # done, every result present
EXIT_ERROR = 1  # bad input data or a failure while running (the message names the file/line/field and the fix)
EXIT_USAGE = 2  # bad configuration found before any request (argparse uses 2 as well)
EXIT_INCOMPLETE = 3  # the run finished or stopped without every result: endpoint errors, missing outputs
EXIT_CODES = {EXIT_OK: "success: the command did all it was asked",
              EXIT_ERROR: "error: bad input data or a failure while running; nothing half-written",
              EXIT_USAGE: "usage: a bad option or configuration, found before any request",
              EXIT_INCOMPLETE: "incomplete: the run ended without every result (rerun with --resume)"}

# The CLI vocabulary: each flag has one meaning in every command (README, "Command-line vocabulary").
MODEL_HELP = "local folder or hub id of the model weights"
ENDPOINT_MODEL_HELP = "the model's name at --endpoint, as that server serves it"
ENDPOINT_KEY_HELP = "environment variable holding the API key sent to --endpoint (must be set)"
REQUIRE_KEY_HELP = "environment variable holding the key clients must send ('Authorization: Bearer $VAR')"
JSON_HELP = "print the summary as JSON on stdout (logs go to stderr)"
RULE_HELP = ("k-pass decision rule: unanimous (the paper's, the default: accept iff all k passes are valid "
             "accepts), majority, any, or at_least:T (accept iff at least T of the k passes accept)")
CARD_RULE_HELP = (", or card (the rule calibrated for the model by `proofcheck calibrate` or training, with its k, "
                  "from its proofcheck_prompt.json)")


def add_json(p: argparse.ArgumentParser) -> None:
    """`--json`: the command's closing summary as JSON on stdout, alone (see `json_only_stdout`)."""
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def add_endpoint_key(p: Any, target: str = "--endpoint") -> None:
    """`--endpoint-api-key-env VAR` (the outgoing key) and its deprecated spelling `--api-key-env`.

    `target` names where the key goes in this command's own words (a command without `--endpoint`,
    such as `data select`, sends it to the URLs of its `URL#NAME` options).
    """
    p.add_argument("--endpoint-api-key-env", metavar="VAR", help=ENDPOINT_KEY_HELP.replace("--endpoint", target))
    add_deprecated(p, "--api-key-env", "--endpoint-api-key-env", "endpoint_api_key_env", metavar="VAR")


def add_judge_options(p: argparse.ArgumentParser, cache_default: str) -> None:
    """The meta-verifier judge's options, the same in `grade` and `score verifier`; `cache_default`
    says where answers are cached when --judge-cache-dir is not given."""
    p.add_argument("--judge-endpoint", metavar="URL", help="OpenAI-compatible base URL of the meta-verifier judge "
                   "(with --judge-model; by default the lower of its level and the structural one counts)")
    p.add_argument("--judge-model", metavar="NAME", help="the judge's name at --judge-endpoint, as it serves it")
    p.add_argument("--judge-api-key-env", metavar="VAR", help="environment variable holding the API key sent to "
                   "--judge-endpoint (must be set)")
    p.add_argument("--judge-prompt-file", help="judge prompt file in the AdvancedMathBench release's format, used "
                   "as is (its prompts/meta_verification_v3_w_gt.md): one user message with {problem}, "
                   "{human_solution}, {solution}, {solution_verification}, {human_ground_truth}; its hash is kept "
                   "with the results; default: our prompt")
    p.add_argument("--judge-cache-dir", default=None, help=f"judge answer cache (sqlite, keyed by model, prompt and "
                   f"sampling; default: {cache_default})")
    add_deprecated(p, "--cache-dir", "--judge-cache-dir", "judge_cache_dir")


SCALE_HELP = ("meta-verifier level scores: benchmark 1/0.75/0.5/0 (VerifierBench's meta metrics, as `score "
              "verifier` reports them) or training 1/0.5/0.25/0 (the GRPO reward's reward_scale)")


def deprecation_warning(old: str, new: str) -> None:
    """Say on stderr that `old` is a deprecated spelling of `new` (kept for one release)."""
    print(f"warning: {old} is deprecated and will be removed in the next release; use {new}", file=sys.stderr)


class _Deprecated(argparse.Action):
    """Stores like the new option and warns once per use (the old spelling keeps working)."""

    def __init__(self, option_strings: list[str], dest: str, new_flag: str, **kwargs: Any):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        deprecation_warning(option_string or self.option_strings[0], self.new_flag)
        setattr(namespace, self.dest, values)


def add_deprecated(p: Any, old: str, new_flag: str, dest: str, **kwargs: Any) -> None:
    """Accept `old` (hidden from --help) as a deprecated spelling of `new_flag`, storing into `dest`."""
    p.add_argument(old, dest=dest, action=_Deprecated, new_flag=new_flag, help=argparse.SUPPRESS,
                   default=argparse.SUPPRESS, **kwargs)


class UsageError(ValueError):
    """A configuration error found before any request; the CLI exits with `EXIT_USAGE`."""


def api_key(env_name: str | None, flag: str = "--api-key-env") -> str | None:
    """The API key in the environment variable `env_name` (None when no variable is named).

    A named variable that is unset or empty is a `UsageError` naming `flag`, the option that named
    it: sending no key would only turn every request into a 401 later.
    """
    if not env_name:
        return None
    key = os.environ.get(env_name)
    if not key:
        raise UsageError(f"{flag} {env_name}: the variable {env_name} is not set (or empty); "
                         f"export {env_name}=<key> first, or drop {flag} for an endpoint without a key")
    return key


def finish_run(summary: dict[str, Any], what: str = "run",
               rerun: str = "rerun the same command with --resume to retry them") -> int:
    """0 for a complete run; `EXIT_INCOMPLETE` (and what is missing, on stderr) for an incomplete one.

    `summary` carries `proofcheck.rundir.completeness`: `complete`, `errored_passes`,
    `missing_records`, `grader_failures`.
    """
    from proofcheck.rundir import missing_in_words

    if summary.get("complete", True):
        return 0
    hint = f" ({rerun})" if summary.get("errored_passes") or summary.get("grader_failures") else ""
    examples = (summary.get("endpoint_errors") or {}).get("examples") or {}
    first = f"; first error: {next(iter(examples.values()))}" if examples else ""
    print(f"incomplete {what}: {missing_in_words(summary)}{hint}{first}", file=sys.stderr)
    return EXIT_INCOMPLETE


def fail(message: str, code: int = 1) -> int:
    """Print an error for the user on stderr and return the exit code."""
    print(f"error: {message}", file=sys.stderr)
    return code


_result_stream: TextIO | None = None  # where `print_json` writes while `json_only_stdout` is active


def _fd(stream: Any) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):  # e.g. pytest's capsys buffers
        return None


@contextlib.contextmanager
def json_only_stdout() -> Iterator[None]:
    """Keep stdout for `print_json` alone: everything else written to it goes to stderr.

    Libraries log to stdout (vLLM's INFO lines, tqdm, prints), and so do the processes they
    spawn (vLLM's engine core), so both the Python stream and file descriptor 1 are pointed at
    stderr for the duration; `print_json` writes to a saved copy of the original stdout.
    """
    global _result_stream
    out, err = sys.stdout, sys.stderr
    fd, err_fd = _fd(out), _fd(err)
    if fd is None or err_fd is None:  # no descriptors to move (in-process capture): Python level only
        _result_stream = out
        try:
            with contextlib.redirect_stdout(err):
                yield
        finally:
            _result_stream = None
        return
    out.flush()
    saved = os.dup(fd)
    os.dup2(err_fd, fd)
    _result_stream = os.fdopen(os.dup(saved), "w", encoding="utf-8")
    try:
        with contextlib.redirect_stdout(err):
            yield
    finally:
        sys.stdout.flush()
        _result_stream.close()
        _result_stream = None
        os.dup2(saved, fd)
        os.close(saved)


def print_json(obj: Any) -> None:
    """Print `obj` as JSON on stdout (the only thing there under `--json`; see `json_only_stdout`)."""
    stream = _result_stream or sys.stdout
    stream.write(json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")
    stream.flush()
