"""Frame codec: golden bytes, captured third-party frames, decoder fed whole / byte by byte /
several frames at once / with trailing garbage, and every malformed-frame error."""

from __future__ import annotations

import json
import re
import struct

import pytest

from rocketq.remoting import (
    FrameDecoder, LanguageCode, LocalProtocolError, RemoteProtocolError, RemotingCommand, RemotingCommandError,
    RemotingProtocolError, RequestCode, ResponseCode, SerializeType, decode_header, encode,
)


def decode_all(data: bytes, **kwargs) -> list[RemotingCommand]:
    decoder = FrameDecoder(**kwargs)
    decoder.receive_data(data)
    commands = []
    while (cmd := decoder.next_command()) is not None:
        commands.append(cmd)
    assert decoder.buffered_bytes == 0
    return commands


def decode_byte_by_byte(data: bytes) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    commands = []
    for i in range(len(data)):
        decoder.receive_data(data[i:i + 1])
        while (cmd := decoder.next_command()) is not None:
            commands.append(cmd)
    decoder.receive_data(b"")
    assert decoder.next_command() is None
    return commands


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


# -- golden bytes -----------------------------------------------------------------------------

JSON_CMD = RemotingCommand(code=105, language=LanguageCode.JAVA, version=121, opaque=1, flag=0,
                           ext_fields={"topic": "TopicTest"})
JSON_GOLDEN = (
    b"\x00\x00\x00\x87"                       # length = 4 + 131 + 0
    b"\x00"                                   # serialize type JSON
    b"\x00\x00\x83"                           # header length 131
    b'{"code":105,"language":"JAVA","version":121,"opaque":1,"flag":0,'
    b'"extFields":{"topic":"TopicTest"},"serializeTypeCurrentRPC":"JSON"}'
)

BINARY_CMD = RemotingCommand(code=310, language=LanguageCode.PYTHON, version=121, opaque=7, flag=2,
                             remark="ok", ext_fields={"b": "TopicTest"}, body=b"hi",
                             serialize_type=SerializeType.ROCKETMQ)
BINARY_GOLDEN = (
    b"\x00\x00\x00\x2d"                       # length = 4 + 39 + 2
    b"\x01"                                   # serialize type ROCKETMQ
    b"\x00\x00\x27"                           # header length 39
    b"\x01\x36"                               # int16 code 310
    b"\x03"                                   # language PYTHON
    b"\x00\x79"                               # int16 version 121
    b"\x00\x00\x00\x07"                       # int32 opaque 7
    b"\x00\x00\x00\x02"                       # int32 flag ONEWAY
    b"\x00\x00\x00\x02" b"ok"                 # remark
    b"\x00\x00\x00\x10"                       # extFields length 16
    b"\x00\x01" b"b" b"\x00\x00\x00\x09" b"TopicTest"
    b"hi"                                     # body
)


def test_json_golden_bytes():
    assert encode(JSON_CMD) == JSON_GOLDEN
    assert decode_all(JSON_GOLDEN) == [JSON_CMD]


def test_binary_golden_bytes():
    assert encode(BINARY_CMD) == BINARY_GOLDEN
    assert decode_all(BINARY_GOLDEN) == [BINARY_CMD]


def test_remark_is_omitted_from_json_when_none_and_ext_values_are_sent_as_strings():
    cmd = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {"d": 4, "k": False, "n": None})
    header = json.loads(encode(cmd)[8:])
    assert "remark" not in header
    assert header["extFields"] == {"d": "4", "k": "false"}
    assert header["language"] == "PYTHON"
    cmd.ext_fields.update({"late": 7, "flag": True, "gone": None})   # set after creation: still Java's strings
    assert json.loads(encode(cmd)[8:])["extFields"] == {"d": "4", "k": "false", "late": "7", "flag": "true"}


def test_binary_empty_remark_reads_back_as_none():
    cmd = RemotingCommand(code=1, remark="", serialize_type=SerializeType.ROCKETMQ)
    assert decode_all(encode(cmd))[0].remark is None


