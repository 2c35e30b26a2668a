#!/usr/bin/env bash
# The GPU check on the machine the project can borrow (one H200, no package registry; docs/gpu-check.md).
#   here:        make gpu-wheels            # trl, datasets, pydantic ... for CPython 3.12 into .gpu-wheels/
#   device tool: run(command="bash benchmarks/gpu_check.sh", carry=[".gpu-wheels"], timeout_s=600)
#   rehearsal:   PY=.venv/bin/python OUT=/tmp/fake-out bash benchmarks/gpu_check.sh --device cpu
# Uses the machine's own python3 (PY overrides): the carried wheels are installed with --no-index
# --no-deps into a temporary folder (skipped when that python already imports trl, datasets and
# pydantic), the checkout's packages are linked into another (benchmarks/gpu_check site), both go on
# PYTHONPATH, then `python3 benchmarks/gpu_check` runs its stages (each under its own limit, --budget 480 s
# in all) and writes gpu_check.json / gpu_check.md / stage_logs.txt to $OUT (else runs/gpu_check).
# The outer limit (GPU_CHECK_OUTER_S, 560 s) only catches a hang outside the stages' own limits.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
WHEELS=${GPU_CHECK_WHEELS:-.gpu-wheels}
SITE=$(mktemp -d /tmp/proofcheck-site.XXXXXX) || { echo "gpu_check.sh: cannot make a folder in /tmp" >&2; exit 2; }
trap 'rm -rf "$SITE"' EXIT
echo "gpu_check.sh: $("$PY" --version 2>&1) ($(command -v "$PY")); wheels from $WHEELS; site $SITE"
if "$PY" -c "import trl, datasets, pydantic" 2>/dev/null; then
  echo "gpu_check.sh: $PY already imports trl, datasets and pydantic: no wheels installed"
elif ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
      --target "$SITE/wheels" "$WHEELS"/*.whl; then
    echo "gpu_check.sh: could not install the wheels in $WHEELS with $PY (made for CPython 3.12 x86-64 by" \
         "'make gpu-wheels'; see $WHEELS/WHEELS.txt)" >&2
    exit 2
  fi
  export PYTHONPATH="$SITE/wheels${PYTHONPATH:+:$PYTHONPATH}"
  echo "gpu_check.sh: installed $(ls "$WHEELS"/*.whl | wc -l) wheels from $WHEELS"
else
  echo "gpu_check.sh: $PY cannot import trl, datasets and pydantic, and $WHEELS holds no wheels: run" \
       "'make gpu-wheels' on the workstation and pass carry=['.gpu-wheels'] to the device run" >&2
  exit 2
fi
"$PY" benchmarks/gpu_check site "$SITE/project" || exit 2
export PYTHONPATH="$SITE/project${PYTHONPATH:+:$PYTHONPATH}"
timeout --kill-after 15 "${GPU_CHECK_OUTER_S:-560}" "$PY" benchmarks/gpu_check "$@"
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "gpu_check.sh: stopped after ${GPU_CHECK_OUTER_S:-560} s (outer limit): a hang outside the stages' own limits" >&2
fi
exit "$rc"
