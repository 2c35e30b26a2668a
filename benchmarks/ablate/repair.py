"""The ablation's repaired-positives arm: valid proofs corrupted, repaired through `proofcheck data repair`
against a deterministic local repairer served over HTTP, and swapped into the training rows."""

from __future__ import annotations

import json
import sys
from typing import Any

from .config import AblateConfig, jsonl, run_logged


def corrupt(task: dict[str, Any]) -> dict[str, Any]:
    """A valid task turned into an expert-rejected proof of the same (true) claim: the last number of its
    first numeric step, the conclusion excepted, is raised by one; the annotation names that step."""
    import re

    steps = list(task["steps"])
    k = next((i for i, s in enumerate(steps[:-1]) if re.search(r"\d", s)), 0)
    m = list(re.finditer(r"\d+", steps[k]))
    if m:
        last = m[-1]
        steps[k] = steps[k][:last.start()] + str(int(last.group()) + 1) + steps[k][last.end():]
    else:
        steps[k] = steps[k] + " (so the claim follows immediately)"
    reason = f"step {k} does not follow"
    return {**task, "proof_id": task["proof_id"] + "-rejected", "steps": steps, "is_correct": False,
            "first_error_step": k, "annotation": {"first_fatal_error_step": k, "recoverable_error_steps": [-1],
                                                  "reviewer_comment": f"Step {k}: {reason}.",
                                                  "first_error_reason": reason, "remark": "ablation:rejected"}}


class LocalRepairer:
    """A deterministic repairer and checker on the OpenAI chat wire format (proofcheck.serve.scripted).

    Repair prompts name the problem: the reply is that problem's known-valid proof in `<step>` tags.
    Verifier prompts are answered with an accept exactly when the proof shown is a known-valid proof of
    the problem, else a reject at step 0 (the synthetic labels are exact, so this checker is exact)."""

    def __init__(self, valid: list[dict[str, Any]]):
        from proofcheck.protocol import neutralise, stepped_block

        self.by_problem = {neutralise(t["problem"]): t["steps"] for t in valid}
        self.blocks = {p: stepped_block(s) for p, s in self.by_problem.items()}

    def __call__(self, req: dict[str, Any], i: int) -> Any:
        from proofcheck.parsing import format_verdict
        from proofcheck.serve.scripted import Reply

        text = "\n".join(str(m.get("content") or "") for m in req.get("messages", []))
        problem = next((p for p in self.by_problem if p in text), None)
        n = int(req.get("n") or 1)
        if "repairs flawed proofs" in text:
            steps = self.by_problem.get(problem) or ["(no known proof)"]
            return Reply("\n".join(f"<step>{s}</step>" for s in steps))
        ok = problem is not None and self.blocks[problem] in text
        verdict = format_verdict("Every step checks.", [], -1) if ok else format_verdict("Step 0 fails.",
                                                                                        [(0, "wrong")], 0)
        return Reply([verdict] * n)


def repaired_positives(cfg: AblateConfig, tasks: list[dict[str, Any]], env: dict[str, str],
                       console: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run `proofcheck data repair` on the corrupted valid proofs of the repair set; return the accepted
    repaired positives (origin `repaired`, provenance kept) and the repair summary."""
    from proofcheck.serve.scripted import ScriptedServer

    folder = cfg.out / "repair"
    valid = [t for t in tasks if t["is_correct"]]
    rejected = jsonl(cfg.out / "data" / "rejected.jsonl", [corrupt(t) for t in valid])
    if not (folder / "repaired.jsonl").is_file():
        with ScriptedServer(LocalRepairer(valid)) as srv:
            url = srv.url
            run_logged([sys.executable, "-m", "proofcheck.app.cli", "data", "repair", "--rejected", str(rejected),
                  "--repairer", f"{url}#local-repairer", "--checker", f"{url}#local-checker", "--passes", "2",
                  "--seed", "0", "--out", str(folder)], cfg.out / "logs" / "repair.log", env, console)
    summary = json.loads((folder / "summary.json").read_text())
    rows = [json.loads(x) for x in (folder / "repaired.jsonl").read_text().splitlines() if x.strip()]
    return rows, summary


def with_repaired(train: list[dict[str, Any]], repaired: list[dict[str, Any]], share: float) -> tuple[list, int]:
    """The training rows with a `share` of the valid proofs, spread evenly through the set (every 4th at
    0.25), replaced in place by repaired positives: as many rows, as many valid ones, pairs kept in
    order (batches stay balanced), and a run of a few steps sees the same share as a long one."""
    out, used, i = [], 0, 0
    for t in train:
        if t["is_correct"]:
            if int((i + 1) * share) > int(i * share) and used < len(repaired):
                t = repaired[used]
                used += 1
            i += 1
        out.append(t)
    return out, used
