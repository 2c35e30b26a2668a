"""at_least:T and card over real HTTP (uvicorn in a thread, a ScriptedServer engine whose passes are
known in advance) and on the command line: decisions by hand, the card's rule served and reported in
/health, and every bad rule refused with the reason and the fix (HTTP 422, exit 2)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from proofcheck.app.cli import main
from proofcheck.calibration import ProofPasses, calibration_record, calibration_table, choose
from proofcheck.parsing import format_verdict
from proofcheck.prompt_card import write_calibration
from proofcheck.serve.app import create_app
from proofcheck.serve.engines import RemoteEngine
from proofcheck.serve.scripted import Reply, ScriptedServer
from proofcheck.serve.server import ServeConfig, ServerThread, resolve_rule
from proofcheck.serve.service import VerificationService
from proofcheck.serve.verifier import Verifier

OK = format_verdict("fine", [], -1)
BAD = format_verdict("step 0 is wrong", [(0, "wrong sum")], 0)
CARD = ("at_least:2", 3, "calibrated on 4 proofs")


def responder(req: dict, i: int) -> Reply:
    """`ACCEPTS=a` in the problem: the first a passes accept, the rest reject."""
    a = int(re.search(r"ACCEPTS=(\d+)", req["messages"][1]["content"]).group(1))
    return Reply([OK] * min(a, req["n"]) + [BAD] * max(req["n"] - a, 0))


def _service(card_rule: tuple | None) -> VerificationService:
    return VerificationService(Verifier(RemoteEngine(ENGINE.url, "scripted"), max_tokens=64, model="scripted"),
                               engine_kind="remote", model_names=["scripted"], card_rule=card_rule)


@pytest.fixture(scope="module")
def urls():
    global ENGINE
    with ScriptedServer(responder) as ENGINE, ServerThread(create_app(_service(CARD))) as with_card, \
            ServerThread(create_app(_service(None))) as without:
        yield with_card.url, without.url


def verify(url: str, accepts: int, **kw: object) -> httpx.Response:
    body = {"problem": f"Prove it. ACCEPTS={accepts}", "steps": ["a", "b"], "all_passes": True, **kw}
    return httpx.post(url + "/v1/verify", json=body, timeout=30)


@pytest.mark.parametrize(("accepts", "passes", "rule", "decision"), [
    (3, 5, "at_least:3", "accept"), (3, 5, "at_least:4", "reject"), (1, 5, "at_least:1", "accept"),
    (5, 5, "at_least:5", "accept"), (4, 5, "at_least:5", "reject"), (3, 5, "majority", "accept"),
    (2, 5, "majority", "reject"),
])
def test_at_least_over_http(urls: tuple[str, str], accepts: int, passes: int, rule: str, decision: str) -> None:
    d = verify(urls[0], accepts, passes=passes, rule=rule).json()
    assert d["decision"] == decision and d["rule"] == rule and len(d["passes"]) == passes
    assert d["votes"]["accept"] == accepts


@pytest.mark.parametrize(("accepts", "decision"), [(2, "accept"), (1, "reject")])
def test_a_request_may_ask_for_the_cards_rule(urls: tuple[str, str], accepts: int, decision: str) -> None:
    d = verify(urls[0], accepts, rule="card").json()
    assert (d["rule"], len(d["passes"]), d["decision"]) == ("at_least:2", 3, decision)


def test_early_stop_under_at_least(urls: tuple[str, str]) -> None:
    d = verify(urls[0], 0, passes=8, rule="at_least:2", all_passes=False).json()
    assert d["decision"] == "reject" and d["votes"]["accept"] == 0  # 7 rejects settle it: the rest may stop


def test_health_reports_the_cards_rule(urls: tuple[str, str]) -> None:
    h = httpx.get(urls[0] + "/health").json()
    assert h["card_rule"] == {"rule": "at_least:2", "passes": 3, "reason": "calibrated on 4 proofs"}
    assert h["rule"] == "unanimous" and h["rule_source"] == "default"  # serving it is a choice
    assert httpx.get(urls[1] + "/health").json()["card_rule"] is None


@pytest.mark.parametrize(("which", "body", "words"), [
    (0, {"rule": "at_least:9", "passes": 8}, ["needs 9 accepts", "T <= 8"]),
    (0, {"rule": "at_least:9"}, ["needs 9 accepts", "T <= 8"]),  # the server's 8 passes
    (0, {"rule": "at_least:0"}, ["whole number >= 1"]),
    (0, {"rule": "vibes"}, ["unknown rule", "at_least:T", "card"]),
    (0, {"rule": "card", "passes": 4}, ["3 passes", "drop passes"]),
    (1, {"rule": "card"}, ["proofcheck calibrate", "at_least:T"]),
])
def test_bad_rules_get_422_with_the_fix(urls: tuple[str, str], which: int, body: dict, words: list[str]) -> None:
    r = verify(urls[which], 1, **body)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    for w in words:
        assert w in err["message"], (w, err["message"])


def _card(folder: Path) -> Path:
    A, R = "accept", "reject"
    proofs = [ProofPasses(True, [A, A, R]), ProofPasses(True, [A, A, A]), ProofPasses(False, [R, R, A]),
              ProofPasses(False, [R, R, R])]
    table = calibration_table(proofs, resamples=20)
    folder.mkdir(exist_ok=True)
    write_calibration(folder, calibration_record(table, choose(table), {"data": "d.jsonl", "n_proofs": 4}))
    return folder


def test_resolve_rule_from_the_card(tmp_path: Path) -> None:
    card = _card(tmp_path / "m")
    got = resolve_rule(ServeConfig(model=str(card), rule="card"))
    assert (got.rule, got.passes, got.source) == ("at_least:2", 3, "card") and "d.jsonl" in got.reason
    plain = resolve_rule(ServeConfig(model=str(card)))
    assert (plain.rule, plain.passes, plain.source) == ("unanimous", 8, "default") and plain.card_rule[0] == "at_least:2"
    fronting = resolve_rule(ServeConfig(endpoint="http://127.0.0.1:9/v1", card=str(card), rule="card", passes=3))
    assert (fronting.rule, fronting.passes) == ("at_least:2", 3)


@pytest.mark.parametrize(("argv", "words"), [
    (["serve", "--model", "{m}", "--rule", "at_least:0"], "whole number >= 1"),
    (["serve", "--model", "{m}", "--rule", "at_least:9"], "T <= 8"),
    (["serve", "--model", "{m}", "--rule", "card", "--passes", "4"], "drop --passes"),
    (["serve", "--model", "{empty}", "--rule", "card"], "proofcheck calibrate"),
    (["serve", "--endpoint", "http://127.0.0.1:9/v1", "--endpoint-model", "x", "--rule", "card"], "--card DIR"),
    (["verify", "--model", "{m}", "--rule", "at_least:9", "--problem", "p", "--proof", "a"], "T <= 8"),
    (["verify", "--model", "{empty}", "--rule", "card", "--problem", "p", "--proof", "a"], "proofcheck calibrate"),
    (["score", "prover", "--problems", "p", "--submissions", "s", "--model", "{m}", "--out", "o", "--rule", "card"],
     "drop --rule"),
    (["score", "prover", "--problems", "p", "--submissions", "s", "--model", "{m}", "--out", "o", "--rule",
      "at_least:5", "--passes", "4"], "T <= 4"),
])
def test_bad_rules_exit_2_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture, argv: list[str],
                                       words: str) -> None:
    card, empty = _card(tmp_path / "m"), tmp_path / "empty"
    empty.mkdir()
    assert main([a.format(m=card, empty=empty) for a in argv]) == 2
    assert words in capsys.readouterr().err
