"""Check the built docs site in headless Chromium, and take screenshots of the DDP reference.

    mkdocs build --strict && python docs/_ext/check_site.py site --screenshots /tmp/shots

What is checked, in the browser (layout is measured, not guessed from the HTML):

* the DDP reference (``api/nn.parallel.html``): ``DistributedDataParallel``'s Parameters table
  names every parameter of its signature, each with a type; the signature is formatted over
  several lines; "Source code in tensorbrain/nn/parallel/distributed.py" is there; the
  docstring's ``docs/ddp.md`` is a link that reaches the page;
* on every page of :data:`PAGES`: no table is wider than the column it sits in (nothing cut off
  or scrolled away), the page's table of contents is on the right of the text, and the left
  navigation is short (one section's pages).

Chromium is driven through its DevTools protocol over a WebSocket written here with the standard
library (no client package is needed); Debian's ``chromium`` is enough. Exit status 0 when all
checks pass, 1 with one line per failure; ``tests/test_docs_site.py`` runs it when Chromium and
mkdocs are installed.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

PAGES = ["api/nn.parallel.html", "api/distributed.html", "api/utils.data.html",
         "api/distributed.fsdp.html", "environment.html", "benchmarks.html", "profiler.html"]
DDP = "tensorbrain.nn.parallel.DistributedDataParallel"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1400,1000", "--remote-debugging-port=0"]


# ***** a minimal WebSocket client (RFC 6455), enough for the DevTools protocol *****
class _Socket:
    def __init__(self, url: str):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((m[1], int(m[2])), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {m[3]} HTTP/1.1\r\nHost: {m[1]}:{m[2]}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           f"Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError(f"WebSocket handshake refused: {head[:200]!r}")

    def send(self, text: str) -> None:
        data, mask = text.encode(), os.urandom(4)
        n = len(data)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("DevTools connection closed")
            out += chunk
        return out

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            n = struct.unpack(">H", self._exact(2))[0] if n == 126 else \
                struct.unpack(">Q", self._exact(8))[0] if n == 127 else n
            message += self._exact(n)
            if b0 & 0x80:
                return message.decode()


class Browser:
    """Headless Chromium with one page, driven through the DevTools protocol."""

    def __init__(self, chromium: str):
        self.profile = tempfile.mkdtemp(prefix="tb-chromium-")
        self.proc = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={self.profile}",
                                      "about:blank"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            port = m and int(m[1])
            if not line and self.proc.poll() is not None:
                raise RuntimeError("chromium exited before it listened")
        if port is None:
            raise RuntimeError("chromium did not start its DevTools endpoint within 60 s")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
            target = next(t for t in json.load(r) if t["type"] == "page")
        self.ws = _Socket(target["webSocketDebuggerUrl"])
        self.next_id = 0
        self.call("Page.enable")

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.eval("document.readyState") == "complete":
                time.sleep(0.3)  # Material's scripts lay out the sidebars after load
                return
            time.sleep(0.1)
        raise TimeoutError(f"{url} did not load within 30 s")

    def eval(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: str, selector: str) -> None:
        """The viewport, scrolled so ``selector`` is at its top."""
        self.eval(f"document.getElementById({json.dumps(selector)}).scrollIntoView()")
        time.sleep(0.3)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


# ***** the checks (JavaScript run in the page) *****
_LAYOUT = """(() => {
  const article = document.querySelector('article.md-content__inner');
  const box = article.getBoundingClientRect();
  const cut = [...article.querySelectorAll('table')].filter(t =>
      t.scrollWidth > t.parentElement.clientWidth + 1 ||
      t.getBoundingClientRect().right > box.right + 1).map(t => t.innerText.slice(0, 60));
  const toc = document.querySelector('.md-sidebar--secondary');
  const tocBox = toc ? toc.getBoundingClientRect() : null;
  const tocLinks = toc ? [...toc.querySelectorAll('.md-nav__link')].filter(
      a => a.offsetParent !== null).length : 0;
  const nav = document.querySelector('.md-sidebar--primary');
  const navLinks = nav ? [...nav.querySelectorAll('.md-nav__link')].filter(
      a => a.offsetParent !== null && a.getBoundingClientRect().width > 0).length : 0;
  return {cut, tocRight: tocBox !== null && tocBox.left >= box.right - 1 && tocBox.width > 0,
          tocLinks, navLinks, sections: article.querySelectorAll('h2').length};
})()"""

_DDP = """((id) => {
  const head = document.getElementById(id);
  if (!head) return {missing: true};
  const obj = head.parentElement;
  const sig = obj.querySelector(':scope > .doc-signature');
  const body = obj.querySelector(':scope > .doc-contents');
  const table = [...body.querySelectorAll('table')].find(
      t => t.tHead && /Type/.test(t.tHead.innerText) && /Name/.test(t.tHead.innerText));
  const rows = table ? [...table.tBodies[0].rows].map(
      r => [r.cells[0].innerText.trim(), r.cells[1].innerText.trim()]) : [];
  const link = [...body.querySelectorAll('a')].find(a => /docs\\/ddp\\.md/.test(a.innerText));
  return {signatureLines: sig ? sig.innerText.trim().split('\\n').length : 0, rows,
          source: /Source code in\\s+tensorbrain\\/nn\\/parallel\\/distributed\\.py/.test(body.innerText),
          link: link ? link.href : null};
})"""


def check(site: str, screenshots: str | None = None, chromium: str | None = None,
          pages: list | None = None) -> list:
    """Run every check on the built ``site``; returns the failures (empty: all passed).
    ``pages``: the layout checks' pages (default :data:`PAGES`)."""
    chromium = chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
    site = os.path.abspath(site)
    failures = []
    browser = Browser(chromium)
    try:
        for page in pages or PAGES:
            browser.open(f"file://{site}/{page}")
            got = browser.eval(_LAYOUT)
            if got["cut"]:
                failures.append(f"{page}: tables wider than the page: {got['cut']}")
            if got["sections"] and (not got["tocRight"] or got["tocLinks"] < 1):
                failures.append(f"{page}: no table of contents on the right ({got})")
            if got["navLinks"] > 40:
                failures.append(f"{page}: the left navigation shows {got['navLinks']} links")
        browser.open(f"file://{site}/api/nn.parallel.html")
        ddp = browser.eval(_DDP + f"({json.dumps(DDP)})")
        import inspect
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))))
        from tensorbrain.nn.parallel import DistributedDataParallel
        params = [p for p in inspect.signature(DistributedDataParallel.__init__).parameters
                  if p != "self"]
        if ddp.get("missing"):
            failures.append("api/nn.parallel.html: no DistributedDataParallel section")
        else:
            names = [r[0] for r in ddp["rows"]]
            if names != params:
                failures.append(f"DDP Parameters table {names} != the signature's {params}")
            untyped = [r[0] for r in ddp["rows"] if not r[1]]
            if untyped:
                failures.append(f"DDP parameters without a type: {untyped}")
            if ddp["signatureLines"] < 3:
                failures.append(f"DDP signature is {ddp['signatureLines']} line(s), not formatted")
            if not ddp["source"]:
                failures.append("DDP: no 'Source code in tensorbrain/nn/parallel/distributed.py'")
            if not (ddp["link"] or "").endswith("/ddp.html"):
                failures.append(f"DDP: docs/ddp.md is not a link to the page ({ddp['link']})")
        if screenshots:
            os.makedirs(screenshots, exist_ok=True)
            browser.screenshot(os.path.join(screenshots, "ddp.png"), DDP)
            browser.eval(f"document.getElementById({json.dumps(DDP)}).parentElement"
                         f".querySelector(':scope > .doc-contents table').scrollIntoView()")
            time.sleep(0.3)
            data = browser.call("Page.captureScreenshot", format="png")["data"]
            with open(os.path.join(screenshots, "ddp-parameters.png"), "wb") as f:
                f.write(base64.b64decode(data))
    finally:
        browser.close()
    return failures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("site", help="the built site (mkdocs build's site/)")
    p.add_argument("--screenshots", default=None, help="write ddp.png, ddp-parameters.png here")
    p.add_argument("--all", action="store_true", help="the layout checks on every page")
    args = p.parse_args(argv)
    pages = None
    if args.all:
        import glob
        pages = sorted(os.path.relpath(f, args.site) for f in glob.glob(f"{args.site}/**/*.html",
                       recursive=True) if not f.endswith(("404.html", "search.html")))
    failures = check(args.site, args.screenshots, pages=pages)
    for f in failures:
        print(f"FAIL {f}")
    print("all checks passed" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
