"""A minimal W3C WebDriver client for headless Chromium, over plain HTTP (httpx, no extra dependency).

Used by the browser test, and runnable to refresh the screenshot in the docs:

    python tests/chromium_driver.py docs/report-support-refund.png

chromedriver is started on 127.0.0.1 and the browser gets no network: name resolution fails and every
request goes to a dead proxy, so a page that tried to fetch anything would log an error.
"""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def find_browser() -> tuple[str, str] | None:
    """(chromium, chromedriver) executables, or None when either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


class Browser:
    def __init__(self, browser: str, driver: str, width: int = 1100, height: int = 1400) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self._proc = subprocess.Popen(
            [driver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._profile = tempfile.mkdtemp(prefix="car-chromium-")
        self._http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
        self._wait_ready()
        args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={self._profile}",
            f"--window-size={width},{height}",
            "--hide-scrollbars",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=127.0.0.1:9",
        ]
        caps = {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": browser, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }
        value = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})
        self._sid = value["sessionId"]

    def _wait_ready(self) -> None:
        for _ in range(300):
            try:
                if self._http.get("/status").json()["value"]["ready"]:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.close()
        raise RuntimeError("chromedriver did not become ready")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        r = self._http.request(method, path, json=body)
        data = r.json()
        if r.status_code != 200:
            raise RuntimeError(f"webdriver {method} {path}: {data['value'].get('message', data)}")
        return data["value"]

    def _s(self, path: str) -> str:
        return f"/session/{self._sid}{path}"

    def open(self, url: str) -> None:
        self._call("POST", self._s("/url"), {"url": url})

    def logs(self) -> list[dict[str, Any]]:
        """Browser log entries (console messages, failed loads, CSP violations) since the last call."""
        return list(self._call("POST", self._s("/se/log"), {"type": "browser"}))

    def find(self, css: str) -> list[str]:
        found = self._call("POST", self._s("/elements"), {"using": "css selector", "value": css})
        return [e[ELEMENT] for e in found]

    def displayed(self, element: str) -> bool:
        return bool(self._call("GET", self._s(f"/element/{element}/displayed")))

    def rect(self, element: str) -> dict[str, float]:
        return dict(self._call("GET", self._s(f"/element/{element}/rect")))

    def text(self, element: str) -> str:
        return str(self._call("GET", self._s(f"/element/{element}/text")))

    def script(self, body: str) -> Any:
        """What the JavaScript function `body` returns, run in the page (by the driver: the page's
        Content-Security-Policy, which forbids scripts, does not apply to it)."""
        return self._call("POST", self._s("/execute/sync"), {"script": body, "args": []})

    def emulate_media(self, media: str) -> None:
        """Lay the page out for "print" (or back to "screen") without printing it."""
        params = {"media": media}
        self._call(
            "POST", self._s("/goog/cdp/execute"), {"cmd": "Emulation.setEmulatedMedia", "params": params}
        )

    def screenshot(self) -> bytes:
        return base64.b64decode(self._call("GET", self._s("/screenshot")))

    def close(self) -> None:
        try:
            if hasattr(self, "_sid"):
                self._http.delete(self._s(""))
        finally:
            self._http.close()
            self._proc.terminate()
            self._proc.wait(timeout=30)
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _main(out: str) -> None:
    import car
    from car.html import render_html

    found = find_browser()
    if found is None:
        raise SystemExit("chromium and chromedriver are needed (.ci/chromium.sh installs them)")
    trace = car.load_trace("traces/support-refund.json")
    report = car.blame("traces/support-refund.json", samples=32, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(render_html(report, trace), encoding="utf-8")
        with Browser(*found, width=1000, height=2700) as b:
            b.open(page.as_uri())
            Path(out).write_bytes(b.screenshot())
    print(f"wrote {out}")


if __name__ == "__main__":
    _main(sys.argv[1] if len(sys.argv) > 1 else "docs/report-support-refund.png")
