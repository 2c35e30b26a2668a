"""MCQ parity with the LiveMathematicianBench release (`eval/eval.py`, `eval/eval_claude.py`).

Each row's expected value is what the release's evaluator gives for the same reply, read off its
code by hand: `extract_answer` strips the reply, takes the last `\\boxed{[A-E]}`, else upper-cases
a one-character reply in A-E, else the last standalone capital A-E; `extract_response_parts`
keeps the *last* text block of an Anthropic reply as the answer text (thinking blocks apart).
"""

from __future__ import annotations

import pytest

from proofcheck.bench.mcq_backends import parse_anthropic
from proofcheck.bench.mcq_prompt import extract_answer

LONE_LETTERS = [
    # (reply, release's answer)
    ("b", "B"),
    ("e", "E"),
    (" c\n", "C"),
    ("\n\nd  ", "D"),
    ("A", "A"),
    ("f", None),  # not an option
    ("F", None),
    ("ab", None),  # two letters: not a one-letter reply, and no standalone capital
    ("b.", None),  # punctuation: the release's one-letter rule needs exactly one character
    ("the answer is b", None),  # lower case inside prose is never read
    ("\\boxed{b}", None),  # the release's boxed rule is capitals only
]


@pytest.mark.parametrize(("reply", "expected"), LONE_LETTERS)
def test_lone_letter_reply_as_the_release_reads_it(reply: str, expected: str | None) -> None:
    assert extract_answer(reply) == expected
    assert extract_answer(reply, strict=True) is None  # strict mode reads \boxed{} only


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def thinking(t: str) -> dict:
    return {"type": "thinking", "thinking": t, "signature": "sig"}


ANTHROPIC = [
    # (content blocks, answer text, thinking kept, extracted answer)
    ([thinking("maybe \\boxed{A}"), text("so \\boxed{C}")], "so \\boxed{C}", "maybe \\boxed{A}", "C"),
    ([text("draft \\boxed{B}"), text("final \\boxed{D}")], "final \\boxed{D}", None, "D"),
    ([text("\\boxed{E}"), thinking("second thoughts"), text("I will go with B")], "I will go with B",
     "second thoughts", "B"),
    ([thinking("\\boxed{A}"), text("")], "", "\\boxed{A}", None),  # the answer is never read from thinking
    ([thinking("only thinking, \\boxed{A}")], "", "only thinking, \\boxed{A}", None),
]


@pytest.mark.parametrize(("blocks", "answer_text", "kept", "answer"), ANTHROPIC)
def test_anthropic_answer_comes_from_the_last_text_block(blocks: list[dict], answer_text: str, kept: str | None,
                                                         answer: str | None) -> None:
    g = parse_anthropic({"content": blocks, "stop_reason": "end_turn", "usage": {"input_tokens": 1,
                                                                                  "output_tokens": 2}})
    assert g.text == answer_text
    assert g.thinking == kept
    assert extract_answer(g.text) == answer
