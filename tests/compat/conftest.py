"""Session fixtures of the reference-client suites: one ``rocketq serve`` (restartable, fixed ports) and
one JVM per Java client line, shared by every test of the session, since starting either costs
seconds. Tests keep apart by naming their topics and groups after the client line."""

from __future__ import annotations

import pytest

from java_runner import JavaRunner, require_java
from serve_proc import ServeProcess

REMOTING_LINES = {"rmq5": "5.3.3", "rmq4": "4.9.8"}


@pytest.fixture(scope="session")
def compat_server(tmp_path_factory):
    server = ServeProcess(tmp_path_factory.mktemp("compat-serve"), grpc=True).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def _java_runners(tmp_path_factory):
    runners: dict[str, JavaRunner] = {}
    yield runners
    for r in runners.values():
        r.close()


@pytest.fixture(scope="session")
def java_runner(_java_runners, tmp_path_factory):
    """java_runner(project, profile, main_class) -> the session's JVM for it (built on first use)."""
    def get(project: str, profile: str | None, main_class: str) -> JavaRunner:
        require_java()
        key = f"{project}-{profile}"
        if key not in _java_runners:
            _java_runners[key] = JavaRunner(project, profile, main_class, tmp_path_factory.mktemp(f"jvm-{key}"))
        return _java_runners[key]
    return get


@pytest.fixture(scope="session", params=sorted(REMOTING_LINES), ids=lambda p: f"rocketmq-client-{REMOTING_LINES[p]}")
def remoting(request, java_runner):
    """The remoting client line under test: (runner, short name used in topic and group names)."""
    return java_runner("remoting", request.param, "rocketq.compat.Runner"), request.param
