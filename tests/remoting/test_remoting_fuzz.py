"""Fuzzing the frame decoder: whatever bytes arrive, only RemotingProtocolError may escape, and
it never loops forever.  Commands round-trip through both header forms.

Hypothesis prints a ``@reproduce_failure`` blob for any failure (``print_blob=True``); the
mutation fuzzer below prints its ``random`` seed in the assertion message.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings, strategies as st

from rocketq.remoting import (
    FrameDecoder, LanguageCode, RemotingCommand, RemotingProtocolError, SerializeType, encode,
)

FUZZ = settings(max_examples=400, print_blob=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT16 = st.integers(-(1 << 15), (1 << 15) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
SMALL_TEXT = st.text(max_size=40)


def drain(decoder: FrameDecoder, limit: int) -> list[RemotingCommand]:
    """Every command available; raises only RemotingProtocolError; bounded by *limit* iterations."""
    out = []
    for _ in range(limit + 1):
        cmd = decoder.next_command()
        if cmd is None:
            return out
        out.append(cmd)
    raise AssertionError("decoder produced more commands than bytes allow")


def feed_chunks(data: bytes, cuts: list[int], max_frame_bytes: int = 1 << 16) -> list[RemotingCommand]:
    decoder = FrameDecoder(max_frame_bytes=max_frame_bytes)
    out = []
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    for start, end in zip(bounds, bounds[1:]):
        decoder.receive_data(data[start:end])
        out += drain(decoder, len(data) // 8)
    decoder.receive_data(b"")
    out += drain(decoder, 0)
    return out


@FUZZ
@given(st.binary(max_size=600), st.lists(st.integers(0, 600), max_size=8))
def test_random_bytes_only_raise_protocol_errors(data, cuts):
    try:
        feed_chunks(data, cuts)
    except RemotingProtocolError:
        pass


@FUZZ
@given(st.binary(max_size=300), st.sampled_from([0, 1]))
def test_random_headers_only_raise_protocol_errors(header, serialize_type):
    data = (4 + len(header)).to_bytes(4, "big") + ((serialize_type << 24) | len(header)).to_bytes(4, "big") + header
    try:
        feed_chunks(data, [])
    except RemotingProtocolError:
        pass


def commands(serialize_type: SerializeType):
    binary = serialize_type == SerializeType.ROCKETMQ
    return st.builds(
        RemotingCommand,
        code=INT16 if binary else INT32,
        language=st.sampled_from(list(LanguageCode)),
        version=INT16 if binary else INT32,
        opaque=INT32,
        flag=INT32,
        remark=st.none() | st.text(min_size=1 if binary else 0, max_size=60),
        ext_fields=st.dictionaries(SMALL_TEXT, SMALL_TEXT, max_size=8),
        body=st.binary(max_size=300),
        serialize_type=st.just(serialize_type),
    )


ANY_COMMAND = commands(SerializeType.JSON) | commands(SerializeType.ROCKETMQ)


@FUZZ
@given(st.lists(ANY_COMMAND, min_size=1, max_size=4), st.lists(st.integers(0, 5000), max_size=6))
def test_commands_round_trip_in_both_header_forms(cmds, cuts):
    data = b"".join(encode(c) for c in cmds)
    assert feed_chunks(data, cuts, max_frame_bytes=1 << 20) == cmds


@FUZZ
@given(ANY_COMMAND, st.data())
def test_mutated_valid_frames_only_raise_protocol_errors(cmd, data):
    frame = bytearray(encode(cmd))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    try:
        feed_chunks(bytes(frame), data.draw(st.lists(st.integers(0, len(frame)), max_size=4)))
    except RemotingProtocolError:
        pass


def test_seeded_mutation_fuzz():
    """Independent of hypothesis: flips, truncations and splices of real frames, seed printed."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    corpus = [encode(RemotingCommand(code=rng.randrange(400), opaque=i, remark="r" * rng.randrange(3),
                                     ext_fields={"topic": "T", "queueId": str(i)}, body=rng.randbytes(rng.randrange(40)),
                                     serialize_type=SerializeType(i % 2)))
              for i in range(20)]
    for round_no in range(2000):
        data = bytearray(b"".join(rng.sample(corpus, 3)))
        for _ in range(rng.randrange(1, 5)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            del data[rng.randrange(len(data)):]
        try:
            feed_chunks(bytes(data), [rng.randrange(len(data) + 1) for _ in range(3)])
        except RemotingProtocolError:
            pass
        except Exception as exc:  # pragma: no cover - the failure message is the point
            raise AssertionError(f"seed {seed}, round {round_no}: {exc!r} escaped the decoder") from exc
