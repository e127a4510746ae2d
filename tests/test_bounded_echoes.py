"""Caller text a failure or an audit entry repeats stays bounded, and every failure and entry encodes.

Through the direct API, whatever the name: huge, with lone surrogates, not a
string at all, or an object whose ``repr`` raises.
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from returns.result import Failure

import agentfx
from agentfx.audit import AuditRecord
from agentfx.errors import ECHO_LIMIT, echo, encodable
from agentfx.invocation import Invocation
from tests.support import AppAgent, RequestedCreateTodo, outcome_of, recorder

ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=300)
"""Text that includes lone surrogates, which Hypothesis leaves out by default."""

HUGE = "n" * (4 * 1024 * 1024)
HUGE_KEY = 1_000_000


def encodes(value: object) -> bytes:
    return msgspec.json.encode(value)


# --- the helper ---------------------------------------------------------------------------


@given(ANY_TEXT)
def test_an_echo_is_bounded_encodable_and_keeps_what_it_can(text: str) -> None:
    shown = echo(text)
    assert len(shown) <= ECHO_LIMIT + 1
    shown.encode("utf-8")
    if len(text) <= ECHO_LIMIT:
        assert len(shown) == len(text)
    else:
        assert shown.endswith("…") and len(shown) == ECHO_LIMIT + 1
    if encodable(text) == text:  # nothing to replace: a prefix of the text, verbatim
        assert shown.removesuffix("…") == text[:ECHO_LIMIT]


def test_only_lone_surrogates_are_replaced() -> None:
    pair = "\ud83d\ude00"
    assert encodable(f"a{pair}b") == "a\U0001f600b"
    assert encodable("a\ud800b\udfffc") == "a\ufffdb\ufffdc"


# --- failure values -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_huge_unknown_name_is_echoed_bounded_and_nothing_is_dispatched() -> None:
    rec = recorder()
    log = agentfx.audit_log()
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=log)
    outcome = outcome_of(await runtime.messages.dispatch_unknown(HUGE, {}))
    assert isinstance(outcome, Failure)
    error = outcome.failure()
    assert isinstance(error, agentfx.AgentUnknownCapabilityError)
    assert error.capability == "n" * 128 + "…"
    assert error.message == "No such capability: " + "n" * 128 + "…"
    assert len(encodes(error)) < 400
    (entry,) = log.entries()
    assert entry.capability == "n" * 128 + "…"
    assert rec.dispatched == [] and rec.model_reads == 0


@pytest.mark.anyio
async def test_the_audit_ring_holds_no_more_caller_text_than_its_bound() -> None:
    log = agentfx.audit_log(capacity=500)
    runtime = agentfx.bind(AppAgent, host=recorder().host, audit=log)
    for index in range(600):
        await runtime.messages.dispatch_unknown(f"{index}{HUGE[:50_000]}", {})
    entries = log.entries()
    assert len(entries) == 500
    # 500 names of 50,000 characters would be 25 MB; kept, they are bounded by the echo.
    assert sum(len(entry.capability) for entry in entries) <= 500 * (ECHO_LIMIT + 1)
    assert len(encodes(entries)) < 500 * 400


class ReprRaises:
    def __repr__(self) -> str:
        raise RuntimeError("repr is not for you")


class ReprIsHuge:
    def __repr__(self) -> str:
        return "r" * 1_000_000


class ReprIsNotAString:
    def __repr__(self) -> Any:
        return 42


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "shown"),
    [
        (ReprRaises(), "<ReprRaises>"),
        (ReprIsHuge(), "r" * 128 + "…"),
        (42, "42"),
        (None, "None"),
        (["a", "list"], "['a', 'list']"),
    ],
    ids=["repr-raises", "repr-huge", "int", "none", "list"],
)
async def test_a_name_that_is_not_a_string_is_an_unknown_capability(name: object, shown: str) -> None:
    rec = recorder()
    log = agentfx.audit_log()
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=log)
    outcome = outcome_of(await runtime.messages.dispatch_unknown(name, {}))  # pyright: ignore[reportArgumentType]
    assert isinstance(outcome, Failure)
    error = outcome.failure()
    assert error == agentfx.AgentUnknownCapabilityError.of(shown)
    assert [entry.capability for entry in log.entries()] == [shown]
    assert rec.dispatched == []


@pytest.mark.anyio
async def test_a_name_whose_repr_is_not_a_string_still_names_something() -> None:
    runtime = agentfx.bind(AppAgent, host=recorder().host)
    outcome = outcome_of(await runtime.messages.dispatch_unknown(ReprIsNotAString(), {}))  # pyright: ignore[reportArgumentType]
    assert isinstance(outcome, Failure)
    assert isinstance(outcome.failure(), agentfx.AgentUnknownCapabilityError)
    encodes(outcome.failure())


@settings(max_examples=60, deadline=None)
@given(name=ANY_TEXT | st.integers() | st.floats() | st.binary(max_size=20) | st.none())
def test_every_unknown_capability_failure_encodes_and_decodes_whatever_the_name(name: object) -> None:
    import anyio

    rec = recorder()
    log = agentfx.audit_log(include_input=True)
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=log)

    async def run() -> object:
        return outcome_of(await runtime.messages.dispatch_unknown(name, {"k": name}))  # pyright: ignore[reportArgumentType]

    outcome = anyio.run(run)
    exposed = isinstance(name, str) and name in {d.name for d in runtime.messages.list()}
    if exposed:
        return
    assert isinstance(outcome, Failure)
    error = outcome.failure()  # pyright: ignore[reportUnknownVariableType]
    assert isinstance(error, agentfx.AgentUnknownCapabilityError)
    assert msgspec.json.decode(encodes(error), type=agentfx.DispatchError) == error
    assert len(error.capability) <= ECHO_LIMIT + 1
    encodes(log.entries())


@pytest.mark.parametrize("name", ["\ud800", "x\udfff" * 100, HUGE])
def test_a_resource_read_of_any_name_fails_bounded_and_encodable(name: str) -> None:
    runtime = agentfx.bind(AppAgent, host=recorder().host)
    read = runtime.resources.read(name)
    assert isinstance(read, Failure)
    error = read.failure()
    assert len(error.resource) <= ECHO_LIMIT + 1 and len(encodes(error)) < 1200


def test_a_resource_read_of_a_name_whose_repr_raises_is_a_resource_error() -> None:
    runtime = agentfx.bind(AppAgent, host=recorder().host)
    read = runtime.resources.read(ReprRaises())  # pyright: ignore[reportArgumentType]
    assert read == Failure(agentfx.AgentResourceError.of("<ReprRaises>"))


# --- audit entries with inputs -----------------------------------------------------------------


def record(payload: object, capability: str = "create_todo") -> AuditRecord:
    return AuditRecord(Invocation(id="c-1"), capability, None, None, "refused", "AgentInvalidInputError", payload)


def test_non_string_keys_are_written_as_their_json_text() -> None:
    log = agentfx.audit_log(include_input=True, redact=["token"])
    log.record(record({1: "a", None: "b", 1.5: "d", (1, "x"): "e", "token": "t0k", "\ud800": "\ud800"}))
    log.record(record({True: "c"}))
    entry, boolean = log.entries()
    assert boolean.input == {"true": "c"}
    assert entry.input == {
        "1": "a",
        "null": "b",
        "1.5": "d",
        '[1,"x"]': "e",
        "token": "[redacted]",
        "\ufffd": "\ufffd",
    }
    assert msgspec.json.decode(encodes(entry))["input"] == entry.input


def test_a_key_that_cannot_be_written_is_named_by_its_type() -> None:
    class Key:
        def __hash__(self) -> int:
            return 1

    log = agentfx.audit_log(include_input=True)
    log.record(record({Key(): 1, frozenset({2}): [3]}))
    (entry,) = log.entries()
    assert entry.input == {"[unrecordable: Key]": 1, "[2]": [3]}
    encodes(entry)


KEYS = ANY_TEXT | st.integers() | st.floats(allow_nan=False) | st.booleans() | st.none() | st.tuples(st.integers())
PAYLOADS = st.recursive(
    ANY_TEXT | st.integers() | st.floats() | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4) | st.tuples(inner, inner),
    max_leaves=20,
)


@settings(max_examples=150)
@given(payload=PAYLOADS, capability=ANY_TEXT)
def test_every_audit_entry_encodes_whatever_the_input_and_the_name(payload: object, capability: str) -> None:
    log = agentfx.audit_log(include_input=True)
    log.record(record(payload, capability))
    (entry,) = log.entries()
    decoded = msgspec.json.decode(encodes(entry))
    assert len(decoded["capability"]) <= ECHO_LIMIT + 1

    def keys_are_strings(value: object) -> bool:
        if isinstance(value, dict):
            items: dict[object, object] = value  # pyright: ignore[reportUnknownVariableType]
            return all(isinstance(k, str) and keys_are_strings(v) for k, v in items.items())
        if isinstance(value, list | tuple):
            members: list[object] | tuple[object, ...] = value  # pyright: ignore[reportUnknownVariableType]
            return all(keys_are_strings(v) for v in members)
        return True

    assert keys_are_strings(entry.input)


@pytest.mark.anyio
async def test_an_invalid_input_failure_naming_a_key_the_caller_sent_encodes_bounded() -> None:
    runtime = agentfx.bind(AppAgent, host=recorder().host)
    outcome = outcome_of(await runtime.messages.dispatch(RequestedCreateTodo, {"title": "x", "\ud800" + "k" * HUGE_KEY: 1}))
    assert isinstance(outcome, Failure)
    error = outcome.failure()
    assert isinstance(error, agentfx.AgentInvalidInputError)
    assert error.problem == '"\ufffd' + "k" * 127 + '…" is not a field of this input'
    assert msgspec.json.decode(encodes(error), type=agentfx.DispatchError) == error


class _Named(msgspec.Struct, frozen=True, tag=True):
    title: str


class _Bumped(msgspec.Struct, frozen=True, tag=True):
    title: str


@given(ANY_TEXT.filter(lambda text: text.strip() != ""))
@example("milk\ud800").via("a lone high surrogate")
@example("\udfff\ud83d\ude00").via("a lone low surrogate beside a pair")
@settings(max_examples=50, deadline=None)
def test_a_refusal_reason_and_a_confirm_prompt_made_of_caller_text_encode(title: str) -> None:
    # The strict decoder lets a lone surrogate through (JSON may escape one),
    # and an application's reason or prompt often repeats the caller's input.
    refusal, confirm = agentfx.Refusal(f'"{title}" is taken'), agentfx.Confirm(f'Bump "{title}"?')
    assert refusal.reason == f'"{encodable(title)}" is taken'
    assert confirm.prompt == f'Bump "{encodable(title)}"?'
    asked: list[agentfx.ConfirmationRequest] = []
    definition = agentfx.define(
        agentfx.expose(
            _Named | _Bumped,
            agentfx.variant(_Named, "Refused", name="refuse", authorize=lambda request: agentfx.Refusal(f'"{request.input.title}" is taken')),
            agentfx.variant(_Bumped, "Asked", name="ask", authorize=lambda request: agentfx.Confirm(f'Bump "{request.input.title}"?')),
        )
    )
    host: agentfx.Host[None, Any, None] = agentfx.Host(model=lambda: None, dispatch=lambda message: None)
    runtime = agentfx.bind(definition, host=host)

    async def no(request: agentfx.ConfirmationRequest) -> bool:
        asked.append(request)
        return False

    async def main() -> list[object]:
        return [
            await runtime.messages.attempt("refuse", {"title": title}),
            await runtime.messages.attempt("ask", {"title": title}),
            await runtime.messages.attempt("ask", {"title": title}, Invocation(id="c", confirm=no)),
        ]

    refused, required, declined = anyio.run(main)
    assert isinstance(refused, agentfx.AgentAuthorizationError) and refused.message == refusal.reason
    assert isinstance(required, agentfx.AgentConfirmationRequiredError) and required.prompt == confirm.prompt
    assert isinstance(declined, agentfx.AgentAuthorizationError) and declined.message == f"Declined: {confirm.prompt}"
    assert [request.prompt for request in asked] == [confirm.prompt]
    for value in (refused, required, declined, asked[0].prompt):
        encodes(value)
