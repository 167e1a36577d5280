"""The page-cost tools: ``batch_cpu --set`` reaches the broker it starts, ``fresh_pages`` measures a populate."""

import re

import pytest

from rocketq.bench import batch_cpu, fresh_pages


def test_batch_cpu_passes_its_settings_to_the_broker():
    """A combination the broker refuses proves the settings arrived: the pool with SYNC_FLUSH."""
    with pytest.raises(RuntimeError, match="transientStorePoolEnable works only with ASYNC_FLUSH"):
        batch_cpu.main(["--size", "128", "--messages", "256", "--set", "transientStorePoolEnable=true",
                        "--set", "flushDiskType=SYNC_FLUSH"])


def test_fresh_pages_prints_the_populate_cost_of_each_step(tmp_path, capsys):
    fresh_pages.main(["--dir", str(tmp_path), "--mib", "8", "--pauses", "0,0"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(re.match(r"after +0\.0 s free: populate \d+\.\d{3} CPU-s per GiB", ln) for ln in lines)
    assert list(tmp_path.iterdir()) == []          # the files are deleted
