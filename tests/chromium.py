"""Debian's headless Chromium driven over the DevTools protocol on a pipe, for tests that assert
on what a page looks like once laid out (its rendered text, its width), not on its HTML source.

``--remote-debugging-pipe`` makes Chromium read protocol messages on file descriptor 3 and
write them on 4, each a JSON object ended by a NUL byte (chromium/src, content/browser/devtools/
devtools_pipe_handler.cc). No CDP library is installed in the venv, so this is the raw protocol:
``Target.createTarget`` and ``Target.attachToTarget`` (``flatten``) open a page session,
``Emulation.setDeviceMetricsOverride`` sets the viewport, ``Page.navigate`` loads the file and
``Page.loadEventFired`` says it is laid out, ``Runtime.evaluate`` reads the layout and
``Page.captureScreenshot`` takes the picture (https://chromedevtools.github.io/devtools-protocol/).

The browser runs with ``HOME`` and its profile in a temporary folder (``conftest.bare_env``),
no network beyond the ``file:`` page, and is ended with its ``with`` block. A missing Chromium
fails the test under ``CI=true`` and skips it elsewhere.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from conftest import bare_env

#: The width the pages are read at (issue 28: "no sideways scroll at 1280 px").
WIDTH, HEIGHT = 1280, 900


def chromium_binary(path: str = "/usr/bin:/bin") -> str:
    """Debian's ``chromium`` on ``path`` (``./bootstrap`` installs it); fails under ``CI=true``
    when missing, skips elsewhere."""
    found = shutil.which("chromium", path=path) or shutil.which("chromium-browser", path=path)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Debian's chromium is required under CI (./bootstrap installs it)")
        pytest.skip("Debian's chromium is not installed (./bootstrap installs it)")
    return found


class Browser:
    """One headless Chromium with one page at ``WIDTH`` × ``HEIGHT`` CSS pixels."""

    def __init__(self, folder: Path, *, timeout: float = 60.0) -> None:
        self.folder, self.timeout = folder, timeout
        home = folder / "home"
        home.mkdir(parents=True, exist_ok=True)
        self._to_chrome_r, self._to_chrome_w = os.pipe()
        self._from_chrome_r, self._from_chrome_w = os.pipe()
        binary = chromium_binary()
        # Chromium reads descriptor 3 and writes 4: _renumber puts the pipe ends there in the child.
        self._process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-extensions", "--hide-scrollbars", "--force-device-scale-factor=1",
             f"--window-size={WIDTH},{HEIGHT}", f"--user-data-dir={folder / 'profile'}",
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=bare_env(home=home), pass_fds=(3, 4), preexec_fn=self._renumber,
        )
        os.close(self._to_chrome_r)
        os.close(self._from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self.session = ""

    def _renumber(self) -> None:
        """In the child, before exec: the pipe ends on descriptors 3 (read) and 4 (write)."""
        read, write = os.dup(self._to_chrome_r), os.dup(self._from_chrome_w)
        os.dup2(read, 3)
        os.dup2(write, 4)
        os.set_inheritable(3, True)
        os.set_inheritable(4, True)

    # -- the protocol -------------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium sent nothing in time")
            chunk = os.read(self._from_chrome_r, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium closed its pipe: {self._stderr()}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True) -> dict[str, Any]:
        """Send one command (to the page's session unless ``session=False``) and return its
        ``result``; a protocol error raises ``RuntimeError`` naming the method."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_chrome_w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self._events.append(reply)

    def wait_for(self, event: str) -> dict[str, Any]:
        """The next event named ``event`` on the page's session (already received or to come)."""
        deadline = time.monotonic() + self.timeout
        while True:
            for i, seen in enumerate(self._events):
                if seen.get("method") == event and seen.get("sessionId") == self.session:
                    del self._events[i]
                    return seen
            self._events.append(self._read_message(deadline))

    # -- what a test does ---------------------------------------------------------------------

    def open(self, page: Path) -> None:
        """Load ``page`` (a file) in a fresh tab at ``WIDTH`` × ``HEIGHT`` and wait for its load event."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": page.resolve().as_uri()})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (returned by value)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """A PNG of the whole page at ``WIDTH`` px wide, written to ``path``."""
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def _stderr(self) -> str:
        if self._process.poll() is None or self._process.stderr is None:
            return ""
        return self._process.stderr.read().decode(errors="replace")[-2000:]

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if self._process.poll() is None:
                with contextlib.suppress(OSError, RuntimeError, TimeoutError):
                    self.send("Browser.close", session=False)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
        finally:
            for fd in (self._to_chrome_w, self._from_chrome_r):
                with contextlib.suppress(OSError):
                    os.close(fd)
            if self._process.stderr is not None:
                self._process.stderr.close()


#: A page's layout as a test reads it: the document's scroll width and the widest element that
#: sticks out past the viewport (to name it when the assertion fails).
LAYOUT = """(() => {
  const root = document.documentElement;
  let widest = null, right = 0;
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.right > right) { right = r.right; widest = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
      + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : ''); }
  }
  return {scrollWidth: root.scrollWidth, clientWidth: root.clientWidth, widest, right: Math.round(right)};
})()"""


def chromium_dom(page: Path, folder: Path) -> str:
    """The page's DOM once Chromium has loaded and laid it out (``outerHTML``), from a browser
    of its own (profile and ``HOME`` under ``folder``)."""
    with Browser(folder / "chromium") as browser:
        browser.open(page)
        dom: str = browser.evaluate("document.documentElement.outerHTML")
        return dom
