"""Markdown tables of the GPU check's JSON (driver.py writes both after every stage).

Every table is drawn from what the stages saved, so a check cut short still shows what it measured;
a stage that did not pass shows its status instead of figures.
"""

from __future__ import annotations

from typing import Any


def _f(x: Any, fmt: str = "{:.2f}") -> str:
    return fmt.format(x) if isinstance(x, int | float) else "n/a"


def stages_table(doc: dict[str, Any]) -> list[str]:
    lines = ["| stage | status | seconds | limit s |", "|---|---|---:|---:|"]
    for name, st in doc["stages"].items():
        status = st["status"] + (f" ({st['reason']})" if st.get("reason") else "")
        lines.append(f"| {name} | {status} | {_f(st.get('seconds'), '{:.0f}')} | {_f(st.get('limit_s'), '{:.0f}')} |")
    return lines


def preflight_lines(p: dict[str, Any]) -> list[str]:
    out = [f"Python {p.get('python')} ({p.get('executable')}); GPU: {p.get('gpu', 'none')} "
           f"({_f(p.get('gpu_total_gib'), '{:.0f}')} GiB); free disk {_f(p.get('free_disk_gib'), '{:.0f}')} GiB"]
    diffs = p.get("version_differences") or {}
    if diffs:
        out += ["", "| package | pinned | here |", "|---|---|---|"]
        out += [f"| {n} | {d['pinned']} | {d['here'] or 'missing'} |" for n, d in diffs.items()]
    out += [f"- unmet requirement: {w}" for w in p.get("unmet_requirements") or []]
    out += [f"- STOPPED: {w}" for w in p.get("stopped") or []]
    return out


def train_lines(t: dict[str, Any]) -> list[str]:
    sp = t.get("step_split_s") or {}
    out = [f"GRPO on the 1-GPU LoRA recipe, generation {t.get('generation')}; median of {sp.get('steps_timed')} "
           f"step(s) after the first; {t.get('completions_per_step')} completions per step",
           "", "| generation s | reward s | log-probs+backward+optimizer s | step s | tokens/step | generated tok/s "
           "| MFU (optimisation) | max_memory_allocated GiB |", "|---:|---:|---:|---:|---:|---:|---:|---:|",
           f"| {_f(sp.get('generation'))} | {_f(sp.get('reward'), '{:.3f}')} | {_f(sp.get('train'))} "
           f"| {_f(sp.get('total'))} | {_f(t.get('tokens_per_step'), '{:.0f}')} "
           f"| {_f(t.get('generation_tokens_per_s'), '{:.0f}')} | {_f(t.get('mfu_optimisation'), '{:.3f}')} "
           f"| {_f((t.get('memory') or {}).get('max_memory_allocated_gib'))} |"]
    if pk := t.get("mfu_peak"):
        out.append(f"\nMFU against the {pk['dtype']} matmul peak the machine stage measured "
                   f"({pk['flop_s'] / 1e12:.2f} TFLOP/s); model FLOPs: forward + activation gradients (LoRA).")
    if pv := t.get("plan_vs_measured"):
        out.append(f"\n`--plan` peak {pv['plan_peak_gib']:.2f} GiB; measured `max_memory_allocated` "
                   f"{pv['max_memory_allocated_gib']:.2f} GiB ({pv['measured_over_plan']:.2f}x the plan; the plan "
                   "leaves out transformers generation's KV cache, which this path allocates).")
    if ev := t.get("eval"):
        out.append(f"\nHeld-out evaluation (transformers `generate`): {ev['proofs']} proofs x "
                   f"{(ev['passes'] or 0) // max(ev['proofs'] or 1, 1)} passes, <= {ev['max_new_tokens']} new tokens: "
                   f"{_f(ev['seconds'], '{:.1f}')} s, {_f(ev['passes_per_s'], '{:.2f}')} passes/s")
    return out


def decide_lines(d: dict[str, Any]) -> list[str]:
    roof = d.get("roofline") or {}
    return [f"k = {d.get('k')} passes per proof, rule {d.get('rule')}, <= {d.get('max_tokens')} tokens, "
            f"{d.get('engine')} (in process, transformers `generate`)", "",
            "| proofs | seconds | passes/s | decode tok/s | roofline tok/s (bound) | roofline passes/s "
            "| measured / roofline |", "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {len(d.get('proofs') or [])} | {_f(d.get('seconds'))} | {_f(d.get('passes_per_s'), '{:.3f}')} "
            f"| {_f(d.get('tokens_per_s'), '{:.1f}')} | {_f(roof.get('tokens_per_s'), '{:.0f}')} ({roof.get('bound')}) "
            f"| {_f(roof.get('passes_per_s'), '{:.2f}')} | {_f(roof.get('measured_over_roofline'), '{:.3f}')} |"]


def resume_lines(r: dict[str, Any]) -> list[str]:
    return [f"From {r.get('resumed_first_from')}: SIGKILLed (exit {r.get('killed_returncode')}) as soon as a newer "
            f"checkpoint was complete; newest complete after the kill: {r.get('newest_complete')} "
            f"(folders: {', '.join(r.get('folders_after_kill') or [])}); "
            f"the resumed run started at step {r.get('start_step')} from {r.get('resumed_from')} and ended at step "
            f"{r.get('global_step')}; reward history steps {r.get('reward_steps')}: "
            f"{'continuous' if r.get('ok') else 'NOT as expected'}"]


def render(doc: dict[str, Any]) -> str:
    """The check's Markdown report from its JSON document."""
    s = doc["settings"]
    b = doc.get("build") or {}
    lines = [f"# gpu_check ({doc['date']}): {s['shape']} on {s['device']}"
             + (f", {b.get('params', 0) / 1e6:,.1f} M parameters, vocabulary {b.get('vocab_size'):,}"
                if b.get("params") else ""),
             "", *stages_table(doc)]
    if p := doc.get("preflight"):
        lines += ["", "## preflight", "", *preflight_lines(p)]
    if m := doc.get("machine"):
        lines += ["", "## machine", "", f"bandwidth {_f(m.get('bandwidth_B_s', 0) / 1e9, '{:.0f}')} GB/s; bf16 matmul "
                  f"{_f(m.get('matmul_bf16_flop_s', 0) / 1e12, '{:.1f}')} TFLOP/s ({m.get('device')})"]
    if (p := doc.get("plan")) and p.get("text"):
        lines += ["", "## plan (`train/grpo.py --plan`, the train stage's arguments)", "", "```", p["text"], "```"]
    if doc.get("train") and doc["stages"].get("train", {}).get("status") == "ok":
        lines += ["", "## train", "", *train_lines(doc["train"])]
    if doc.get("decide") and doc["stages"].get("decide", {}).get("status") == "ok":
        lines += ["", "## decide", "", *decide_lines(doc["decide"])]
    if doc.get("resume") and doc["stages"].get("resume", {}).get("status") == "ok":
        lines += ["", "## resume", "", *resume_lines(doc["resume"])]
    return "\n".join(lines) + "\n"
