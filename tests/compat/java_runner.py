"""The Java scenario runner of the reference-client suites: the machinery lives in
:mod:`rocketq.bench.java_clients` (``rocketq bench grpc --java`` drives the same JVMs); here a missing
JDK or Maven becomes a pytest skip that says what to install."""

from __future__ import annotations

import pytest

from rocketq.bench.java_clients import JavaRunner, ScenarioFailed, missing_java  # noqa: F401  (re-exported)


def require_java() -> None:
    why = missing_java()
    if why:
        pytest.skip(why)
