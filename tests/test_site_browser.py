"""The site in a real browser: headless Chromium driven through its DevTools protocol (a websocket, the
``websocket-client`` package; no playwright: its browser download needs the internet) opens a workload page
from file://, picks a framework in the filter, sorts a column, sets a date range, and reads which rows are
shown. Skipped only where no Chromium is installed."""

import json
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from xpubench.publish.site import build_site

RUNS = Path(__file__).resolve().parent / "data" / "runs"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Page:
    """One tab of a headless Chromium, driven by Runtime.evaluate over the DevTools websocket."""

    def __init__(self, url: str, profile: Path):
        import websocket

        self.proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                      f"--user-data-dir={profile}", "--remote-debugging-port=0",
                                      "--remote-allow-origins=*", url],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            found = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            port = int(found.group(1)) if found else None
            if not line and self.proc.poll() is not None:
                break
        assert port, "chromium did not start its DevTools endpoint"
        targets = []
        while not targets and time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
                targets = [t for t in json.load(answer) if t.get("type") == "page" and t["url"].startswith("file:")]
            time.sleep(0.2)
        self.ws = websocket.create_connection(targets[0]["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.ids = 0
        self.wait("document.readyState === 'complete'")

    def js(self, expression: str):
        self.ids += 1
        self.ws.send(json.dumps({"id": self.ids, "method": "Runtime.evaluate",
                                 "params": {"expression": expression, "returnByValue": True}}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.ids:
                result = reply["result"]
                assert "exceptionDetails" not in result, result
                return result["result"].get("value")

    def wait(self, condition: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not self.js(f"Boolean({condition})"):
            assert time.monotonic() < deadline, f"timed out waiting for {condition}"
            time.sleep(0.1)

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


SHOWN = "Array.from(document.querySelectorAll('#cases tbody tr')).filter(r => !r.hidden)"


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_filters_and_sorting_in_headless_chromium(tmp_path):
    build_site(RUNS, tmp_path / "site")
    html = (tmp_path / "site" / "w" / "matmul.html").read_text()
    rows = re.findall(r'<tr data-device="[^"]*" data-framework="([^"]*)" data-precision="[^"]*" '
                      r'data-date="([^"]*)"', html)
    torch = [d for f, d in rows if f == "torch"]
    torch_27 = [d for d in torch if d >= "2026-11-27"]
    assert len(rows) == 22 and 0 < len(torch_27) < len(torch) < 22   # the filters below have rows to hide
    page = Page((tmp_path / "site" / "w" / "matmul.html").as_uri(), tmp_path / "profile")
    try:
        page.wait("document.getElementById('cases-count') && document.getElementById('cases-count').textContent")
        assert page.js(f"{SHOWN}.length") == 22
        assert page.js("document.getElementById('cases-count').textContent") == "22 of 22 rows shown"
        # the framework filter: only torch rows stay visible
        page.js("var s = document.querySelector('form.filters select[name=framework]'); s.value = 'torch';"
                "s.dispatchEvent(new Event('change', {bubbles: true}))")
        frameworks = page.js(f"{SHOWN}.map(r => r.dataset.framework)")
        assert set(frameworks) == {"torch"} and len(frameworks) == len(torch)
        assert page.js("document.getElementById('cases-count').textContent") == f"{len(torch)} of 22 rows shown"
        # a date range: 2026-11-27 only (report-zen3, default-zen3, the quiet run)
        page.js("var f = document.querySelector('form.filters'); f.elements.from.value = '2026-11-27';"
                "f.dispatchEvent(new Event('input', {bubbles: true}))")
        assert set(page.js(f"{SHOWN}.map(r => r.dataset.date)")) == {"2026-11-27"}
        assert page.js(f"{SHOWN}.length") == len(torch_27)
        # sorting by the time column (numbers by data-sort), twice: ascending then descending
        column = page.js("Array.from(document.querySelectorAll('#cases thead th'))"
                         ".findIndex(h => h.textContent === 'time')")
        page.js(f"document.querySelectorAll('#cases thead th')[{column}].click()")
        times = page.js("Array.from(document.querySelectorAll('#cases tbody tr'))"
                        f".map(r => Number(r.cells[{column}].dataset.sort))")
        assert times == sorted(times) and len(times) == 22
        page.js(f"document.querySelectorAll('#cases thead th')[{column}].click()")
        times = page.js("Array.from(document.querySelectorAll('#cases tbody tr'))"
                        f".map(r => Number(r.cells[{column}].dataset.sort))")
        assert times == sorted(times, reverse=True)
        assert page.js(f"document.querySelectorAll('#cases thead th')[{column}]"
                       ".getAttribute('aria-sort')") == "descending"
        # the filter still holds after sorting; "all" shows every row again
        assert page.js(f"{SHOWN}.length") == len(torch_27)
        page.js("var s = document.querySelector('form.filters select[name=framework]'); s.value = '';"
                "var f = document.querySelector('form.filters'); f.elements.from.value = '';"
                "s.dispatchEvent(new Event('change', {bubbles: true}))")
        assert page.js(f"{SHOWN}.length") == 22
    finally:
        page.close()
