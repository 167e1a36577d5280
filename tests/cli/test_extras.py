"""Commands that need a pip extra say which one and how to install it when it is missing.

The extras are installed in the test environment, so a missing module is simulated the standard
way: ``sys.modules[name] = None`` makes ``import name`` raise ImportError in this process.
"""

import sys

import pytest



@pytest.mark.parametrize("module", ["pyarrow", "pyspark"])
def test_spark_commands_name_the_spark_extra(invoke, monkeypatch, small_store, module):
    path, _ = small_store
    monkeypatch.setitem(sys.modules, module, None)
    for args in (("spark", "stats", "--store", path), ("spark", "export", "--store", path, "--out", path / "x"),
                 ("spark", "rebuild-index", path), ("bench", "spark", "--messages", "10000")):
        r = invoke(*args)
        assert r.exit_code == 1, (args, r.output)
        assert "needs the 'spark' extra" in r.stderr and "pip install -e '.[spark]'" in r.stderr, (args, r.stderr)
        assert module in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("module", ["psutil", "matplotlib"])
def test_bench_compare_names_the_bench_extra(invoke, monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)
    r = invoke("bench", "compare", "--quick", "--runs", "1")
    assert r.exit_code == 1, r.output
    assert "needs the 'bench' extra" in r.stderr and "pip install -e '.[bench]'" in r.stderr and module in r.stderr
