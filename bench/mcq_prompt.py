"""LiveMathematicianBench prompts and answer extraction.

The system prompt asks the model to act as an expert mathematician, reason step by step and put
only the letter of its choice in `\\boxed{}`; the user prompt holds the question and the five
options as `(A) ...` blocks separated by blank lines, plus the proof sketch as hints in sketch
mode. Answer extraction follows the benchmark's evaluators: the last `\\boxed{X}` (X in A-E),
else a reply that is a single letter (either case, as the release reads `b` as B), else the last
standalone capital A-E. The last rule is the compatible default; `strict=True` keeps only the
boxed rule.

Example:
    >>> extract_answer("so the answer is \\\\boxed{ C }")
    'C'
    >>> extract_answer("I pick B over D") , extract_answer("I pick B over D", strict=True)
    ('D', None)
"""

from __future__ import annotations

import re

from proofcheck.bench.mcq_data import Item

SYSTEM_PROMPT = (
    "You are an expert mathematician. You will be given a multiple-choice question with five answer "
    "choices labelled A to E. Read the question carefully and select the single best answer. "
    "Reason step by step, then put the letter (A, B, C, D, or E) of your chosen answer in "
    "\\boxed{}, like this: \\boxed{A}. Do NOT include any other text in \\boxed{}."
)

_BOXED = re.compile(r"\\boxed\{\s*([A-E])\s*\}")
_STANDALONE = re.compile(r"\b([A-E])\b")


def format_options(options: list[dict[str, str]]) -> str:
    """`(A) text` blocks separated by blank lines."""
    return "\n\n".join(f"({o['label']}) {o['text']}" for o in options)


def sketch_hint(item: Item) -> str:
    """The hint used by sketch mode: the expanded sketch, else the sketch (may be empty)."""
    return (item.expanded_sketch or item.sketch or "").strip()


def build_user_prompt(item: Item, options: list[dict[str, str]], add_sketch: bool = False) -> str:
    """The question, then the labelled options; with `add_sketch`, the sketch as hints."""
    prompt = f"## Question\n\n{item.mcq.question}\n\n## Answer Choices\n\n{format_options(options)}"
    hint = sketch_hint(item) if add_sketch else ""
    if hint:
        prompt += f"\n\n## Useful Hints\n\n{hint}"
    return prompt


def extract_answer(text: str | None, strict: bool = False) -> str | None:
    """The predicted label A-E in `text`, or None.

    1. the last `\\boxed{X}` with X in A-E (whitespace allowed inside the braces);
    2. unless `strict`: a reply that is exactly one letter A-E, either case (`b` -> B: the
       release's evaluators upper-case a one-letter reply);
    3. unless `strict`: the last standalone capital A-E anywhere (the benchmark's fallback).
    Otherwise lower-case letters are never answers (`\\boxed{c}` and "a" inside prose are not).
    """
    if not text:
        return None
    boxed = _BOXED.findall(text)
    if boxed:
        return boxed[-1]
    if strict:
        return None
    stripped = text.strip()
    if len(stripped) == 1 and stripped.upper() in "ABCDE":
        return stripped.upper()
    loose = _STANDALONE.findall(stripped)
    return loose[-1] if loose else None