# -- captured third-party frames ---------------------------------------------------------------

CAPTURED_ROUTE = b'{"code":105,"language":"JAVA","opaque":1,"flag":0,"version":121,"extFields":{"topic":"TopicTest"}}'
CAPTURED_SEND = (b'{"code":310,"language":"JAVA","opaque":2,"flag":0,"version":121,"extFields":'
                 b'{"a":"PID_PROBE","b":"TopicTest","c":"TBW102","d":4,"e":1,"f":0,"g":1795336474369,"h":0,'
                 b'"i":"TAGS\\u0001TagA\\u0002KEYS\\u0001order-1\\u0002","j":0,"k":false}}')


def test_captured_route_request():
    (cmd,) = decode_all(frame(CAPTURED_ROUTE))
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, LanguageCode.JAVA, 121, 1, 0)
    assert cmd.serialize_type is SerializeType.JSON
    assert not cmd.is_response and not cmd.is_oneway
    assert cmd.get_str("topic") == "TopicTest"


def test_captured_send_message_v2_with_numbers_and_booleans():
    (cmd,) = decode_all(frame(CAPTURED_SEND, b"hello"))
    assert cmd.code == RequestCode.SEND_MESSAGE_V2 and cmd.body == b"hello"
    assert cmd.get_str("a") == "PID_PROBE" and cmd.get_str("b") == "TopicTest"
    assert cmd.get_int("d") == 4 and cmd.get_int("e") == 1
    assert cmd.get_int("g") == 1795336474369
    assert cmd.get_bool("k") is False
    assert cmd.get_str("e") == "1"            # numbers are held as Java-style strings
    assert cmd.get_str("i") == "TAGS\x01TagA\x02KEYS\x01order-1\x02"
    assert cmd.get_int("l", default=None) is None
    with pytest.raises(RemotingCommandError) as info:
        cmd.get_int("l")
    assert info.value.field == "l"


def test_response_to_json_client_is_json_with_type_byte_zero():
    (request,) = decode_all(frame(CAPTURED_ROUTE))
    response = RemotingCommand.create_response(request, ResponseCode.TOPIC_NOT_EXIST, "no route",
                                               ext_fields={"queueOffset": 12})
    data = encode(response)
    assert data[4] == 0                       # a JSON-only client reads the whole field as the length
    header_len = int.from_bytes(data[4:8], "big")
    header = json.loads(data[8:8 + header_len])
    assert header["opaque"] == 1 and header["flag"] == 1 and header["code"] == 17
    assert header["extFields"] == {"queueOffset": "12"}


def test_liberal_json_header():
    header = json.dumps({"code": "105", "language": 9, "unknown": [1, {"x": None}], "remark": 5,
                         "extFields": {"q": 1.5, "n": None, "nested": {"a": [1]}}}).encode()
    (cmd,) = decode_all(frame(header))
    assert cmd.code == 105 and cmd.language is LanguageCode.GO
    assert (cmd.version, cmd.opaque, cmd.flag) == (0, 0, 0)
    assert cmd.remark == "5"
    assert cmd.ext_fields == {"q": "1.5", "nested": '{"a":[1]}'}


@pytest.mark.parametrize("language, expected", [("NODE_JS", LanguageCode.NODE_JS), ("COBOL", LanguageCode.OTHER),
                                                (77, LanguageCode.OTHER), (None, LanguageCode.JAVA)])
def test_language_by_name_or_number(language, expected):
    (cmd,) = decode_all(frame(json.dumps({"code": 0, "language": language}).encode()))
    assert cmd.language is expected


def test_unknown_language_byte_in_binary_header_is_other():
    data = bytearray(encode(BINARY_CMD))
    data[8 + 2] = 99
    assert decode_all(bytes(data))[0].language is LanguageCode.OTHER


# -- feeding ----------------------------------------------------------------------------------

