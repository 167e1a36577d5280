"""The Rust crate (native/ and its fuzz targets) stays rustfmt-clean: `cargo fmt --check` passes."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("crate", ["native", "native/fuzz"])
def test_cargo_fmt_check(crate):
    if shutil.which("cargo") is None or subprocess.run(["cargo", "fmt", "--version"], capture_output=True).returncode:
        pytest.skip("cargo fmt (rustfmt) not installed: the extension's build needs cargo, its format check rustfmt")
    r = subprocess.run(["cargo", "fmt", "--check"], cwd=ROOT / crate, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"cargo fmt --check in {crate} wants changes (run `cargo fmt` there):\n{r.stdout[-3000:]}"
