"""Shared by the web page's tests: headless Chromium driven over the DevTools protocol."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from lossless.server.run import free_port

__all__ = ["CHROMIUM", "HEADLESS", "DevTools", "browser_marks", "chromium_page", "search_page"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
HEADLESS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
            "--no-first-run", "--mute-audio"]
browser_marks = [pytest.mark.browser,
                 pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium)")]


class DevTools:
    """Just enough of the Chrome DevTools protocol: evaluate JavaScript in the page."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.next_id = 0

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                result: dict[str, Any] = message["result"]
                return result

    def eval(self, expression: str) -> Any:
        out = self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        assert "exceptionDetails" not in out, out
        return out["result"].get("value")

    def wait(self, condition: str, timeout: float = 15) -> Any:
        deadline = time.monotonic() + timeout
        safe = f"(() => {{ try {{ return ({condition}); }} catch (e) {{ return null; }} }})()"  # page still loading
        while time.monotonic() < deadline:
            value = self.eval(safe)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {condition}")

    def open(self, url: str, until: str = "document.readyState === 'complete'") -> None:
        """Navigate to ``url`` (a fresh document, also when only the fragment differs) and
        wait for ``until``."""
        self.send("Page.navigate", url="about:blank")
        self.wait("location.href === 'about:blank'")
        self.send("Page.navigate", url=url)
        self.wait(until)

    def text(self, element_id: str) -> str:
        return str(self.eval(f"document.getElementById({json.dumps(element_id)}).innerText"))


@contextmanager
def chromium_page(width: int = 1280, height: int = 900) -> Iterator[DevTools]:
    """A headless Chromium of its own (a throwaway profile) and its one page, over DevTools."""
    assert CHROMIUM is not None
    port = free_port()
    # Chromium's helper processes can still write to the profile as the main one exits
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen([CHROMIUM, *HEADLESS, f"--user-data-dir={profile}", f"--remote-debugging-port={port}",
                                 f"--window-size={width},{height}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            pages: list[dict[str, Any]] = []
            while not pages:
                assert time.monotonic() < deadline, "Chromium's DevTools endpoint did not come up"
                try:
                    pages = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["type"] == "page"]
                except httpx.HTTPError:
                    time.sleep(0.1)
            with connect(pages[0]["webSocketDebuggerUrl"], max_size=None) as ws:
                page = DevTools(ws)
                page.send("Page.enable")
                yield page
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def search_page(page: DevTools, query: str) -> None:
    """Search from the page's form and wait for hits or an error."""
    page.eval("document.getElementById('search-results').replaceChildren();"
              f"document.getElementById('search-query').value = {json.dumps(query)};"
              "document.getElementById('search-form').requestSubmit()")
    page.wait("document.querySelectorAll('#search-results li').length > 0 "
              "|| document.getElementById('status').className.includes('error')")
