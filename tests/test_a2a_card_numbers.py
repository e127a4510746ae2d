"""agentfx.a2a: the card's input schemas say exactly what decoding accepts, numbers included.

The card extension's ``params`` is a protobuf ``Struct``, whose numbers are
doubles, and the SDK serves it through ``MessageToDict``. These tests fetch
the card as the SDK serves it (``a2a_app`` over httpx's ASGI transport) and
hold its schemas against the source schemas and against the decoder: every
number the card carries is the source's own, and a schema holding an integer
a double would round is refused when the card is built.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, Protocol, cast

import anyio
import httpx
import jsonschema
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette

import agentfx
from agentfx.a2a import SKILL_INPUT_SCHEMA_EXTENSION, a2a_app, agent_card, card_json
from agentfx.docs import messages
from agentfx.errors import ContractError
from agentfx.testing import RecordingHost

EXACT = 2**53
CARD_ARGS: dict[str, str] = {"name": "n", "description": "d", "url": "http://127.0.0.1/a2a", "version": "1"}
ASYNCIO = pytest.mark.parametrize("anyio_backend", ["asyncio"])


class Go(msgspec.Struct, tag=True):
    pass


def _contract(inp: type[Any]) -> agentfx.Definition[Any, Any]:
    return agentfx.define(agentfx.expose(Go, agentfx.variant(Go, "go", input=inp, to_message=lambda i, c: Go())))


class _Validator(Protocol):
    def is_valid(self, instance: object) -> bool: ...


def _validator(schema: dict[str, Any]) -> _Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return cast(_Validator, jsonschema.Draft202012Validator(schema))


@asynccontextmanager
async def _http(asgi: Starlette) -> AsyncGenerator[httpx.AsyncClient]:
    async with asgi.router.lifespan_context(asgi):
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            yield http


async def _served_schemas(definition: agentfx.Definition[Any, Any]) -> dict[str, Any]:
    runtime = agentfx.bind(definition, host=RecordingHost[None, Go, Any](None).host)
    async with _http(a2a_app(runtime, agent_card(definition, **CARD_ARGS))) as http:
        response = await http.get("/.well-known/agent-card.json")
    assert response.status_code == 200
    card = json.loads(response.text)
    (extension,) = card["capabilities"]["extensions"]
    assert extension["uri"] == SKILL_INPUT_SCHEMA_EXTENSION
    return cast("dict[str, Any]", extension["params"]["skills"])


def _same(served: object, source: object) -> bool:
    """``served`` is ``source`` exactly: the same numbers (2.0 for 2 included), keys, lists and strings."""
    if isinstance(source, bool) or source is None or isinstance(source, str):
        return served == source and type(served) is type(source)
    if isinstance(source, (int, float)):
        return isinstance(served, (int, float)) and not isinstance(served, bool) and served == source
    if isinstance(source, dict):
        src = cast("dict[str, object]", source)
        if not isinstance(served, dict):
            return False
        got = cast("dict[str, object]", served)
        return got.keys() == src.keys() and all(_same(got[k], v) for k, v in src.items())
    if isinstance(source, list):
        if not isinstance(served, list):
            return False
        got_list = cast("list[object]", served)
        src_list = cast("list[object]", source)
        return len(got_list) == len(src_list) and all(_same(g, s) for g, s in zip(got_list, src_list, strict=True))
    raise AssertionError(f"not JSON: {source!r}")


async def _decodes(definition: agentfx.Definition[Any, Any], payload: object) -> bool:
    runtime = agentfx.bind(definition, host=RecordingHost[None, Go, Any](None).host)
    return isinstance(await runtime.messages.attempt("go", payload), agentfx.DispatchResult)


class Edges(msgspec.Struct):
    big: Literal[9007199254740991, 1]
    bounded: Annotated[int, msgspec.Meta(le=EXACT - 1, ge=-(EXACT - 1))]
    name: Annotated[str, msgspec.Meta(min_length=2, max_length=5)]
    share: Annotated[float, msgspec.Meta(gt=0.5, le=1e300)]
    count: int = EXACT - 1


EDGES = _contract(Edges)
VALID: dict[str, object] = {"big": 1, "bounded": 0, "name": "ab", "share": 1.0}


@ASYNCIO
@pytest.mark.anyio
async def test_the_served_schemas_carry_every_number_below_2_53_exactly() -> None:
    [descriptor] = messages(EDGES)
    served = (await _served_schemas(EDGES))["go"]
    assert _same(served, descriptor.input_schema)
    # The same numbers whatever JSON reads them: a whole double below 2**53 is its integer.
    assert served["properties"]["bounded"]["maximum"] == EXACT - 1
    assert served["properties"]["big"]["enum"] == [1, 9007199254740991]
    # Built and served the same way: card_json is the card as the SDK serves it.
    assert json.dumps(card_json(agent_card(EDGES, **CARD_ARGS))["capabilities"]["extensions"][0]["params"]["skills"]["go"],
                      sort_keys=True) == json.dumps(served, sort_keys=True)


@ASYNCIO
@pytest.mark.anyio
@pytest.mark.parametrize(
    "change",
    [
        pytest.param({}, id="valid"),
        pytest.param({"big": 9007199254740991}, id="largest-literal"),
        pytest.param({"big": 9007199254740990}, id="literal-neighbour"),
        pytest.param({"bounded": EXACT - 1}, id="at-maximum"),
        pytest.param({"bounded": EXACT}, id="past-maximum"),
        pytest.param({"bounded": -(EXACT - 1)}, id="at-minimum"),
        pytest.param({"bounded": -EXACT}, id="past-minimum"),
        pytest.param({"name": "a"}, id="short-name"),
        pytest.param({"name": "abcdef"}, id="long-name"),
        pytest.param({"share": 0.5}, id="at-exclusive-minimum"),
        pytest.param({"share": 0.5000000000000001}, id="past-exclusive-minimum"),
        pytest.param({"share": 1e300}, id="at-float-maximum"),
    ],
)
async def test_the_served_schema_admits_exactly_what_decoding_accepts(change: dict[str, object]) -> None:
    served = (await _served_schemas(EDGES))["go"]
    payload = {**VALID, **change}
    assert _validator(served).is_valid(payload) == await _decodes(EDGES, payload)


class BigLiteral(msgspec.Struct):
    big: Literal[9007199254740993, 1]


class BigMaximum(msgspec.Struct):
    bounded: Annotated[int, msgspec.Meta(le=9223372036854775806)]


class BigMinimum(msgspec.Struct):
    bounded: Annotated[int, msgspec.Meta(ge=-9007199254740993)]


class ExactlyTwoTo53(msgspec.Struct):
    bounded: Annotated[int, msgspec.Meta(lt=EXACT)]


class BigDefault(msgspec.Struct):
    count: int = 2**60


class NestedBig(msgspec.Struct):
    items: list[Annotated[int, msgspec.Meta(multiple_of=2**62)]]


@pytest.mark.parametrize(
    ("inp", "number", "at"),
    [
        pytest.param(BigLiteral, 9007199254740993, "/properties/big/enum/1", id="literal"),
        pytest.param(BigMaximum, 9223372036854775806, "/properties/bounded/maximum", id="maximum"),
        pytest.param(BigMinimum, -9007199254740993, "/properties/bounded/minimum", id="minimum"),
        pytest.param(ExactlyTwoTo53, EXACT, "/properties/bounded/exclusiveMaximum", id="two-to-53"),
        pytest.param(BigDefault, 2**60, "/properties/count/default", id="default"),
        pytest.param(NestedBig, 2**62, "/properties/items/items/multipleOf", id="nested"),
    ],
)
def test_a_schema_with_an_integer_a_double_would_round_is_refused_when_the_card_is_built(
    inp: type[Any], number: int, at: str
) -> None:
    [descriptor] = messages(_contract(inp))
    assert _find(descriptor.input_schema, at) == number
    with pytest.raises(ContractError) as caught:
        agent_card(_contract(inp), **CARD_ARGS)
    assert str(caught.value) == (
        f'agent_card(): the input schema of "go" holds the integer {number} (at {at}), which an A2A card cannot carry: '
        "its schemas are protobuf Struct values, whose numbers are doubles, exact only below 2**53 in magnitude. "
        "Keep the input's bounds, literals and defaults within that range to serve this capability over A2A"
    )


def _find(schema: object, pointer: str) -> object:
    at = schema
    for key in pointer.split("/")[1:]:
        at = cast("list[object]", at)[int(key)] if isinstance(at, list) else cast("dict[str, object]", at)[key]
    return at


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.integers(min_value=-(EXACT + 4), max_value=EXACT + 4).filter(lambda n: abs(n) >= EXACT - 4),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
    ),
    st.sampled_from(["le", "ge", "literal"]),
)
def test_a_card_is_built_exactly_when_every_integer_is_below_2_53(number: int, where: str) -> None:
    # A card that builds carries the number exactly; one that cannot is refused, never rounded.
    if where == "literal":
        inp = msgspec.defstruct("Inp", [("n", Literal[number])])
    else:
        meta = msgspec.Meta(le=number) if where == "le" else msgspec.Meta(ge=number)
        inp = msgspec.defstruct("Inp", [("n", Annotated[int, meta])])
    definition = _contract(inp)
    [descriptor] = messages(definition)
    if abs(number) >= EXACT:
        with pytest.raises(ContractError, match=f"holds the integer {number} "):
            agent_card(definition, **CARD_ARGS)
        return
    served = anyio.run(_served_schemas, definition, backend="asyncio")["go"]
    assert _same(served, descriptor.input_schema)
