"""Upper-case hex digits for many fixed-width byte strings at once (RocketMQ's message-id spelling)."""

from __future__ import annotations

import numpy as np

_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


def hex_digits(raw: np.ndarray) -> np.ndarray:
    """Each row of an (n, w) uint8 array as its 2w upper-case hex digits: an (n, 2w) uint8 array."""
    n, w = raw.shape
    chars = np.empty((n, 2 * w), dtype=np.uint8)
    chars[:, 0::2] = _HEX[raw >> 4]
    chars[:, 1::2] = _HEX[raw & 15]
    return chars
