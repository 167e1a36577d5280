"""Shared by the console tests: a real ``rocketq serve`` process with its console, and HTTP helpers."""

from __future__ import annotations

import http.cookiejar
import os
import re
import select
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from rocketq.cli.main import cli

START_TIMEOUT_S = 60
LINE = re.compile(r"NameServer [\d.]+:(\d+), .*console (http://[\d.]+:\d+/), metrics (http://[\d.]+:\d+/metrics)")
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Served:
    namesrv: str
    console: str
    metrics: str
    proc: subprocess.Popen


def start_serve(root, *extra: str) -> Served:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "serve", "--store-path", str(root / "s"),
                             "--profile", "small", "--host", "127.0.0.1", "--port", "0", "--namesrv-port", "0",
                             "--no-grpc", "--console-port", "0", "--set", "metricsPromExporterPort=0", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
    line = proc.stdout.readline() if ready else ""
    m = LINE.search(line)
    if not m:
        proc.kill()
        raise AssertionError(f"rocketq serve did not start: {line!r}")
    return Served(f"127.0.0.1:{m.group(1)}", m.group(2), m.group(3), proc)


def stop_serve(served: Served) -> None:
    served.proc.send_signal(signal.SIGTERM)
    served.proc.wait(30)


def rocketq(*args, input=None):
    """``rocketq ARGS`` in process; returns the click result (exit_code, stdout)."""
    return CliRunner(env={"COLUMNS": "240"}).invoke(cli, [str(a) for a in args], input=input)


class Browserless:
    """A cookie-keeping HTTP client for the console (what a browser's form posts amount to)."""

    def __init__(self, base: str):
        self.base = base.rstrip("/")
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect)

    def request(self, path: str, form: dict | None = None, *, headers: dict | None = None,
                raw: bytes | None = None) -> tuple[int, str, dict]:
        data = raw if raw is not None else (urllib.parse.urlencode(form).encode() if form is not None else None)
        req = urllib.request.Request(self.base + path, data=data, headers=headers or {})
        try:
            with self.opener.open(req, timeout=30) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace"), dict(exc.headers)

    def csrf(self, path: str = "/send") -> str:
        status, html, _ = self.request(path)
        m = CSRF.search(html)
        assert m, (status, html[:300])
        return m.group(1)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One ``rocketq serve`` (trace topic on) per test module (imported by the modules that use it:
    a conftest.py here would shadow tests/cli's, which other modules import by that name)."""
    s = start_serve(tmp_path_factory.mktemp("console"), "--set", "traceTopicEnable=true")
    yield s
    stop_serve(s)
