"""MCQ harness: loading the hard split, with errors naming file, item index and field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from proofcheck.bench.mcq_data import hard_set_path, load_hard_set
from proofcheck.data.loaders import DataError

TEST_DATA = Path(__file__).resolve().parents[1] / "data" / "lmb"
GOOD = json.loads(hard_set_path(TEST_DATA, "209901").read_text(encoding="utf-8"))


def test_shipped_test_month_loads() -> None:
    items = load_hard_set(hard_set_path(TEST_DATA, "209901"))
    assert len(items) == 6
    assert items[0].mcq.meta["score"] == 6 and "score" not in items[2].mcq.meta
    assert items[0].model_extra["paper_link"].startswith("http://arxiv.org/abs/")  # unknown fields kept


def _mutated(fn) -> list:
    data = copy.deepcopy(GOOD)
    fn(data)
    return data


BAD_CASES = [
    ("missing id", lambda d: d[1].pop("id"), ["item 1", "id", "Field required"]),
    ("missing question", lambda d: d[2]["mcq"].pop("question"), ["item 2", "mcq.question"]),
    ("three distractors", lambda d: d[3]["mcq"]["choices"].pop(), ["item 3", "mcq.choices", "exactly 4"]),
    ("choice without text", lambda d: d[0]["mcq"]["choices"][1].pop("text"), ["item 0", "mcq.choices.1.text"]),
    ("correct choice a number", lambda d: d[4]["mcq"].__setitem__("correct_choice", 3),
     ["item 4", "mcq.correct_choice"]),
    ("duplicate id", lambda d: d[5].__setitem__("id", d[0]["id"]), ["item 5", "duplicate id", "first at item 0"]),
    ("item not an object", lambda d: d.__setitem__(2, "oops"), ["item 2", "expected a JSON object"]),
    ("meta not a dict", lambda d: d[1]["mcq"].__setitem__("meta", [1]), ["item 1", "mcq.meta"]),
]


@pytest.mark.parametrize(("name", "mutate", "needles"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_items_are_reported_with_file_index_and_field(tmp_path: Path, name: str, mutate, needles) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_mutated(mutate)), encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_hard_set(path)
    message = str(err.value)
    assert str(path) in message
    for needle in needles:
        assert needle in message


def test_string_choices_and_null_meta_are_accepted(tmp_path: Path) -> None:
    def to_strings(d: list) -> None:
        d[0]["mcq"]["choices"] = [c["text"] for c in d[0]["mcq"]["choices"]]
        d[0]["mcq"]["meta"] = None

    path = tmp_path / "str.json"
    path.write_text(json.dumps(_mutated(to_strings)), encoding="utf-8")
    item = load_hard_set(path)[0]
    assert [c.text for c in item.mcq.choices] == [c["text"] for c in GOOD[0]["mcq"]["choices"]]
    assert item.mcq.meta == {}


@pytest.mark.parametrize(("content", "needle"), [
    ("{not json", "invalid JSON"),
    ('{"id": "x"}', "expected a JSON list"),
])
def test_unreadable_files(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "f.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=needle):
        load_hard_set(path)


def test_missing_file_names_the_expected_layout(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="qaEval_<month>_ge5_hard.json"):
        load_hard_set(hard_set_path(tmp_path, "202511"))
    assert hard_set_path("data/lmb", "202511") == Path("data/lmb/202511/hard/qaEval_202511_ge5_hard.json")
