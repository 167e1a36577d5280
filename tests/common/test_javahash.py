import random

from rocketq.common.javahash import index_hash, index_hash_many, java_hash, java_hash_many


def test_known_java_values():
    # Values computed by hand from h = 31*h + c over UTF-16 code units, as Java's String.hashCode.
    assert java_hash("") == 0
    assert java_hash("TagA") == 2598919
    assert java_hash("T#k1") == 2539445
    assert java_hash("\u00e9") == 0xE9
    assert java_hash("\U0001F600") == 31 * 0xD83D + 0xDE00     # a surrogate pair counts as two units
    assert java_hash("polygenelubricants") == -(1 << 31)      # the classic Integer.MIN_VALUE string
    assert index_hash("polygenelubricants") == 0


def test_vectorised_equals_scalar_with_and_without_prefix():
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    alphabet = "abcXYZ019_-#\u00e9\u4e2d\U0001F600"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(500)]
    assert java_hash_many(keys).tolist() == [java_hash(k) for k in keys], f"seed {seed}"
    assert index_hash_many(keys, "Topic#").tolist() == [index_hash("Topic#" + k) for k in keys], f"seed {seed}"
    for n in range(0, 6):                       # small lists take the scalar path
        assert index_hash_many(keys[:n], "Topic#").tolist() == [index_hash("Topic#" + k) for k in keys[:n]]
