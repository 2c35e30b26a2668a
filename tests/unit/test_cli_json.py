"""`--json`: stdout carries the JSON alone; logs of libraries and of child processes go to stderr.

The real vLLM case (`verify --model PATH --json`, whose INFO lines used to precede the JSON) is
tests/integration/test_serve_inprocess.py::test_cli_verify_in_process_model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proofcheck.app.commands._common import json_only_stdout, print_json

NOISY = """
import logging, os, subprocess, sys
from proofcheck.app.commands._common import json_only_stdout, print_json
print("before")
with json_only_stdout():
    print("a print")
    handler = logging.StreamHandler(sys.stdout)  # as vLLM's logger config does, resolved at import time
    logging.getLogger("lib").addHandler(handler)
    logging.getLogger("lib").warning("INFO-like library line")
    os.write(1, b"raw fd 1 write\\n")
    subprocess.run([sys.executable, "-c", "print('child process line')"], check=True)
    print_json({"decision": "reject", "passes": 2})
print("after")
"""


def test_stdout_is_the_json_alone() -> None:
    proc = subprocess.run([sys.executable, "-c", NOISY], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    before, rest = proc.stdout.split("\n", 1)
    body, after = rest.rsplit("after", 1)
    assert before == "before" and after == "\n"  # stdout is restored afterwards
    assert json.loads(body) == {"decision": "reject", "passes": 2}
    for line in ("a print", "INFO-like library line", "raw fd 1 write", "child process line"):
        assert line in proc.stderr and line not in proc.stdout


def test_in_process_capture(capsys: pytest.CaptureFixture) -> None:
    with json_only_stdout():
        print("noise")
        print_json([1, 2])
    out, err = capsys.readouterr()
    assert json.loads(out) == [1, 2] and "noise" in err


@pytest.mark.parametrize("args", [["metrics", "verifier", "--data", "D", "--outputs", "O", "--json"]])
def test_cli_json_errors_stay_on_stderr(args: list[str], tmp_path: Path) -> None:
    """A failing `--json` command prints nothing on stdout (its error goes to stderr)."""
    proc = subprocess.run([sys.executable, "-m", "proofcheck.app.cli", *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert proc.returncode != 0 and proc.stdout == "" and "error" in proc.stderr
