#!/usr/bin/env bash
# GPU check sized for ~10-15 minutes on one H200: an 8B-shaped random model through serve_real.py
# (engine / service / naive loop / early reject / decode vs the GPU's roofline) and train_real.py
# (GRPO step split, HF generate vs vLLM colocate, LoRA, MFU). Writes runs/gpu_check/gpu_check.json
# with the same keys as `run_all.py --json`. Needs the GPU install (`make install EXTRA=gpu`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
exec timeout 1500 "$PY" benchmarks/gpu_check.py --out "${OUT:-runs/gpu_check}" "$@"
