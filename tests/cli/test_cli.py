"""The command line as a whole: one-line errors and exit codes; the broker command."""

import pytest


def test_version(invoke):
    res = invoke("--version")
    assert res.exit_code == 0 and "rocketq" in res.stdout


def test_an_operating_error_is_one_line_on_stderr(invoke, tmp_path):
    (tmp_path / "x").write_text("not a store")
    res = invoke("store", "verify", tmp_path)
    assert res.exit_code == 1
    assert res.stdout == ""
    assert res.stderr.startswith("rocketq: error:") and "not a store" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [["store", "verify", "/nonexistent/store"], ["store", "repair", "."],
                                  ["no-such-command"], ["bench", "store", "--runs", "0"]])
def test_a_usage_error_is_one_line_too(invoke, args):
    res = invoke(*args)
    assert res.exit_code == 2
    assert res.stderr.startswith("rocketq: error:") and "--help" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_verbose_shows_the_traceback(invoke, tmp_path):
    (tmp_path / "x").write_text("not a store")
    res = invoke("-v", "store", "verify", tmp_path)
    assert res.exit_code == 1 and res.exception is not None and "not a store" in str(res.exception)


def test_broker_command_serves_and_stops_cleanly_on_sigterm(tmp_path):
    import os
    import re
    import signal
    import subprocess
    import sys

    # port 0: a free port picked here and released could be taken by another test before the broker binds
    # it (seen on a loaded 2-worker run: the broker exited, nothing printed); its HA port would be port + 1
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "broker", "--store-path", str(tmp_path / "s"),
                             "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert re.search(r"listening on 127\.0\.0\.1:[1-9]\d* \(broker\)", proc.stdout.readline())
        assert (tmp_path / "s" / "abort").exists()
        proc.send_signal(signal.SIGTERM)
        assert "stopped cleanly" in proc.stdout.read()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert not (tmp_path / "s" / "abort").exists()