STREAM_CMDS = [JSON_CMD, BINARY_CMD, RemotingCommand(code=0, flag=1, opaque=9, body=b"x" * 1000),
               RemotingCommand(code=34, body=b"", serialize_type=SerializeType.ROCKETMQ)]
STREAM = b"".join(encode(c) for c in STREAM_CMDS)


def test_decode_whole_stream_in_one_chunk():
    assert decode_all(STREAM) == STREAM_CMDS


def test_decode_one_byte_at_a_time():
    assert decode_byte_by_byte(STREAM) == STREAM_CMDS


@pytest.mark.parametrize("chunk", [2, 3, 7, 64, 1000])
def test_decode_in_chunks(chunk):
    decoder = FrameDecoder()
    out = []
    for i in range(0, len(STREAM), chunk):
        decoder.receive_data(STREAM[i:i + chunk])
        while (cmd := decoder.next_command()) is not None:
            out.append(cmd)
    assert out == STREAM_CMDS


@pytest.mark.parametrize("garbage", [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x00\x00\x00\x01", b"\xff\xff\xff\xff",
                                     b"\x00\x00\x00\x08\x05\x00\x00\x00\x00\x00\x00\x00",
                                     b"\x00\x00\x00\x06\x00\x00\x00\x02{}"])
def test_trailing_garbage_raises_protocol_error(garbage):
    decoder = FrameDecoder()
    decoder.receive_data(STREAM + garbage)
    for expected in STREAM_CMDS:
        assert decoder.next_command() == expected
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_command()
    assert f"stream offset {len(STREAM)}" in info.value.where
    with pytest.raises(RemoteProtocolError):  # sticky
        decoder.next_command()


def test_partial_frame_then_eof_is_an_error_and_clean_eof_is_not():
    decoder = FrameDecoder()
    decoder.receive_data(STREAM[:-3])
    while decoder.next_command() is not None:
        pass
    decoder.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="closed in the middle"):
        decoder.next_command()
    assert decode_all(STREAM) == STREAM_CMDS


def test_oversize_frame_is_rejected_from_its_length_prefix_alone():
    decoder = FrameDecoder(max_frame_bytes=1024)
    decoder.receive_data(struct.pack(">i", 1021))
    with pytest.raises(RemoteProtocolError, match="exceeds the limit of 1024") as info:
        decoder.next_command()
    assert info.value.fault == "remote"
    ok = FrameDecoder(max_frame_bytes=1024)
    ok.receive_data(struct.pack(">i", 1020))
    assert ok.next_command() is None


def test_default_max_frame_is_16_mib():
    decoder = FrameDecoder()
    decoder.receive_data(struct.pack(">i", 16 * 1024 * 1024 - 3))
    with pytest.raises(RemoteProtocolError, match="exceeds"):
        decoder.next_command()


# -- malformed frames -------------------------------------------------------------------------

def binary_header(code=1, lang=0, version=0, opaque=0, flag=0, remark=b"", ext=b"", remark_len=None, ext_len=None):
    return (struct.pack(">hBhii", code, lang, version, opaque, flag)
            + struct.pack(">i", len(remark) if remark_len is None else remark_len) + remark
            + struct.pack(">i", len(ext) if ext_len is None else ext_len) + ext)


