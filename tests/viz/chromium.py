"""A real headless Chromium driven over the DevTools protocol (CDP), for the HTML page tests.

Small on purpose: start the browser with a fresh profile and no background networking, open
one page, evaluate JavaScript, send real mouse and key events, take a screenshot, and record
every console message, uncaught exception, log entry and network request the page makes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import websockets

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-dev-shm-usage",
    "--window-size=1400,900",
    "--remote-debugging-port=0",
]


def need_tool(*names: str) -> str:
    """The path of the first of ``names`` on PATH; else skip the test, or fail it under CI."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    message = f"{names[0]} is not installed; run `bash tests/setup.sh`"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


class Chromium:
    """One headless browser with one page, recording what the page does."""

    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self.console: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: dict[str, asyncio.Event] = {}
        self._session: str | None = None

    async def __aenter__(self) -> Chromium:
        binary = need_tool("chromium", "chromium-browser")
        self.proc = await asyncio.create_subprocess_exec(
            binary,
            *FLAGS,
            f"--user-data-dir={self.profile}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        url = None
        while url is None:
            line = (await asyncio.wait_for(self.proc.stderr.readline(), 60)).decode(
                errors="replace"
            )
            if not line:
                raise RuntimeError("chromium exited before it opened its DevTools endpoint")
            match = re.search(r"DevTools listening on (ws://\S+)", line)
            url = match.group(1) if match else None
        self._drain = asyncio.create_task(self._drain_stderr())
        self.ws = await websockets.connect(url, max_size=None)
        self._reader = asyncio.create_task(self._read())
        target = await self.send("Target.createTarget", url="about:blank")
        attached = await self.send(
            "Target.attachToTarget", targetId=target["targetId"], flatten=True
        )
        self._session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            await self.send(f"{domain}.enable")
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.send("Browser.close", browser=True), 10)
        with contextlib.suppress(Exception):
            await self.ws.close()
        self._reader.cancel()
        try:
            await asyncio.wait_for(self.proc.wait(), 20)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self._drain.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._drain
        # the browser closed: its socket may end without a close frame
        with contextlib.suppress(asyncio.CancelledError, websockets.ConnectionClosed):
            await self._reader

    async def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        while await self.proc.stderr.readline():
            pass

    async def _read(self) -> None:
        async for raw in self.ws:
            message = json.loads(raw)
            if "id" in message:
                future = self._waiting.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message)
                continue
            self._record(message.get("method", ""), message.get("params", {}))

    def _record(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled":
            text = " ".join(
                str(a.get("value", a.get("description", ""))) for a in params.get("args", [])
            )
            self.console.append({"type": params.get("type"), "text": text})
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(
                str(details.get("exception", {}).get("description") or details.get("text"))
            )
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(str(params["entry"].get("text")))
        elif method == "Network.requestWillBeSent":
            self.requests.append(str(params.get("request", {}).get("url")))
        self._events.setdefault(method, asyncio.Event()).set()

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one CDP command to the page (or the browser before attaching); its result."""
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if self._session is not None and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self._session
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = future
        await self.ws.send(json.dumps(message))
        reply = await asyncio.wait_for(future, 60)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return dict(reply.get("result", {}))

    async def open(self, path: Path) -> None:
        """Navigate to a local file and wait for its load event."""
        loaded = self._events.setdefault("Page.loadEventFired", asyncio.Event())
        loaded.clear()
        url = await asyncio.to_thread(lambda: path.resolve().as_uri())
        await self.send("Page.navigate", url=url)
        await asyncio.wait_for(loaded.wait(), 60)

    async def js(self, expression: str) -> Any:
        """Evaluate ``expression`` in the page; its value (JSON-serializable)."""
        result = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def click(self, selector: str) -> None:
        """A real mouse click at the centre of the first element matching ``selector``."""
        box = await self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center', inline: 'center'});"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent",
                type=kind,
                x=box[0],
                y=box[1],
                button="left",
                clickCount=1,
            )

    async def key(self, key: str) -> None:
        """Press and release a named key (e.g. ``ArrowRight``)."""
        codes = {"ArrowRight": 39, "ArrowLeft": 37, "ArrowDown": 40, "ArrowUp": 38}
        for kind in ("rawKeyDown", "keyUp"):
            await self.send(
                "Input.dispatchKeyEvent",
                type=kind,
                key=key,
                code=key,
                windowsVirtualKeyCode=codes.get(key, 0),
            )

    async def screenshot(self, path: Path) -> bytes:
        """A PNG of the page's viewport, also written to ``path``."""
        data = base64.b64decode((await self.send("Page.captureScreenshot", format="png"))["data"])
        await asyncio.to_thread(path.write_bytes, data)
        return data
