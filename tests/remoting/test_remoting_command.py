"""RemotingCommand: constructors, flags and the lenient typed header accessors."""

from __future__ import annotations

import pytest

from rocketq.remoting import (
    FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, RemotingCommand, RemotingCommandError, RequestCode, ResponseCode,
    SerializeType, not_supported_response,
)


def test_create_request_stringifies_ext_fields_like_java():
    cmd = RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {"queueId": 3, "commit": True, "x": None,
                                                                    "ratio": 0.5, "t": "T"}, b"b")
    assert cmd.ext_fields == {"queueId": "3", "commit": "true", "ratio": "0.5", "t": "T"}
    assert cmd.language is LanguageCode.PYTHON and cmd.serialize_type is SerializeType.JSON
    assert cmd.flag == 0 and not cmd.is_response and not cmd.is_oneway
    assert RemotingCommand.create_request(40, oneway=True).flag == FLAG_ONEWAY


def test_create_response_echoes_opaque_and_serialize_type():
    request = RemotingCommand(code=10, opaque=42, flag=FLAG_ONEWAY, serialize_type=SerializeType.ROCKETMQ)
    response = RemotingCommand.create_response(request, ResponseCode.SUCCESS, ext_fields={"msgId": "AB"}, body=b"x")
    assert response.opaque == 42 and response.flag == FLAG_RESPONSE and response.is_response
    assert response.serialize_type is SerializeType.ROCKETMQ
    assert response.ext_fields == {"msgId": "AB"} and response.body == b"x" and response.remark is None


def test_not_supported_helper():
    response = not_supported_response(RemotingCommand(code=999, opaque=5))
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED == 3
    assert response.opaque == 5 and "999" in response.remark


def test_language_accepts_names_and_rejects_unknown_ones():
    assert RemotingCommand(code=1, language="GO").language is LanguageCode.GO
    assert RemotingCommand(code=1, language=9).language is LanguageCode.GO
    with pytest.raises(ValueError):
        RemotingCommand(code=1, language="COBOL")


@pytest.mark.parametrize("raw, expected", [("7", 7), (7, 7), ("+7", 7), (" -7 ", -7), ("7.0", 7), (7.0, 7),
                                           ("1795336474369", 1795336474369)])
def test_get_int_is_liberal(raw, expected):
    assert RemotingCommand(code=1, ext_fields={"n": raw}).get_int("n") == expected


@pytest.mark.parametrize("raw", ["abc", "7.5", True, "nan", "inf", "1" * 5000, "0x10"])
def test_get_int_rejects_non_integers_naming_the_field(raw):
    with pytest.raises(RemotingCommandError) as info:
        RemotingCommand(code=1, ext_fields={"queueId": raw}).get_int("queueId", default=0)
    assert info.value.field == "queueId" and "queueId" in str(info.value)


@pytest.mark.parametrize("raw, expected", [(True, True), ("true", True), ("TRUE", True), (1, True), ("1", True),
                                           (False, False), ("false", False), (0, False), ("0", False)])
def test_get_bool_is_liberal(raw, expected):
    assert RemotingCommand(code=1, ext_fields={"b": raw}).get_bool("b") is expected


def test_get_bool_rejects_other_values():
    with pytest.raises(RemotingCommandError, match="<b>"):
        RemotingCommand(code=1, ext_fields={"b": "maybe"}).get_bool("b")


def test_missing_and_empty_fields():
    cmd = RemotingCommand(code=1, ext_fields={"empty": ""})
    assert cmd.get_int("empty", default=5) == 5
    assert cmd.get_bool("empty", default=False) is False
    assert cmd.get_str("empty") == ""
    assert cmd.get_str("absent", default=None) is None
    for getter in (cmd.get_int, cmd.get_str, cmd.get_bool):
        with pytest.raises(RemotingCommandError) as info:
            getter("absent")
        assert info.value.field == "absent"


def test_repr_does_not_dump_the_body():
    text = repr(RemotingCommand(code=1, body=b"x" * 100000))
    assert "100000 bytes" in text and len(text) < 300


def test_answer_is_the_response_create_response_makes_from_the_same_strings():
    from rocketq.remoting.codec import encode
    request = RemotingCommand.create_request(310, {"b": "T"}, b"x", serialize_type=SerializeType.ROCKETMQ)
    request.opaque = 77
    fields = {"msgId": "7F000001000027BD0000000000000000", "queueId": "3", "queueOffset": "12"}
    made = RemotingCommand.create_response(request, ResponseCode.SUCCESS, None, dict(fields))
    answered = RemotingCommand.answer(request, ResponseCode.SUCCESS, None, fields)
    assert answered == made and encode(answered) == encode(made)
    assert answered.ext_fields is fields and type(answered.code) is int
