"""Build the Go scenario modules under compat/go once, and run a scenario as a process.

``go build`` (module mode, versions pinned by go.mod and go.sum) into
``compat/.build/go-<module>-<hash>/runner``, the hash covering go.mod, go.sum and the sources, so an
unchanged tree reuses the binary of an earlier run; the first build downloads the client from the Go module
proxy into Go's module cache (GOPATH, outside the repository). A Go program starts in milliseconds, so each
scenario is its own process: ``runner <scenario> key=value ...`` printing one ``@@RESULT {json}`` line.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GO_DIR = REPO / "compat" / "go"
BUILD_ROOT = REPO / "compat" / ".build"
BUILD_TIMEOUT_S = 600
RESULT_PREFIX = "@@RESULT "


def require_go() -> None:
    if shutil.which("go") is None:
        pytest.skip("go not on PATH: the Go reference-client scenarios (compat/go) need Go 1.21+ "
                    "(Debian: apt-get install golang)")


def build(module: str) -> Path:
    require_go()
    src = GO_DIR / module
    h = hashlib.sha256()
    for path in sorted([src / "go.mod", src / "go.sum", *src.glob("*.go")]):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    out = BUILD_ROOT / f"go-{module}-{h.hexdigest()[:16]}"
    binary = out / "runner"
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    with open(BUILD_ROOT / f"go-{module}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            out.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(["go", "build", "-mod=readonly", "-o", str(out / "runner.tmp"), "."], cwd=src,
                                  capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                                  env=dict(os.environ, CGO_ENABLED="0"))
            assert proc.returncode == 0, f"go build of {src} failed:\n{proc.stderr[-4000:]}"
            (out / "runner.tmp").rename(binary)
    return binary


def run(binary: Path, scenario: str, *, timeout_s: float = 60, **args) -> dict:
    """Run one scenario; its data, or an AssertionError with what it printed."""
    words = [str(binary), scenario] + [f"{k}={v}" for k, v in args.items()]
    try:
        # the gRPC client writes its log files under $HOME/logs: keep them in the build directory
        proc = subprocess.run(words, capture_output=True, text=True, timeout=timeout_s,
                              env=dict(os.environ, HOME=str(BUILD_ROOT / "go-home")))
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"go {scenario} gave no result within {timeout_s} s\n{(exc.stderr or b'')[-3000:]}")
    lines = [line[len(RESULT_PREFIX):] for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    assert lines, f"go {scenario} exited {proc.returncode} with no result:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    result = json.loads(lines[-1])
    assert result["ok"], f"go {scenario} failed: {result['error']}\n{proc.stderr[-3000:]}"
    return result["data"]
