#!/usr/bin/env bash
# GPU check inside 10 minutes on one H200: an 8B-shaped random model through train_real.py (the 1-GPU
# LoRA recipe with vLLM colocated in sleep mode: step split, held-out evaluation on vLLM vs HF
# generate, GPU memory and KV blocks beside the --plan estimate) and serve_real.py (engine / service /
# naive loop / early reject / decode vs the GPU's roofline). Every stage has its own limit inside
# gpu_check.py (--budget 570 s); this outer limit only catches a hang outside any stage.
# Writes runs/gpu_check/gpu_check.json with the keys of `run_all.py --json`. Needs `make install EXTRA=gpu`.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
timeout --kill-after 15 600 "$PY" benchmarks/gpu_check.py --out "${OUT:-runs/gpu_check}" "$@"
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "gpu_check.sh: stopped after 600 s (outer limit): a hang outside the stages' own limits" >&2
fi
exit "$rc"
