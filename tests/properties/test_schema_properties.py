"""Laws of capability names and of the strict input codec."""

from __future__ import annotations

import datetime
from typing import Any, Literal, cast

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfx.naming import check_name, default_name
from agentfx.schema import InputCodec, InvalidPayload

_SETTINGS = settings(max_examples=60, deadline=None)

tags = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,59}", fullmatch=True)
snake_names = st.from_regex(r"[a-z][a-z0-9_]{0,59}", fullmatch=True)


@_SETTINGS
@given(tags)
def test_default_names_are_valid_capability_names(tag: str) -> None:
    name = default_name(tag)
    assert check_name(tag, name) == name
    assert name.replace("_", "") == tag.lower()


@_SETTINGS
@given(snake_names)
def test_default_name_leaves_snake_names_alone(name: str) -> None:
    assert default_name(name) == name


@_SETTINGS
@given(tags)
def test_default_name_is_idempotent(tag: str) -> None:
    once = default_name(tag)
    assert default_name(once) == once


# --- input types ----------------------------------------------------------------------


class Label(msgspec.Struct, frozen=True):
    text: str
    weight: float = 0.0


class Flat(msgspec.Struct, frozen=True, tag=True):
    title: str
    count: int
    done: bool = False
    note: str | None = None


class Form(msgspec.Struct, frozen=True, tag="form", tag_field="kind", rename="camel"):
    title: str
    ratio: float
    due_at: datetime.datetime | None
    mode: Literal["quick", "careful"]
    labels: list[Label]
    scores: dict[str, int]
    pair: tuple[int, str]
    owner_id: int | None = None


class Empty(msgspec.Struct, frozen=True, tag=True):
    pass


texts = st.text(max_size=20)
ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
floats = st.floats(allow_nan=False, allow_infinity=False)
datetimes = st.datetimes(
    timezones=st.sampled_from([None, datetime.timezone.utc, datetime.timezone(datetime.timedelta(hours=-5))])
)
labels = st.builds(Label, text=texts, weight=floats)
flats = st.builds(Flat, title=texts, count=ints, done=st.booleans(), note=st.none() | texts)
forms = st.builds(
    Form,
    title=texts,
    ratio=floats,
    due_at=st.none() | datetimes,
    mode=st.sampled_from(["quick", "careful"]),
    labels=st.lists(labels, max_size=3),
    scores=st.dictionaries(texts, ints, max_size=3),
    pair=st.tuples(ints, texts),
    owner_id=st.none() | ints,
)
inputs = st.one_of(flats, forms, st.just(Empty()))

_CODECS: dict[type, InputCodec[Any]] = {tp: InputCodec(tp) for tp in (Flat, Form, Empty)}


def builtins_of(instance: msgspec.Struct) -> dict[str, Any]:
    # to_builtins writes the tag too; an agent's payload is the fields alone.
    encoded = cast("dict[str, Any]", msgspec.to_builtins(instance))
    tag_field = type(instance).__struct_config__.tag_field
    return {key: value for key, value in encoded.items() if key != tag_field}


@_SETTINGS
@given(inputs)
def test_encoded_inputs_decode_back_equal(instance: msgspec.Struct) -> None:
    decoded = _CODECS[type(instance)].decode(builtins_of(instance))
    assert type(decoded) is type(instance)
    assert decoded == instance


@_SETTINGS
@given(inputs, st.one_of(st.just("type"), st.just("kind"), texts), st.one_of(st.none(), ints, texts))
def test_one_unknown_key_is_rejected_at_the_root(instance: msgspec.Struct, key: str, value: object) -> None:
    payload = builtins_of(instance)
    if key in payload:
        key = f"{key}_extra"
    payload[key] = value
    try:
        _CODECS[type(instance)].decode(payload)
    except InvalidPayload as error:
        assert error.path == "$"
    else:
        raise AssertionError(f"{type(instance).__name__} accepted the undeclared key {key!r}")


@_SETTINGS
@given(forms.filter(lambda form: bool(form.labels)), st.data())
def test_one_unknown_nested_key_is_rejected_where_it_is(form: Form, data: st.DataObject) -> None:
    payload = builtins_of(form)
    index = data.draw(st.integers(min_value=0, max_value=len(form.labels) - 1))
    key = data.draw(texts.filter(lambda key: key not in ("text", "weight")))
    payload["labels"][index][key] = 0
    try:
        _CODECS[Form].decode(payload)
    except InvalidPayload as error:
        assert error.path == f"$.labels[{index}]"
    else:
        raise AssertionError(f"Label accepted the undeclared key {key!r}")
