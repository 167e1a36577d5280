"""Fixtures for the command-line tests: small stores on disk, and a runner that keeps stdout apart."""

import pytest
from click.testing import CliRunner

from rocketq.cli.main import cli
from rocketq.store import Message, MessageStore, StoreConfig

SMALL = dict(commitlog_file_size=64 * 1024, consume_queue_entries=100, index_slots=101, index_max_entries=400)
MESSAGES = 30


@pytest.fixture
def invoke():
    """Run ``rocketq ARGS`` in-process (240 columns, so tables do not wrap); the result has .exit_code,
    .stdout, .stderr and .output (both)."""
    def run(*args, input=None):
        return CliRunner(env={"COLUMNS": "240"}).invoke(cli, [str(a) for a in args], input=input)
    return run


@pytest.fixture
def small_store(tmp_path):
    """A closed store of 30 messages in 64 KiB segments; returns (path, put results)."""
    path = tmp_path / "store"
    with MessageStore(StoreConfig(store_path=path, **SMALL)) as s:
        results = [s.put_message(Message(topic="T", body=b"body-%d" % i, tags="A", keys=[f"k{i}"]))
                   for i in range(MESSAGES)]
    assert all(r.ok for r in results)
    return path, results


def log_end(results) -> int:
    return results[-1].physical_offset + results[-1].wrote_bytes


def flip_byte(store_path, offset: int) -> str:
    """Flip one byte of the first commitlog segment at *offset*; returns the segment's name."""
    seg = store_path / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    data[offset] ^= 0xFF
    seg.write_bytes(bytes(data))
    return seg.name
