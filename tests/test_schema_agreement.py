"""The advertised input schema and the decoder agree: what one refuses, the other refuses."""

from __future__ import annotations

import decimal
from typing import Any, NewType

import msgspec
import pytest
from jsonschema import Draft202012Validator, FormatChecker

from agentfx.schema import InputCodec, InvalidPayload

Amount = NewType("Amount", decimal.Decimal)


def _agree(tp: type[Any], payload: dict[str, Any]) -> bool:
    """Whether the payload decodes; asserts the advertised schema says the same of it."""
    codec = InputCodec(tp)
    validator: Any = Draft202012Validator(codec.schema, format_checker=FormatChecker())
    advertised = validator.is_valid(payload)
    decoded = not isinstance(codec.attempt(payload), InvalidPayload)
    assert advertised == decoded, (payload, codec.schema)
    return decoded


# --- Decimal: a string in the schema, so a string on the wire -----------------------


class _Priced(msgspec.Struct, tag=True):
    amount: decimal.Decimal
    fee: decimal.Decimal | None = None
    rates: dict[str, list[decimal.Decimal]] = {}
    total: Amount = Amount(decimal.Decimal(0))


@pytest.mark.parametrize(
    ("payload", "accepted"),
    [
        ({"amount": "12.5"}, True),
        ({"amount": "1e5"}, True),
        ({"amount": 12.5}, False),
        ({"amount": 1}, False),
        ({"amount": "1", "fee": None}, True),
        ({"amount": "1", "fee": 2}, False),
        ({"amount": "1", "rates": {"k": ["1", 2]}}, False),
        ({"amount": "1", "total": 3}, False),
        ({"amount": "1", "total": "3"}, True),
    ],
)
def test_a_decimal_is_decoded_only_from_the_string_its_schema_says(payload: dict[str, Any], accepted: bool) -> None:
    assert _agree(_Priced, payload) is accepted


def test_a_decimal_sent_as_a_number_is_told_to_be_a_string() -> None:
    codec = InputCodec(_Priced)
    refused = codec.attempt({"amount": 12.5})
    assert isinstance(refused, InvalidPayload)
    assert (refused.path, refused.problem) == ("$.amount", '"amount" must be a string')
    refused = codec.attempt({"amount": []})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == '"amount" must be a decimal number'
    refused = codec.attempt({"amount": "1", "fee": 2})
    assert isinstance(refused, InvalidPayload)
    assert (refused.path, refused.problem) == ("$.fee", '"fee" must be a string or null')
    # The decimal's own syntax is still the application type's to check.
    refused = codec.attempt({"amount": "twelve"})
    assert isinstance(refused, InvalidPayload)
    assert refused.problem == '"amount" must be a decimal number'
    assert codec.decode({"amount": "12.5"}) == _Priced(decimal.Decimal("12.5"))
