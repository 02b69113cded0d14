"""A minimal Chrome DevTools Protocol driver for headless Chromium.

Starts `chromium --headless` with a private profile and a free debugging
port, opens one page and talks to it over the DevTools WebSocket
(python3-websocket): navigate, evaluate JavaScript, wait for conditions,
take screenshots. Enough for DOM assertions; no other test dependency.
"""
import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import websocket


class BrowserError(Exception):
    pass


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, binary=None, width=1280, height=900):
        self.binary = binary or find_chromium()
        if not self.binary:
            raise BrowserError("chromium not found (apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="dpopt-chromium.")
        self.proc = None
        args = [self.binary, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--mute-audio",
                "--remote-debugging-port=0", "--remote-allow-origins=*",
                f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
                "about:blank"]
        self.log = open(os.path.join(self.profile, "chromium.log"), "w")
        # Its own process group, so that close() also ends the renderers.
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.ws = None
        try:
            self._connect(width, height)
        except Exception:
            self.close()
            raise

    def _connect(self, width, height):
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        for _ in range(300):
            if self.proc.poll() is not None:
                raise BrowserError("chromium exited: " + self._log_tail())
            if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
                break
            time.sleep(0.1)
        else:
            raise BrowserError("chromium did not open its debugging port: " + self._log_tail())
        port = int(open(port_file).read().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30,
                                              suppress_origin=True)
        self._id = 0
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _log_tail(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-2000:]

    def call(self, method, **params):
        self._id += 1
        my_id = self._id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            # other messages (events) are not needed

    def evaluate(self, expression):
        """Runs JavaScript in the page (awaiting promises); returns its value."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise BrowserError(f"JS error in {expression!r}: {r['exceptionDetails']}")
        return r.get("result", {}).get("value")

    def navigate(self, url):
        self.call("Page.navigate", url=url)

    def wait_for(self, expression, timeout=20.0, what=None):
        """Polls a JS expression until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                # DOM nodes come back as {}; count any object as true.
                last = self.evaluate(
                    f"(() => {{ const v = ({expression}); "
                    "return (v && typeof v === 'object') ? true : v; })()")
            except BrowserError:
                last = None
            if last:
                return last
            time.sleep(0.1)
        raise BrowserError(f"timed out waiting for {what or expression}; page: "
                           + str(self.evaluate("location.href + ' ' + document.body.innerText.slice(0, 500)")))

    def screenshot(self, path):
        self.wait_for("document.readyState === 'complete' && document.body && "
                      "document.body.getBoundingClientRect().width > 0", what="layout")
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data["data"]))

    def close(self):
        if self.ws is not None:
            try:
                self.ws.close()
            except Exception:
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # renderers that outlived the browser process
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if not self.log.closed:
            self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
