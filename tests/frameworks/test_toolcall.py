"""``agentfx._toolcall``: reading a framework's arguments, and the Unicode check every framework call passes.

The framework suites drive these through each framework's loop; here are the
rules themselves, as properties over any JSON a model could send, and the
order of the refusal in the pipeline (run on asyncio and trio: it needs no
framework).
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any, cast

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfx
from agentfx._toolcall import UNREADABLE, json_arguments, not_json, run_call
from tests.frameworks.app import INITIAL, NOT_JSON_ARGUMENTS, NOT_UNICODE_TEXT, harness

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _TEXT
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)
_OBJECTS = st.dictionaries(_TEXT, _JSON, max_size=5)

Place = tuple[str | int, ...]


def _places(value: object, at: Place = ()) -> list[tuple[Place, bool]]:
    """Every string of ``value`` in document order: where it is, and whether it is a key."""
    found: list[tuple[Place, bool]] = []
    if isinstance(value, str):
        found.append((at, False))
    elif isinstance(value, dict):
        for key, item in cast("dict[str, object]", value).items():
            found.append(((*at, key), True))
            found.extend(_places(item, (*at, key)))
    elif isinstance(value, list):
        for index, item in enumerate(cast("list[object]", value)):
            found.extend(_places(item, (*at, index)))
    return found


def _spoil(value: Any, place: Place, is_key: bool) -> None:
    """Put a lone surrogate into the string at ``place`` (a key when ``is_key``)."""
    *parents, last = place
    for step in parents:
        value = value[step]
    if is_key:
        assert isinstance(last, str)
        value[last + "\ud800"] = value.pop(last)
    else:
        value[last] = value[last] + "\udfff"


def _path(place: Place) -> str:
    return "$" + "".join(f".{step}" if isinstance(step, str) else f"[{step}]" for step in place)


@given(_JSON)
def test_any_json_text_reads_as_the_value_it_encodes(value: object) -> None:
    assert json_arguments(json.dumps(value)) == value
    assert json_arguments(json.dumps(value).encode()) == value


@pytest.mark.parametrize(
    "text", [*NOT_JSON_ARGUMENTS, "not json", '{"a": Infinity}', "{'a': 1}", "[" * 100_000, '{"a": "\\ud800",}']
)
def test_text_that_is_not_json_reads_as_the_stand_in(text: str) -> None:
    assert json_arguments(text) is UNREADABLE


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_bytes_that_are_not_utf8_read_as_the_stand_in(encoding: str) -> None:
    assert json_arguments(b'{"title": "a\xffb"}') is UNREADABLE
    # JSON text, but not in UTF-8, which is all a JSON exchange carries (RFC 8259 8.1).
    assert json_arguments('{"title": "a"}'.encode(encoding)) is UNREADABLE


@pytest.mark.parametrize(
    "text",
    [
        '{"title": "a\\ud800b"}',  # escaped
        '{"title": "a\ud800b"}',  # raw, in a str
        b'{"title": "a\xed\xa0\x80b"}',  # encoded as if it were a code point (the standard decoder passes it)
    ],
)
def test_a_lone_surrogate_in_the_text_is_kept_for_the_check(text: str | bytes) -> None:
    read = json_arguments(text)
    assert read == {"title": "a\ud800b"}
    invalid = not_json(read)
    assert invalid is not None and invalid.problem == '"title" must be valid Unicode'


@pytest.mark.parametrize("text", ["", "  ", "\n"])
def test_blank_arguments_are_no_arguments(text: str) -> None:
    assert json_arguments(text) == {}


@given(_OBJECTS)
def test_a_payload_of_unicode_text_has_no_problem(payload: dict[str, Any]) -> None:
    assert not_json(payload) is None


@given(_OBJECTS, st.data())
def test_a_lone_surrogate_anywhere_is_found_where_it_is(payload: dict[str, Any], data: st.DataObject) -> None:
    places = _places(payload)
    if not places:
        payload["title"] = "x"
        places = [(("title",), False)]
    place, is_key = data.draw(st.sampled_from(places))
    spoiled = copy.deepcopy(payload)
    _spoil(spoiled, place, is_key)
    invalid = not_json(spoiled)
    assert invalid is not None
    where = _path(place[:-1] if is_key else place)
    assert invalid.path == agentfx.errors.echo(where)
    if is_key and len(place) == 1:
        assert invalid.problem == "the input's field names must be valid Unicode"
    elif is_key:
        assert invalid.problem.startswith("the field names of ") and invalid.problem.endswith(" must be valid Unicode")
    else:
        assert invalid.problem.endswith(" must be valid Unicode")
    # The same from the JSON text a model writes (escaped), as the adapters read it.
    read = not_json(json_arguments(json.dumps(spoiled)))
    assert read is not None and (read.path, read.problem) == (invalid.path, invalid.problem)


def test_the_first_lone_surrogate_in_document_order_is_the_one_named() -> None:
    payload = {"a": [{"b": "ok"}, {"c": "\ud800"}], "\udc00": 1, "d": "\ud800"}
    invalid = not_json(payload)
    assert invalid is not None and (invalid.path, invalid.problem) == ("$.a[1].c", '"a[1].c" must be valid Unicode')


def test_names_are_bounded_and_keys_that_are_not_strings_read_as_msgspec_writes_them() -> None:
    long = "k" * 300
    invalid = not_json({long: "\ud800"})
    assert invalid is not None
    assert invalid.path == "$." + "k" * 126 + "…" and invalid.problem == f'"{"k" * 128}…" must be valid Unicode'
    invalid = not_json({"counts": {1: ["\ud800"]}})
    assert invalid is not None and invalid.path == "$.counts[...][0]"


def test_a_cycle_or_a_value_json_cannot_hold_is_walked_once_and_left_to_the_runtime() -> None:
    cyclic: dict[str, Any] = {"a": [1]}
    cyclic["a"].append(cyclic)
    assert not_json(cyclic) is None
    cyclic["z"] = "\ud800"
    invalid = not_json(cyclic)
    assert invalid is not None and invalid.path == "$.z"
    assert not_json({"when": object()}) is None
    assert not_json("\ud800") is None and not_json(["\ud800"]) is None  # not an object: refused as such


@given(_OBJECTS, st.sampled_from([float("nan"), float("inf"), float("-inf")]), st.data())
def test_a_number_that_is_not_finite_anywhere_is_found_where_it_is(
    payload: dict[str, Any], spoiler: float, data: st.DataObject
) -> None:
    # What json.loads makes of NaN or Infinity, which no JSON holds; a real null beside it changes nothing.
    spoiled = copy.deepcopy(payload)
    spoiled["z-null"] = None
    places = [place for place, is_key in _places(spoiled) if not is_key]
    place = data.draw(st.sampled_from([*places, ("z-number",)]))
    container: Any = spoiled
    for step in place[:-1]:
        container = container[step]
    container[place[-1]] = spoiler
    invalid = not_json(spoiled)
    assert invalid is not None
    assert invalid.path == agentfx.errors.echo(_path(place))
    assert invalid.problem.endswith(" must be a finite number")
    assert not_json({**payload, "z-null": None}) is None


pytestmark = pytest.mark.anyio


async def test_a_lone_surrogate_is_refused_audited_and_nothing_is_sent(anyio_backend: str) -> None:
    h = harness(audit=agentfx.audit_log(include_input=True))
    answer, failure = await run_call(
        h.runtime, "create_todo", {"title": "Buy \ud800 milk"}, agentfx.Invocation(), logging.getLogger("t")
    )
    assert (answer.ok, answer.text) == (False, NOT_UNICODE_TEXT)
    assert isinstance(failure, agentfx.AgentInvalidInputError)
    assert (failure.path, failure.problem) == ("$.title", '"title" must be valid Unicode')
    assert answer.data == msgspec.to_builtins(failure)
    assert h.recorder.dispatched == [] and h.recorder.model() == INITIAL
    [entry] = h.audit.entries()
    assert (entry.decision, entry.outcome, entry.input) == (
        "refused",
        "AgentInvalidInputError",
        "[unrecordable: UnreadableInput]",
    )


async def test_the_pipeline_s_earlier_refusals_come_first(anyio_backend: str) -> None:
    # Unknown and unavailable are answered as such, even for a payload that is not Unicode.
    h = harness()
    bad = {"title": "\ud800"}
    unknown, _ = await run_call(h.runtime, "drop_tables", bad, agentfx.Invocation(), logging.getLogger("t"))
    unavailable, _ = await run_call(h.runtime, "delete_selected_todo", bad, agentfx.Invocation(), logging.getLogger("t"))
    assert unknown.text == "No such capability: drop_tables"
    assert unavailable.text == 'Capability "delete_selected_todo" is not available right now'
    assert h.outcomes() == [
        ("drop_tables", "AgentUnknownCapabilityError"),
        ("delete_selected_todo", "AgentCapabilityUnavailableError"),
    ]


async def test_the_stand_in_is_refused_as_not_an_object(anyio_backend: str) -> None:
    h = harness()
    answer, failure = await run_call(h.runtime, "select_todo", UNREADABLE, agentfx.Invocation(), logging.getLogger("t"))
    assert answer.text == 'Invalid input for "select_todo": the input must be an object'
    assert isinstance(failure, agentfx.AgentInvalidInputError) and h.recorder.dispatched == []


async def test_a_number_that_is_not_finite_is_refused_audited_and_nothing_is_sent(anyio_backend: str) -> None:
    # A float field would take NaN from json.loads, and the Model would hold what no JSON can.
    class Measured(msgspec.Struct, frozen=True, tag=True):
        celsius: float

    seen: list[object] = []
    runtime = agentfx.bind(
        agentfx.define(agentfx.expose(Measured, agentfx.variant(Measured, "Measure", name="measure"))),
        host=agentfx.Host(model=lambda: None, dispatch=seen.append),
        audit=(log := agentfx.audit_log()),
    )
    for value in (float("nan"), float("inf"), float("-inf")):
        answer, failure = await run_call(runtime, "measure", {"celsius": value}, agentfx.Invocation(), logging.getLogger("t"))
        assert answer.text == 'Invalid input for "measure": "celsius" must be a finite number'
        assert isinstance(failure, agentfx.AgentInvalidInputError) and failure.path == "$.celsius"
    answer, _ = await run_call(runtime, "measure", {"celsius": 21.5}, agentfx.Invocation(), logging.getLogger("t"))
    assert answer.ok and seen == [Measured(celsius=21.5)]
    assert [entry.outcome for entry in log.entries()] == ["AgentInvalidInputError"] * 3 + ["dispatched"]
