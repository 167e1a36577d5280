"""The native remoting codec against the pure-Python reference (tests/native/reference_codec.py):
the same frames for the same commands, the same commands (or a protocol error) for any bytes."""

from __future__ import annotations

import json

import reference_codec as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.remoting import FrameDecoder, LanguageCode, RemotingCommand, RemotingProtocolError, SerializeType, encode

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
commands = st.builds(
    RemotingCommand, code=st.integers(-(1 << 15), (1 << 15) - 1), language=st.sampled_from(list(LanguageCode)),
    version=st.integers(-(1 << 15), (1 << 15) - 1), opaque=st.integers(-(1 << 31), (1 << 31) - 1),
    flag=st.integers(-(1 << 31), (1 << 31) - 1), remark=st.one_of(st.none(), TEXT),
    ext_fields=st.dictionaries(TEXT, TEXT, max_size=6), body=st.binary(max_size=64),
    serialize_type=st.sampled_from(list(SerializeType)))


def _decode(decoder_cls, data: bytes):
    d = decoder_cls()
    d.receive_data(data)
    out = []
    try:
        while (cmd := d.next_command()) is not None:
            out.append(cmd)
        d.receive_data(b"")
        d.next_command()
    except RemotingProtocolError as exc:
        return out, (type(exc).__name__, exc.where.split(",")[0])
    return out, None


@SETTINGS
@given(st.lists(commands, min_size=1, max_size=4))
def test_frames_equal_the_reference_and_decode_back(cmds):
    data = b"".join(encode(c) for c in cmds)
    assert data == b"".join(ref.encode(c) for c in cmds)
    got = _decode(FrameDecoder, data)
    assert got == _decode(ref.FrameDecoder, data) and got[1] is None
    # round trip, but an empty remark in the binary form is "no remark", as Java reads a length of 0
    assert got[0] == [c if c.remark or c.serialize_type == SerializeType.JSON else
                      RemotingCommand(c.code, c.language, c.version, c.opaque, c.flag, None, c.ext_fields, c.body,
                                      c.serialize_type) for c in cmds]


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(1 << 40), 1 << 40),
                                     st.floats(allow_nan=False, allow_infinity=False, width=32), TEXT),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                           max_leaves=8)


@SETTINGS
@given(st.dictionaries(st.sampled_from(["code", "language", "version", "opaque", "flag", "remark", "extFields", "x"]),
                       json_values, max_size=8),
       st.dictionaries(TEXT, json_values, max_size=4))
def test_lenient_json_headers_decode_as_the_reference(header, ext):
    if "extFields" in header and isinstance(header["extFields"], dict):
        header["extFields"] = ext
    raw = json.dumps(header).encode()
    frame = (4 + len(raw)).to_bytes(4, "big") + len(raw).to_bytes(4, "big") + raw
    got, want = _decode(FrameDecoder, frame), _decode(ref.FrameDecoder, frame)
    if want[1] is None and got[1] is None:
        (g,), (w,) = got[0], want[0]
        # JSON text of non-string values may be spelled differently (float formatting); names must match
        assert (g.code, g.language, g.version, g.opaque, g.flag) == (w.code, w.language, w.version, w.opaque, w.flag)
        assert g.ext_fields.keys() == w.ext_fields.keys()
        assert {k: v for k, v in g.ext_fields.items() if isinstance(ext.get(k), str)} == \
            {k: v for k, v in w.ext_fields.items() if isinstance(ext.get(k), str)}
    else:
        assert (got[1] is None) == (want[1] is None), (got, want)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_give_the_reference_commands_or_its_error(data):
    got, want = _decode(FrameDecoder, data), _decode(ref.FrameDecoder, data)
    assert got[0] == want[0] and (got[1] is None) == (want[1] is None), (got, want)


# the headers clients send (flat: strings, int32s, nulls; extFields of strings), which the native decoder
# reads in one pass without serde_json's Value tree (native/src/json_header.rs): the reference's command exactly
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
flat_headers = st.fixed_dictionaries(
    {"code": INT32},
    optional={"language": st.one_of(st.sampled_from([lang.name for lang in LanguageCode]), TEXT, st.none()),
              "version": st.one_of(INT32, st.none()), "opaque": INT32, "flag": INT32,
              "remark": st.one_of(TEXT, st.none()), "serializeTypeCurrentRPC": st.just("JSON"),
              "extFields": st.one_of(st.none(), st.dictionaries(TEXT, st.one_of(TEXT, st.none()), max_size=6)),
              "unknown": st.one_of(TEXT, INT32, st.none())})


def _frame(raw: bytes) -> bytes:
    return (4 + len(raw)).to_bytes(4, "big") + len(raw).to_bytes(4, "big") + raw


@SETTINGS
@given(flat_headers, st.booleans(), st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")]))
def test_flat_json_headers_decode_exactly_as_the_reference(header, ascii_only, separators):
    raw = json.dumps(header, ensure_ascii=ascii_only, separators=separators).encode()
    got, want = _decode(FrameDecoder, _frame(raw)), _decode(ref.FrameDecoder, _frame(raw))
    assert got == want and got[1] is None
    (cmd,) = got[0]
    assert list(cmd.ext_fields) == sorted(cmd.ext_fields)     # the order the native decoder always gave


@SETTINGS
@given(st.lists(st.tuples(TEXT, st.one_of(TEXT, st.none())), max_size=6))
def test_repeated_ext_field_names_keep_the_last_value_as_the_reference_does(pairs):
    ext = ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in pairs)
    raw = f'{{"code":1,"extFields":{{{ext}}},"opaque":5}}'.encode()
    got, want = _decode(FrameDecoder, _frame(raw)), _decode(ref.FrameDecoder, _frame(raw))
    assert got == want and got[1] is None
