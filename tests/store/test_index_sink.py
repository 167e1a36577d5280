"""IndexSink's loop-free shapes index exactly what its general per-message path indexes."""

import random

import numpy as np

from rocketq.common.sysflag import TRANSACTION_ROLLBACK_TYPE
from rocketq.store.dispatcher import DispatchBatch, IndexSink


class _Recorder:
    def __init__(self):
        self.entries = []

    def put_batch(self, keys, phys, ts, *, prefix=""):
        self.entries += list(zip((prefix + k for k in keys), np.asarray(phys).tolist(), np.asarray(ts).tolist()))


def _batch(rng, n):
    topics = rng.choice([("T",) * n, tuple(rng.choice("TU") for _ in range(n))])
    keys = rng.choice([(None,) * n, tuple(f"k{i}" for i in range(n)), tuple(rng.choice([None, "", "a b", "k"])
                                                                           for _ in range(n))])
    uniqs = rng.choice([(None,) * n, tuple(f"U{i:04X}" for i in range(n)), tuple(rng.choice([None, "u"])
                                                                                 for _ in range(n))])
    flags = rng.choice([(0,) * n, tuple(rng.choice([0, TRANSACTION_ROLLBACK_TYPE]) for _ in range(n))])
    phys = np.cumsum(np.full(n, 100, dtype=np.int64))
    return DispatchBatch(phys, np.full(n, 100, dtype=np.int64), list(range(n)), np.arange(n, dtype=np.int64) + 7,
                         topics, (0,) * n, flags, (None,) * n, keys, uniqs, ("",) * n)


def test_uniform_shapes_index_the_same_entries_as_the_general_path(monkeypatch):
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    taken = 0
    for trial in range(400):
        batch = _batch(rng, rng.randrange(1, 12))
        fast, general = _Recorder(), _Recorder()
        IndexSink(fast).dispatch(batch)
        with monkeypatch.context() as m:
            m.setattr(IndexSink, "_dispatch_uniform", lambda self, b: False)
            IndexSink(general).dispatch(batch)
        assert fast.entries == general.entries, f"seed {seed} trial {trial}"
        taken += IndexSink(_Recorder())._dispatch_uniform(batch)
    assert taken > 50, "the loop-free path was hardly exercised"
