#!/usr/bin/env bash
# GPU check sized for ~10 minutes on one H200: an 8B-shaped random model, 8-pass vLLM
# throughput against the memory-bandwidth roofline, and GRPO steps with vLLM colocate + LoRA.
# Needs the GPU install (`make install EXTRA=gpu`). Prints one Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
exec timeout 900 "$PY" benchmarks/gpu_check.py --out "${OUT:-runs/gpu_check}" "$@"
