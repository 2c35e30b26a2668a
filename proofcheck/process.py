"""Start an HTTP service as a subprocess, wait until it answers, stop it by its handle.

Used by the demo (the verification service), the tests (vLLM and our service on 127.0.0.1)
and the benchmarks. The process is stopped with SIGTERM (graceful shutdown), then SIGKILL if
it does not exit in time: never by name.

Example:
    >>> with ServiceProcess(["python", "-m", "proofcheck.app.cli", "serve", ...], "http://127.0.0.1:8000/health",
    ...                     log="serve.log") as svc:  # doctest: +SKIP
    ...     httpx.post("http://127.0.0.1:8000/v1/verify", json=...)
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServiceProcess:
    """A subprocess serving HTTP; `health_url` must answer 200 once it is ready."""

    def __init__(self, cmd: list[str], health_url: str, log: str | Path, *, env: dict[str, str] | None = None,
                 cwd: str | Path | None = None):
        self.cmd = cmd
        self.health_url = health_url
        self.log_path = Path(log)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                     cwd=cwd)

    def wait_ready(self, timeout_s: float = 300) -> None:
        """Poll the health URL until it answers 200; raise with the log's path if the process dies."""
        import httpx

        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"`{' '.join(self.cmd[:5])} ...` exited with {self.proc.returncode}; "
                                   f"see {self.log_path}")
            try:
                if httpx.get(self.health_url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.health_url} not ready after {timeout_s:.0f} s; see {self.log_path}")
            time.sleep(0.5)

    def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM, wait, SIGKILL if needed; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def __enter__(self) -> ServiceProcess:
        try:
            self.wait_ready()
        except Exception:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
