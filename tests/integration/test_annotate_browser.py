"""End to end: a real `proofcheck annotate` subprocess, driven by headless Chromium, and killed.

The browser is Debian's `chromium`, driven over the Chrome DevTools Protocol (the `websockets`
client; Playwright is not installed): real mouse clicks, key presses and text input. A second
test SIGKILLs the server between saves and checks that the restart resumes with nothing lost.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from proofcheck.process import free_port

# conftest stops the session at its start when Chromium is missing (marker `browser`)
pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--window-size=1200,1400"]

BASE = {"reference_answer": "", "domain": "ugd", "subject": "number theory", "source_id": "t", "policy": "prover-x"}
ITEMS = [
    {**BASE, "problem_id": "sq", "proof_id": "sq#0",
     "problem": r"Prove that $\sqrt{2}$ is irrational.",
     "reference_solution": r"Suppose $\sqrt{2} = p/q$ in lowest terms; then $p^2 = 2q^2$ ...",
     "steps": [r"Assume $\sqrt{2} = p/q$ with $\gcd(p,q)=1$.", r"Then $p^2 = 2q^2$, so $p^2$ is even.",
               r"Hence $q$ is even, because $\frac{p^2}{2} = q^2$.", r"Both even contradicts $\gcd(p,q)=1$."],
     # as `proofcheck data select` writes them (data/curate.py)
     "verifier_passes": [
         {"verifier": "v1", "status": "valid", "verdict": "accept", "first_error_step": -1, "invalid_reason": None,
          "text": "<assessment>ok</assessment>"},
         {"verifier": "v2", "status": "valid", "verdict": "reject", "first_error_step": 2, "invalid_reason": None,
          "text": "Step 2 is wrong"}],
     "selection": {"accept": 1, "reject": 1, "invalid": 0, "entropy": 1.0,
                   "per_model": {"v1": {"accept": 1, "reject": 0}, "v2": {"accept": 0, "reject": 1}}}},
    {**BASE, "problem_id": "sum", "proof_id": "sum#0", "problem": r"Show $\sum_{k=1}^n k = \frac{n(n+1)}{2}$.",
     "steps": ["Induction on $n$.", r"Broken maths: $\left( x + 1$ stays raw."]},
    {**BASE, "problem_id": "odd", "proof_id": "odd#0", "problem": "Show that an odd square is odd.",
     "steps": ["Let $n = 2m+1$.", "$n^2 = 4m^2+4m+1$ is odd."]},
]


class AnnotateServer:
    """`proofcheck annotate` as a subprocess on 127.0.0.1, stopped (or killed) by its handle."""

    def __init__(self, inp: Path, out: Path, log: Path, port: int | None = None, tokens: str | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "a")
        cmd = [sys.executable, "-m", "proofcheck.app.cli", "annotate", "--input", str(inp), "--out", str(out),
               "--host", "127.0.0.1", "--port", str(self.port)]
        env = dict(os.environ)
        if tokens is not None:  # `name:token,...` required at login
            cmd += ["--token-env", "PC_TEST_ANNOTATE_TOKENS"]
            env["PC_TEST_ANNOTATE_TOKENS"] = tokens
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"server exited with {self.proc.returncode}; see {log}"
            try:
                if httpx.get(f"{self.url}/api/config", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise TimeoutError(f"annotate server not ready; see {log}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Browser:
    """Headless Chromium with one page, driven over CDP (real input events, not DOM `.click()`)."""

    def __init__(self, profile: Path, log: Path):
        from websockets.sync.client import connect

        profile.mkdir(parents=True, exist_ok=True)
        self.log = open(log, "w")
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            assert self.proc.poll() is None, f"chromium exited with {self.proc.returncode}; see {log}"
            assert time.monotonic() < deadline, f"chromium did not open its DevTools port; see {log}"
            time.sleep(0.1)
        port = int(port_file.read_text().splitlines()[0])
        targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
        page = next(t for t in targets if t["type"] == "page")
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30))
        self._ids = itertools.count(1)
        self.console: list[str] = []
        for domain in ("Page", "Runtime"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=1200, height=1400, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("method") == "Runtime.exceptionThrown":
                self.console.append(json.dumps(msg["params"]["exceptionDetails"])[:500])
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"CDP {method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expr: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expr, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"JS error in {expr!r}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_for(self, expr: str, timeout: float = 20) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.eval(expr)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {expr}; page errors: {self.console}")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def click(self, selector: str) -> None:
        box = self.eval(f"""(() => {{ const el = document.querySelector({json.dumps(selector)});
            if (!el) return null; el.scrollIntoView({{block: 'center'}}); const r = el.getBoundingClientRect();
            return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
        assert box, f"no element {selector}"
        x, y = box
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def type(self, text: str) -> None:
        self.call("Input.insertText", text=text)

    def press(self, key: str, code: str, vk: int, modifiers: int = 0) -> None:
        text = key if len(key) == 1 and not modifiers else ""
        self.call("Input.dispatchKeyEvent", type="keyDown", key=key, code=code, windowsVirtualKeyCode=vk,
                  text=text, modifiers=modifiers)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, windowsVirtualKeyCode=vk,
                  modifiers=modifiers)

    def screenshot(self, path: Path) -> None:
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except Exception:  # the connection may drop before the reply: the process is awaited below
            pass
        self._stack.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # our own process group, started above
            self.proc.wait()
        self.log.close()


def write_items(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in ITEMS))
    return path


def read_out(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@pytest.fixture
def served(tmp_path: Path):
    inp, out = write_items(tmp_path / "proofs.jsonl"), tmp_path / "annotated.jsonl"
    server = AnnotateServer(inp, out, tmp_path / "server.log")
    yield server, out
    server.stop()


TOKEN_ROW_SHOWN = ("(() => { const e = document.getElementById('login-token-row'); "
                   "return getComputedStyle(e).display !== 'none' && e.getBoundingClientRect().height > 0; })()")


def test_login_asks_for_a_token_only_when_tokens_are_required(tmp_path: Path) -> None:
    inp, out = write_items(tmp_path / "proofs.jsonl"), tmp_path / "annotated.jsonl"
    server = AnnotateServer(inp, out, tmp_path / "server.log", tokens="alice:s3cret")
    browser = None
    try:
        browser = Browser(tmp_path / "profile", tmp_path / "chromium.log")
        browser.goto(server.url + "/")
        browser.wait_for("!document.getElementById('login').hidden")
        assert browser.eval(TOKEN_ROW_SHOWN) is True
        browser.click("#login-name")
        browser.type("alice")
        browser.click("#login-token")
        browser.type("wrong")
        browser.click("#login-go")
        browser.wait_for("document.getElementById('login-msg').textContent !== ''")
        assert browser.eval("document.getElementById('work').hidden") is True
        browser.eval("document.getElementById('login-token').value = ''")
        browser.click("#login-token")
        browser.type("s3cret")
        browser.click("#login-go")
        browser.wait_for("document.querySelectorAll('#steps .step').length === 4")
        assert browser.eval("document.getElementById('who').textContent") == "alice"
    finally:
        if browser is not None:
            browser.close()
        server.stop()


def test_browser_marks_steps_saves_and_resumes(served, tmp_path: Path) -> None:
    server, out = served
    browser = Browser(tmp_path / "profile", tmp_path / "chromium.log")
    try:
        browser.goto(server.url + "/")
        browser.wait_for("!document.getElementById('login').hidden")
        assert browser.eval(TOKEN_ROW_SHOWN) is False  # no tokens configured: no Token box
        browser.click("#login-name")
        browser.type("alice")
        browser.click("#login-go")
        browser.wait_for("document.querySelectorAll('#steps .step').length === 4")
        assert browser.eval("document.getElementById('progress').textContent") == "0 / 3 done"
        # Maths rendered by the bundled KaTeX; auxiliary passes collapsed by default.
        assert browser.eval("document.querySelectorAll('#problem .katex, #steps .katex').length") >= 4
        assert browser.eval("document.getElementById('passes-box').open") is False
        assert "entropy1" in browser.eval("document.getElementById('selection').textContent")

        browser.click("#step-2 .mark.f")                            # mouse: step 2 is the first fatal error
        for _ in range(2):
            browser.press("k", "KeyK", 75)                          # keyboard: cursor up to step 0 ...
        browser.press("r", "KeyR", 82)                              # ... and mark it recoverable
        marks = "[...document.querySelectorAll('#steps .step')].map(e => ['fatal', 'recoverable']" \
                ".filter(c => e.classList.contains(c)).join())"
        assert browser.eval(marks) == ["recoverable", "", "fatal", ""]

        browser.click("#save")                                      # no comment on a flawed proof: 422
        browser.wait_for("document.getElementById('message').className === 'error'")
        assert "reviewer comment" in browser.eval("document.getElementById('message').textContent")
        assert not out.exists(), "a rejected save must write nothing"

        browser.click("#comment")
        browser.type("Step 2 asserts q is even without the parity lemma for q.")
        browser.click("#save")
        browser.wait_for("document.getElementById('message').className === 'ok'")
        assert browser.eval("document.getElementById('progress').textContent") == "1 / 3 done"
        browser.click("#passes-box summary")                       # expand the auxiliary passes
        assert "pass 1 · v2 · reject (step 2)" in browser.eval("document.getElementById('passes').innerText")
        shot = tmp_path / "annotate_page.png"
        browser.screenshot(shot)
        print(f"\nscreenshot: {shot}")

        records = read_out(out)
        assert len(records) == 1
        rec = records[0]
        assert (rec["proof_id"], rec["annotator"], rec["origin"]) == ("sq#0", "alice", "expert")
        assert rec["annotation"]["first_fatal_error_step"] == 2
        assert rec["annotation"]["recoverable_error_steps"] == [0]
        assert rec["annotation"]["reviewer_comment"].startswith("Step 2 asserts")
        assert (rec["is_correct"], rec["first_error_step"]) == (False, 0)
        assert rec["created_at"] and rec["updated_at"]

        browser.press("n", "KeyN", 78)                              # next proof: bad LaTeX stays readable
        browser.wait_for("document.getElementById('meta').textContent.includes('sum#0')")
        assert browser.eval("document.querySelectorAll('#steps .katex-error').length") == 1
        assert "\\left( x + 1" in browser.eval("document.getElementById('step-1').textContent")

        browser.goto(server.url + "/")                              # reload: resume at the first todo item
        browser.wait_for("document.getElementById('meta').textContent.includes('sum#0')")
        browser.press("p", "KeyP", 80)                              # back to the saved one: labels reloaded
        browser.wait_for("document.getElementById('meta').textContent.includes('sq#0')")
        assert browser.eval("document.querySelector('#step-2').classList.contains('fatal')")
        assert browser.eval("document.getElementById('comment').value").startswith("Step 2 asserts")
        assert not browser.console, browser.console
    finally:
        browser.close()


def test_sigkill_mid_session_loses_nothing(tmp_path: Path) -> None:
    inp, out = write_items(tmp_path / "proofs.jsonl"), tmp_path / "annotated.jsonl"
    journal = tmp_path / "annotated.journal.jsonl"
    server = AnnotateServer(inp, out, tmp_path / "server.log")
    alice, bob = {"X-Annotator": "alice"}, {"X-Annotator": "bob"}
    try:
        ok = {"first_fatal_error_step": -1, "recoverable_error_steps": [-1], "reviewer_comment": ""}
        flawed = {"first_fatal_error_step": 1, "recoverable_error_steps": [0], "reviewer_comment": "gap"}
        assert httpx.put(f"{server.url}/api/annotations/sq%230", json=flawed, headers=alice).status_code == 200
        assert httpx.put(f"{server.url}/api/annotations/sq%230", json=ok, headers=bob).status_code == 200
        assert httpx.put(f"{server.url}/api/broken/sum%230", json={"reason": "garbled"}, headers=alice).status_code == 200
    finally:
        server.stop(signal.SIGKILL)
    assert server.proc.returncode == -signal.SIGKILL
    with open(journal, "a") as f:  # as if killed in the middle of the next journal write
        f.write('{"kind": "annotated", "proof_id": "odd#0", "annot')

    server = AnnotateServer(inp, out, tmp_path / "server.log")
    try:
        q = httpx.get(f"{server.url}/api/queue", headers=alice).json()
        assert q["progress"] == {"done": 2, "total": 3}
        assert q["resume_index"] == 2
        assert [i["status"] for i in q["items"]] == ["annotated", "broken", "todo"]
        assert httpx.get(f"{server.url}/api/queue", headers=bob).json()["resume_index"] == 1
        item = httpx.get(f"{server.url}/api/items/sq%230", headers=alice).json()
        assert item["mine"]["annotation"]["first_fatal_error_step"] == 1 and item["n_annotators"] == 2
        again = {"first_fatal_error_step": -1, "recoverable_error_steps": [-1], "reviewer_comment": ""}
        assert httpx.put(f"{server.url}/api/annotations/odd%230", json=again, headers=alice).status_code == 200
    finally:
        server.stop()
    keys = [(r["proof_id"], r["annotator"]) for r in read_out(out)]
    assert keys == [("sq#0", "alice"), ("sq#0", "bob"), ("odd#0", "alice")]
    broken = read_out(tmp_path / "annotated.broken.jsonl")
    assert [(r["proof_id"], r["report_reason"]) for r in broken] == [("sum#0", "garbled")]
    assert all(json.loads(line) for line in journal.read_text().splitlines())  # torn tail was dropped
