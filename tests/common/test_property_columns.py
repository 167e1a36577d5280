"""PropertyColumns (a batch's properties, column-wise) against a dict per message."""

import random

import pytest

from rocketq.common import properties
from rocketq.common.properties import IllegalPropertyError, PropertyColumns

NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "XKEYS", "KEYSX", ""]


def _well_formed(text: str) -> bool:
    parts = text.split("\x02")
    return parts[-1] == "" and all(p.count("\x01") == 1 for p in parts[:-1])


def _reference(text: str) -> dict:
    return dict(p.split("\x01") for p in text.split("\x02")[:-1])


def _text(rng: random.Random) -> str:
    pairs = []
    for _ in range(rng.randrange(0, 5)):
        name = rng.choice(NAMES)
        value = rng.choice(["", "v", "KEYS", "a b", "TAGS\x03", "\u00e9t\u00e9", "UNIQ_KEY"]) + str(rng.randrange(99))
        pairs.append(f"{name}\x01{value}\x02")
    text = "".join(pairs)
    if rng.random() < 0.08:                 # damage: separators added, removed or swapped somewhere
        at = rng.randrange(len(text) + 1)
        kind = rng.choice(["add", "add two", "remove", "swap"]) if text else "add"
        if kind.startswith("add"):
            text = text[:at] + "".join(rng.choice("\x01\x02") for _ in range(1 + (kind == "add two"))) + text[at:]
        elif kind == "remove":
            text = text[:at] + text[at + 1:]
        else:
            seps = [i for i, c in enumerate(text) if c in "\x01\x02"]
            i = rng.choice(seps)
            text = text[:i] + ("\x02" if text[i] == "\x01" else "\x01") + text[i + 1:]
    return text


@pytest.mark.parametrize("numpy_from", [0, 1 << 30])     # the separator check on bytes, and the regex
def test_columns_match_a_dict_per_message_and_malformed_strings_are_named(monkeypatch, numpy_from):
    monkeypatch.setattr(properties, "_NUMPY_MIN_CHARS", numpy_from)
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    for trial in range(3000):
        n = rng.randrange(1, 20)
        texts = tuple(_text(rng) for _ in range(n))
        bad = [i for i, t in enumerate(texts) if not _well_formed(t)]
        if bad:
            with pytest.raises(IllegalPropertyError, match=f"^message {bad[0]}:"):
                PropertyColumns(texts)
            continue
        cols = PropertyColumns(texts)
        for name in NAMES[:-1]:
            want = [_reference(t).get(name) for t in texts]
            assert list(cols.column(name)) == want, (f"seed {seed} trial {trial}", name, texts)
            assert cols.has(name) == any(v is not None for v in want), (f"seed {seed} trial {trial}", name)


def test_one_value_per_message_is_the_usual_shape():
    texts = [f"UNIQ_KEY\x01id{i}\x02WAIT\x01true\x02" for i in range(64)]
    cols = PropertyColumns(texts)
    assert cols.column("UNIQ_KEY") == [f"id{i}" for i in range(64)]
    assert cols.column("TAGS") == (None,) * 64 and not cols.has("DELAY")
