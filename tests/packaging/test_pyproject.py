"""pyproject.toml installs without setuptools deprecation warnings (they were the first thing
`make run` printed), checked by setuptools' own reading of the file with warnings as errors."""

import warnings
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_setuptools_reads_pyproject_without_deprecation_warnings(monkeypatch):
    monkeypatch.chdir(PYPROJECT.parent)                  # package discovery is relative to the project
    pytest.importorskip("setuptools", minversion="77")   # what [build-system] requires
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dist = apply_configuration(Distribution(), PYPROJECT)
    assert dist.metadata.license_expression == "Apache-2.0"
