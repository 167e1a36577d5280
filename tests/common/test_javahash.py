import random

from rocketq import _native
from rocketq.common.javahash import index_hash, java_hash


def test_known_java_values():
    # Values computed by hand from h = 31*h + c over UTF-16 code units, as Java's String.hashCode.
    assert java_hash("") == 0
    assert java_hash("TagA") == 2598919
    assert java_hash("T#k1") == 2539445
    assert java_hash("\u00e9") == 0xE9
    assert java_hash("\U0001F600") == 31 * 0xD83D + 0xDE00     # a surrogate pair counts as two units
    assert java_hash("polygenelubricants") == -(1 << 31)      # the classic Integer.MIN_VALUE string
    assert index_hash("polygenelubricants") == 0


def test_native_equals_python_on_random_strings():
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    alphabet = "abcXYZ019_-#\u00e9\u4e2d\U0001F600"
    for _ in range(2000):
        key = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        assert _native.java_hash(key) == java_hash(key), f"seed {seed}: {key!r}"
        assert _native.index_hash("Topic#" + key) == index_hash("Topic#" + key), f"seed {seed}: {key!r}"
    assert _native.index_hash("polygenelubricants") == 0
