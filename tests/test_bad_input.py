"""Bad input to the engine's wire codec and to the ``spark.trspark.*`` parsers: whatever arrives,
the answer is a message or the documented error (:class:`ProtocolError`, :class:`ConfigError`),
never another exception. Hypothesis draws the input; ``derandomize`` fixes the examples."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from trspark import keys
from trspark.engine import protocol
from trspark.engine.protocol import ProtocolError

FIXED = settings(derandomize=True, deadline=None, max_examples=100)
MESSAGE_TYPES = sorted(protocol._BY_NAME)
JSON_VALUES = hs.recursive(
    hs.none() | hs.booleans() | hs.integers() | hs.floats(allow_nan=False) | hs.text(max_size=8),
    lambda inner: hs.lists(inner, max_size=4) | hs.dictionaries(hs.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _decoded_or_protocol_error(line: str) -> None:
    try:
        message = protocol.from_json(line)
    except ProtocolError as exc:
        assert str(exc), "a ProtocolError says what is wrong"
        return
    assert type(message).__name__ in protocol._BY_NAME


@FIXED
@given(hs.text(max_size=200))
def test_any_text_decodes_or_raises_protocol_error(line: str) -> None:
    _decoded_or_protocol_error(line)


@FIXED
@given(hs.sampled_from(MESSAGE_TYPES), hs.dictionaries(hs.text(max_size=12), JSON_VALUES, max_size=6))
def test_a_known_type_with_any_fields_decodes_or_raises_protocol_error(kind: str, fields: dict[str, Any]) -> None:
    _decoded_or_protocol_error(json.dumps({**fields, "type": kind}))


@FIXED
@given(hs.sampled_from(MESSAGE_TYPES), hs.data())
def test_real_field_names_with_values_of_any_type_decode_or_raise_protocol_error(kind: str, data: Any) -> None:
    import dataclasses

    names = [f.name for f in dataclasses.fields(protocol._BY_NAME[kind])]
    fields = data.draw(hs.fixed_dictionaries({}, optional=dict.fromkeys(names, JSON_VALUES)))
    _decoded_or_protocol_error(json.dumps({**fields, "type": kind}))


@FIXED
@given(JSON_VALUES)
def test_any_json_value_as_the_type_raises_protocol_error(kind: Any) -> None:
    if isinstance(kind, str) and kind in protocol._BY_NAME:
        return
    with pytest.raises(ProtocolError):
        protocol.from_json(json.dumps({"type": kind}))


@FIXED
@given(hs.sampled_from(keys.KEYS), hs.text(max_size=40))
def test_every_key_parses_any_text_or_raises_config_error_naming_it(key: keys.Key, raw: str) -> None:
    try:
        keys.parse_value(key, raw)
    except keys.ConfigError as exc:
        assert key.full in str(exc) and "allowed:" in str(exc)


@FIXED
@given(hs.text(max_size=30), hs.text(max_size=30))
def test_pool_lifetime_settings_parse_or_raise_config_error(name: str, raw: str) -> None:
    full = f"{keys.POOL_KEY_PREFIX}{name}{keys.POOL_KEY_SUFFIX}"
    try:
        pool, spec = keys.parse_pool_lifetime(full, raw)
    except keys.ConfigError as exc:
        assert repr(full) in str(exc) or full in str(exc)
    else:
        assert pool == name and spec


@FIXED
@given(hs.text(max_size=30))
def test_unknown_option_names_raise_config_error(option: str) -> None:
    try:
        key = keys.key_for_option(option)
    except keys.ConfigError as exc:
        assert "unknown trspark option" in str(exc)
    else:
        assert option in (key.field, key.name)
