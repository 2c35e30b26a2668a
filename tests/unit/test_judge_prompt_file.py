"""`--judge-prompt-file` takes the AdvancedMathBench release's judge prompt file as is.

The template below has the shape of the release's `prompts/meta_verification_v3_w_gt.md`: plain
Markdown with LaTeX braces left unescaped and five placeholders, each filled once. The expected
blocks are written out by hand from the release's layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofcheck.app.cli import main
from proofcheck.data.loaders import SAMPLES_DIR
from proofcheck.parsing import Verdict
from proofcheck.reward.judge import check_judge_template, judge_template_messages
from proofcheck.schemas import Annotation
from proofcheck.serve.scripted import Reply, ScriptedServer

RELEASE_SHAPED = """You are an **expert meta-verifier**. Literal braces stay: $\\frac{a}{b}$, {idx}, {{x}}.

<level>EXACT_MATCH|BASIC_MATCH|POOR_MATCH|WRONG_POLARITY</level>

## Problem Statement

{problem}

## Reference Solution (Optional)

{human_solution}

## Proof Solution

{solution}

## Solution Verification

{solution_verification}

## Human Ground Truth

{human_ground_truth}
"""


@pytest.mark.parametrize(("template", "ok"), [
    (RELEASE_SHAPED, True),
    ("{solution_verification} {human_ground_truth}", True),
    ("{problem} {solution} {human_ground_truth}", False),  # no verifier output: nothing to grade
    ("{problem} {solution} {solution_verification}", False),  # no ground truth
])
def test_check_judge_template(template: str, ok: bool) -> None:
    if ok:
        check_judge_template(template, "j.md")
    else:
        with pytest.raises(ValueError, match=r"j\.md: a judge prompt file needs the placeholders"):
            check_judge_template(template, "j.md")


def test_blocks_are_laid_out_as_the_release_does() -> None:
    ann = Annotation(first_fatal_error_step=2, recoverable_error_steps=[0, 1], reviewer_comment="Step 2 divides by 0.",
                     first_error_reason="", remark="")
    verdict = Verdict(assessment="Looked at it.", errors="Step 2: division by zero.", first_error_step=2,
                      flagged_steps=(2,))
    [msg] = judge_template_messages(RELEASE_SHAPED, "Prove {solution} is fine.", ["a", "uses {problem}", "c"],
                                    verdict, ann)
    text = msg["content"]
    assert msg["role"] == "user"
    assert "$\\frac{a}{b}$, {idx}, {{x}}." in text  # literal braces untouched
    assert "Prove {solution} is fine." in text and "uses {problem}" in text  # filled once, never re-expanded
    assert "<step0>\n\na\n\n</step0>\n\n<step1>\n\nuses {problem}\n\n</step1>" in text
    assert ("<assessment>\n\nLooked at it.\n\n</assessment>\n\n<errors>\n\nStep 2: division by zero.\n\n</errors>"
            in text)
    assert ("<reviewer_comment>\n\nStep 2 divides by 0.\n\n</reviewer_comment>\n\n<first_fatal_error_step>\n\n2\n\n"
            "</first_fatal_error_step>\n\n<recoverable_error_steps>\n\n[0, 1]\n\n</recoverable_error_steps>") in text
    assert "## Reference Solution (Optional)\n\nNone\n" in text


def test_grade_sends_the_prompt_file_and_reads_the_level(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    prompt = tmp_path / "meta.md"
    prompt.write_text(RELEASE_SHAPED, encoding="utf-8")
    row = next(json.loads(x) for x in (SAMPLES_DIR / "annotated.jsonl").read_text().splitlines()
               if not json.loads(x)["is_correct"] and json.loads(x)["annotation"]["first_fatal_error_step"] >= 0)
    fatal = row["annotation"]["first_fatal_error_step"]
    outputs = tmp_path / "o.jsonl"
    outputs.write_text(json.dumps({"proof_id": row["proof_id"], "repeat": 0, "finish_reason": "stop", "text":
                                   f"<assessment>Checked.</assessment><errors>Step {fatal}: wrong.</errors>"
                                   f"<first_error_step>{fatal}</first_error_step>"}) + "\n")
    with ScriptedServer(lambda req, i: Reply("<assessment>ok</assessment>\n<level>BASIC_MATCH</level>")) as srv:
        rc = main(["grade", "--data", str(SAMPLES_DIR / "annotated.jsonl"), "--outputs", str(outputs), "--out",
                   str(tmp_path / "g.jsonl"), "--judge-endpoint", srv.url, "--judge-model", "judge",
                   "--judge-prompt-file", str(prompt), "--json"])
        calls = list(srv.calls)
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0 and summary["levels"]["BASIC_MATCH"] == 1
    [call] = calls
    [msg] = call["messages"]
    assert msg["role"] == "user" and msg["content"].startswith("You are an **expert meta-verifier**.")
    assert f"<first_fatal_error_step>\n\n{fatal}\n\n</first_fatal_error_step>" in msg["content"]


def test_bad_prompt_file_is_refused_before_any_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompt = tmp_path / "bad.md"
    prompt.write_text("Grade {solution}.", encoding="utf-8")
    outputs = tmp_path / "o.jsonl"
    outputs.write_text(json.dumps({"proof_id": "ugd-001-p1", "repeat": 0, "text": "x"}) + "\n")
    with ScriptedServer(lambda req, i: Reply("<level>EXACT_MATCH</level>")) as srv:
        rc = main(["grade", "--data", str(SAMPLES_DIR / "annotated.jsonl"), "--outputs", str(outputs), "--out",
                   str(tmp_path / "g.jsonl"), "--judge-endpoint", srv.url, "--judge-model", "judge",
                   "--judge-prompt-file", str(prompt)])
        calls = list(srv.calls)
    assert rc == 1 and f"{prompt}: a judge prompt file needs" in capsys.readouterr().err and calls == []
