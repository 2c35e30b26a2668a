"""MCQ harness: the seeded five-option shuffle, the prompts and the answer parser (table-driven)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from proofcheck.bench.mcq_data import load_hard_set, shuffle_options
from proofcheck.bench.mcq_prompt import SYSTEM_PROMPT, build_user_prompt, extract_answer

DATA = Path(__file__).resolve().parents[1] / "data" / "lmb" / "209901" / "hard" / "qaEval_209901_ge5_hard.json"


def reference_shuffle(raw_item: dict, seed: int) -> tuple[list[str], str]:
    """The benchmark's own procedure, written independently: shuffle the dicts, find the correct one."""
    correct = raw_item["mcq"]["correct_choice"]
    pool = [correct] + raw_item["mcq"]["choices"]
    random.Random(seed).shuffle(pool)
    label = next("ABCDE"[i] for i, c in enumerate(pool) if c is correct)
    return [c["text"] for c in pool], label


@pytest.mark.parametrize("seed", [0, 42, 1234])
def test_shuffle_reproduces_random_seed_plus_index(seed: int) -> None:
    raw = json.loads(DATA.read_text(encoding="utf-8"))
    items = load_hard_set(DATA)
    labels_seen = set()
    for index, (item, raw_item) in enumerate(zip(items, raw, strict=True)):
        options, correct = shuffle_options(item, seed, index)
        texts, want = reference_shuffle(raw_item, seed + index)
        assert [o["text"] for o in options] == texts
        assert [o["label"] for o in options] == ["A", "B", "C", "D", "E"]
        assert correct == want
        assert options["ABCDE".index(correct)]["text"] == raw_item["mcq"]["correct_choice"]["text"]
        labels_seen.add(correct)
    assert len(labels_seen) > 1  # the shuffle actually moves the correct option around


def test_shuffle_tracks_identity_when_a_distractor_repeats_the_correct_text() -> None:
    items = load_hard_set(DATA)
    item = items[0].model_copy(deep=True)
    item.mcq.choices[2].text = item.mcq.correct_choice.text
    for index in range(20):
        _, correct = shuffle_options(item, 42, index)
        order = list(range(5))
        random.Random(42 + index).shuffle(order)
        assert correct == "ABCDE"[order.index(0)]


def test_user_prompt_layout_and_sketch_hints() -> None:
    items = load_hard_set(DATA)
    options, _ = shuffle_options(items[0], 42, 0)
    plain = build_user_prompt(items[0], options)
    assert plain.startswith("## Question\n\n" + items[0].mcq.question + "\n\n## Answer Choices\n\n")
    blocks = plain.split("## Answer Choices\n\n")[1].split("\n\n")
    assert blocks == [f"({o['label']}) {o['text']}" for o in options]
    assert "Hints" not in plain and items[0].sketch not in plain
    with_sketch = build_user_prompt(items[0], options, add_sketch=True)
    assert with_sketch.startswith(plain)
    assert with_sketch.endswith("## Useful Hints\n\n" + items[0].expanded_sketch)
    # item 1 has an empty expanded sketch: the plain sketch is used instead
    assert build_user_prompt(items[1], options, add_sketch=True).endswith(items[1].sketch)


def test_system_prompt_asks_for_boxed_letter() -> None:
    assert "expert mathematician" in SYSTEM_PROMPT
    assert "step by step" in SYSTEM_PROMPT
    assert "\\boxed{}" in SYSTEM_PROMPT and "{{" not in SYSTEM_PROMPT


PARSE_CASES = [
    # (text, compatible default, strict)
    ("Thus the answer is \\boxed{C}.", "C", "C"),
    ("First \\boxed{A}, on reflection \\boxed{D}", "D", "D"),
    ("\\boxed{ B }", "B", "B"),
    ("\\boxed{\nE\n}", "E", "E"),
    ("B", "B", None),
    ("  D \n", "D", None),
    ("Option B is wrong, so I choose E.", "E", None),
    ("\\boxed{B} although A also looks fine", "B", "B"),
    ("\\boxed{F} hmm, maybe C", "C", None),
    ("\\boxed{42}", None, None),
    ("b", "B", None),  # a lone lower-case letter: the release upper-cases it
    ("the answer is \\boxed{c}", None, None),
    ("no letter here at all", None, None),
    ("ABC is a triangle", None, None),
    ("", None, None),
    (None, None, None),
]


@pytest.mark.parametrize(("text", "default", "strict"), PARSE_CASES)
def test_extract_answer(text: str | None, default: str | None, strict: str | None) -> None:
    assert extract_answer(text) == default
    assert extract_answer(text, strict=True) == strict
