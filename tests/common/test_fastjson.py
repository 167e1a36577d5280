import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.common import fastjson
from rocketq.common.fastjson import ObjectKey


def test_object_keys_written_and_read_like_fastjson():
    key = ObjectKey.of(topic="T", brokerName="b", queueId=1)
    text = fastjson.dumps({"offsetTable": {key: {"maxOffset": 5}}})
    assert text == '{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"maxOffset":5}}}'
    back = fastjson.loads(text)["offsetTable"]
    (k, v), = back.items()
    assert k == key and k["queueId"] == 1 and v == {"maxOffset": 5}


def test_bare_integer_keys_and_plain_json():
    assert fastjson.loads('{"offsetTable":{0:12, 1 : 7}}') == {"offsetTable": {"0": 12, "1": 7}}
    assert fastjson.loads(b'[1, {"a": null}]') == [1, {"a": None}]


@pytest.mark.parametrize("bad", ['{"a":1', '{{"a":1}}', '[1,]', '{"a" 1}', '', '{"a":1} x'])
def test_malformed_input_is_a_value_error(bad):
    with pytest.raises(ValueError):
        fastjson.loads(bad)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                     max_size=3), max_leaves=10)


@given(json_values)
def test_round_trips_standard_json(value):
    assert fastjson.loads(fastjson.dumps(value)) == value
    assert json.loads(fastjson.dumps(value)) == value
