"""pyproject.toml: the license is an SPDX string (the table form printed a deprecation warning at
every install), and maturin builds the native extension the package imports."""

import tomllib
from pathlib import Path

from rocketq import _native

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_license_is_an_spdx_string_and_maturin_builds_the_extension():
    meta = tomllib.loads(PYPROJECT.read_text())
    assert meta["project"]["license"] == "Apache-2.0"
    assert meta["build-system"]["build-backend"] == "maturin"
    maturin = meta["tool"]["maturin"]
    assert maturin["module-name"] == _native.__name__ == "rocketq._native"
    assert maturin["profile"] == "release" and _native.BUILD_PROFILE == "release"
