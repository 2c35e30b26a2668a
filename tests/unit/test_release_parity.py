"""Parser parity with the AdvancedMathBench release: a table of verifier outputs and what the
release's evaluator makes of them (valid or not, first_error_step), written from its documented
behaviour and its own test cases (InternLM/AdvancedMathBench: protocol.py, tests/, docs/metrics.md).

Every consumer goes through `parse_verifier_output`, so this table fixes the verdict for
scoring, metrics, rewards, serving and curation at once. Rows marked DIFF are our deliberate
differences (README, "Deliberate differences from the release"): expected is OUR verdict and
`release` says what the release does instead.
"""

from __future__ import annotations

import pytest

from proofcheck.parsing import parse_verifier_output


def out(assessment: str = "Checked the argument.", errors: str = "", step: str = "-1") -> str:
    return f"<assessment>{assessment}</assessment><errors>{errors}</errors><first_error_step>{step}</first_error_step>"


HARMONY = "<|start|>assistant<|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>final<|message|>"

# (name, text, n_steps, finish_reason, expected first_error_step or None for invalid)
CORPUS = [
    # --- <errors> is free text (the release's prompt asks for "a list of specific issues")
    ("numbered items naming no step", out(errors="1. Division by x when x may be 0.\n2. Sign lost.", step="2"), 4, "stop", 2),
    ("errors None with -1", out(errors="None", step="-1"), 3, "stop", -1),
    ("errors sentence with -1", out(errors="There are no errors.", step="-1"), 3, "stop", -1),
    ("empty errors with a step", out(errors="", step="1"), 3, "stop", 1),
    ("errors name another step than first_error_step", out(errors="Step 2: bad bound", step="0"), 3, "stop", 0),
    ("errors list issues but verdict valid", out(errors="Step 1: minor wording", step="-1"), 3, "stop", -1),
    ("errors name a step out of range", out(errors="Step 99: nonsense", step="1"), 3, "stop", 1),
    ("literal <errors> word inside the assessment",
     "<assessment>The <errors> section below is short.</assessment><errors>Step 1: bad</errors>"
     "<first_error_step>1</first_error_step>", 3, "stop", 1),
    ("literal <first_error_step> word inside the assessment",
     "<assessment>I set <first_error_step> last.</assessment><errors></errors><first_error_step>1</first_error_step>",
     3, "stop", None),
    # --- first_error_step: a strict integer in range
    ("plus sign", out(step="+1"), 3, "stop", None),
    ("decimal", out(step="1.0"), 3, "stop", None),
    ("word", out(step="two"), 3, "stop", None),
    ("padded with spaces and newlines", out(step="\n 1 \n"), 3, "stop", 1),
    ("minus two", out(step="-2"), 3, "stop", None),
    ("one past the last step", out(step="3"), 3, "stop", None),
    ("last step", out(step="2"), 3, "stop", 2),
    ("empty step field", out(step=""), 3, "stop", None),
    # --- finish reason: only "stop" is an answer
    ("null finish_reason", out(), 3, None, None),
    ("length", out(), 3, "length", None),
    ("content_filter", out(), 3, "content_filter", None),
    # --- tags
    ("upper-case tags", out(errors="Bad step", step="0").upper(), 2, "stop", 0),
    ("space before >", "<assessment >ok</assessment ><errors ></errors ><first_error_step >-1</first_error_step >",
     2, "stop", -1),
    ("space after </", "<assessment>ok</ assessment><errors></ errors><first_error_step>-1</ first_error_step>",
     2, "stop", -1),
    ("space after < is not a tag", "< assessment>ok</assessment><errors></errors><first_error_step>-1</first_error_step>",
     2, "stop", None),
    ("two verdicts", out() + out(), 2, "stop", None),
    ("empty assessment", out(assessment="  "), 2, "stop", None),
    ("missing errors", "<assessment>ok</assessment><first_error_step>-1</first_error_step>", 2, "stop", None),
    ("empty final answer", "   ", 2, "stop", None),
    # --- thinking (the release's own cases)
    ("verdict inside thinking ignored", "<think>" + out(step="0") + "</think>" + out(), 1, "stop", -1),
    ("unclosed think", "unfinished<think>reasoning " + out(), 1, "stop", None),
    ("think reopened after the last close", "<think>a</think>" + out() + "<think>more", 1, "stop", None),
    ("only thinking", "<think>" + out() + "</think>", 1, "stop", None),
    ("Harmony final channel", HARMONY + out(step="0"), 1, "stop", 0),
    ("Harmony final then think", HARMONY + "<think>x</think>" + out(), 1, "stop", -1),
]

# Deliberate differences: (name, text, n_steps, ours, release)
DIFFERENCES = [
    ("upper-case THINK tags", "<THINK>x</THINK>" + out(), 1, -1, None),
    ("Harmony without a final channel", "<|channel|>analysis<|message|>x<|end|>" + out(), 1, None, -1),
]


@pytest.mark.parametrize(("name", "text", "n", "finish", "expected"), CORPUS, ids=[r[0] for r in CORPUS])
def test_release_corpus(name, text, n, finish, expected):
    r = parse_verifier_output(text, n, finish)
    got = r.verdict.first_error_step if r.valid else None
    assert got == expected, f"{name}: {r.invalid_reason} {r.detail}"


@pytest.mark.parametrize(("name", "text", "n", "ours", "release"), DIFFERENCES, ids=[r[0] for r in DIFFERENCES])
def test_deliberate_differences(name, text, n, ours, release):
    r = parse_verifier_output(text, n, "stop")
    got = r.verdict.first_error_step if r.valid else None
    assert got == ours and got != release