MALFORMED = {
    "length below 4": b"\x00\x00\x00\x03\x00\x00\x00",
    "negative length": b"\x80\x00\x00\x00",
    "header longer than frame": b"\x00\x00\x00\x06\x00\x00\x00\x03{}",
    "unknown serialize type": frame(b"{}", serialize_type=2),
    "bad json": frame(b'{"code":1'),
    "bad utf-8": frame(b'{"code":1,"remark":"\xff"}'),
    "json not an object": frame(b"[1,2]"),
    "json scalar": frame(b"7"),
    "missing code": frame(b'{"opaque":1}'),
    "null code": frame(b'{"code":null}'),
    "code not an integer": frame(b'{"code":"abc"}'),
    "code boolean": frame(b'{"code":true}'),
    "opaque outside int32": frame(b'{"code":1,"opaque":4294967296}'),
    "flag fractional": frame(b'{"code":1,"flag":1.5}'),
    "extFields not an object": frame(b'{"code":1,"extFields":[]}'),
    "deep nesting": frame(b'{"code":1,"extFields":{"a":' + b"[" * 100000 + b"]" * 100000 + b"}}"),
    "binary too short": frame(b"\x00" * 20, serialize_type=1),
    "binary remark past end": frame(binary_header(remark=b"ab", remark_len=50), serialize_type=1),
    "binary ext past end": frame(binary_header(ext=b"\x00\x01k", ext_len=40), serialize_type=1),
    "binary ext key truncated": frame(binary_header(ext=b"\x00\x09k"), serialize_type=1),
    "binary ext value truncated": frame(binary_header(ext=b"\x00\x01k\x00\x00\x00\x05ab"), serialize_type=1),
    "binary ext odd byte": frame(binary_header(ext=b"\x00"), serialize_type=1),
    "binary ext negative value length": frame(binary_header(ext=b"\x00\x01k\xff\xff\xff\xff"), serialize_type=1),
    "binary remark bad utf-8": frame(binary_header(remark=b"\xc3"), serialize_type=1),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_frames_raise_remote_protocol_error(name):
    with pytest.raises(RemoteProtocolError) as info:
        decode_all(MALFORMED[name])
    assert isinstance(info.value, RemotingProtocolError)
    assert info.value.fault == "remote" and "stream offset 0" in info.value.where


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_frames_byte_by_byte(name):
    with pytest.raises(RemoteProtocolError):
        decode_byte_by_byte(MALFORMED[name])


def test_binary_negative_remark_length_means_no_remark_like_java():
    (cmd,) = decode_all(frame(binary_header(code=5, remark_len=-1), serialize_type=1))
    assert cmd.code == 5 and cmd.remark is None


def test_data_after_eof_is_a_usage_error():
    decoder = FrameDecoder()
    decoder.receive_data(b"")
    with pytest.raises(RuntimeError):
        decoder.receive_data(b"x")


# -- local errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", [
    RemotingCommand(code=RequestCode.POP_MESSAGE, serialize_type=SerializeType.ROCKETMQ),
    RemotingCommand(code=1, version=40000, serialize_type=SerializeType.ROCKETMQ),
    RemotingCommand(code=1, opaque=1 << 31),
    RemotingCommand(code=1, remark="\ud800"),
    RemotingCommand(code=1, ext_fields={"k" * 40000: "v"}, serialize_type=SerializeType.ROCKETMQ),
])
def test_unencodable_commands_raise_local_protocol_error(cmd):
    with pytest.raises(LocalProtocolError) as info:
        encode(cmd)
    assert info.value.fault == "local"


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize("ext, says", [
    ({"queueId": "0", "topic": "\udc80"}, 'extFields["topic"] is not encodable as UTF-8'),
    ({"queueId": "0", "\udc80": "x"}, "extFields key is not encodable as UTF-8"),
])
def test_an_unencodable_ext_field_is_named(ext, says, serialize_type):
    with pytest.raises(LocalProtocolError, match=re.escape(says)):
        encode(RemotingCommand(code=1, ext_fields=ext, serialize_type=serialize_type))


def test_ext_field_values_go_out_as_java_strings_and_none_is_left_out():
    cmd = RemotingCommand(code=1, ext_fields={"i": 7, "t": True, "f": False, "n": None, 5: "five", "s": "x\u0001"})
    assert json.loads(encode(cmd)[8:])["extFields"] == {"i": "7", "t": "true", "f": "false", "5": "five", "s": "x\u0001"}


def test_pop_message_code_travels_in_json():
    cmd = RemotingCommand(code=RequestCode.POP_MESSAGE)
    assert decode_all(encode(cmd)) == [cmd]


def test_decode_header_alone():
    cmd = decode_header(CAPTURED_ROUTE, SerializeType.JSON)
    assert cmd.code == 105 and cmd.body == b""
