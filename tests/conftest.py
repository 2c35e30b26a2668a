"""Shared fixtures: the tiny model (built once per session) and a real vLLM-CPU server.

Heavy fixtures are session-scoped because each vLLM engine start costs ~20-40 s here.
GPU-marked tests are skipped when no CUDA device is present.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from proofcheck.precision import choose_dtype
from proofcheck.process import ServiceProcess, free_port

REPO = Path(__file__).resolve().parents[1]


BROWSER_INSTALL = "sudo apt-get install -y chromium (or `make test`, which installs it when run as root)"


def browser_path() -> str | None:
    """Debian's Chromium, which the `browser`-marked tests drive headless."""
    found = shutil.which("chromium")
    return found or ("/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None)


def pytest_report_header(config: pytest.Config) -> list[str]:
    choice = choose_dtype(device="cpu")
    return [f"browser (browser-marked tests): {browser_path() or 'MISSING'}",
            f"compute dtype for vLLM/SFT here: {choice.short} ({choice.reason})"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    browser = [item.nodeid for item in items if "browser" in item.keywords]
    if browser and browser_path() is None:
        # said once, before any test runs, instead of a failure deep inside a fixture
        pytest.exit(f"{len(browser)} selected test(s) drive a real browser (marker `browser`) and Chromium is not "
                    f"installed: {BROWSER_INSTALL}; or deselect them with -m 'not browser'", returncode=4)
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path to the tiny Qwen2 model (random weights), built once per test session."""
    from proofcheck.models.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


class VLLMServer(ServiceProcess):
    """A real `vllm.entrypoints.openai.api_server` subprocess on 127.0.0.1, stopped by its handle."""

    def __init__(self, model: Path, log_path: Path, extra_args: tuple[str, ...] = ()):
        self.port = free_port()
        self.model_name = "tiny"
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(self.port),
               "--enforce-eager", "--max-model-len", "4096", "--seed", "0",
               # whole prompts in one step: seeded requests crash vLLM-CPU on chunked prefill (serve/engine_args.py)
               "--no-enable-chunked-prefill", "--max-num-batched-tokens", "32768",
               # fp32 unless the CPU runs bf16 natively (vLLM-CPU's `auto` is bf16, emulated on AVX2)
               "--dtype", choose_dtype(device="cpu").dtype, *extra_args]
        super().__init__(cmd, f"http://127.0.0.1:{self.port}/health", log_path, env={"VLLM_CPU_KVCACHE_SPACE": "1"})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture(scope="session")
def vllm_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """A real vLLM OpenAI-compatible server serving the tiny model as `tiny` (session-wide)."""
    server = VLLMServer(tiny_model, tmp_path_factory.mktemp("vllm-log") / "server.log")
    try:
        server.wait_ready(240)
        yield server
    finally:
        server.stop(30)
