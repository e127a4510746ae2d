"""The audit log: recording policy, ring buffer, encoding, and the safe sink call."""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from types import CoroutineType
from typing import Any, cast

import anyio
import msgspec
import pytest
from msgspec import UNSET

from agentfx.audit import (
    INPUT_LIMIT,
    AuditEntry,
    AuditLog,
    AuditRecord,
    AuditSink,
    Decision,
    audit_log,
    safe_record,
)
from agentfx.errors import ECHO_LIMIT, ContractError, echo, encodable
from agentfx.invocation import Invocation


@dataclass(frozen=True)
class User:
    id: str
    token: str


ALICE = User(id="u-alice", token="s3cret")


def make_record(
    *,
    invocation: Invocation | None = None,
    capability: str = "delete_todo",
    tag: str | None = "RequestedDeleteTodo",
    principal: object = ALICE,
    decision: Decision = "dispatched",
    outcome: str = "dispatched",
    input: object = None,
    principal_resolved: bool = True,
) -> AuditRecord:
    return AuditRecord(
        invocation=invocation if invocation is not None else Invocation(id="call-1"),
        capability=capability,
        tag=tag,
        principal=principal,
        decision=decision,
        outcome=outcome,
        input=input,
        principal_resolved=principal_resolved,
    )


def only_entry(log: AuditLog) -> AuditEntry:
    [entry] = log.entries()
    return entry


def ticking_clock(start: float = 100.0) -> Iterator[float]:
    now = start
    while True:
        yield now
        now += 1.0


# Ring buffer


def test_capacity_drops_the_oldest_entries() -> None:
    log = audit_log(capacity=2)
    for n in range(5):
        log.record(make_record(invocation=Invocation(id=f"call-{n}")))
    assert [entry.invocation for entry in log.entries()] == ["call-3", "call-4"]
    assert log.capacity == 2


def test_entries_are_oldest_first() -> None:
    log = audit_log()
    for n in range(3):
        log.record(make_record(invocation=Invocation(id=f"call-{n}")))
    assert [entry.invocation for entry in log.entries()] == ["call-0", "call-1", "call-2"]


def test_entries_returns_a_copy() -> None:
    log = audit_log()
    log.record(make_record())
    taken = log.entries()
    taken.clear()
    log.record(make_record(invocation=Invocation(id="call-2")))
    assert taken == []
    assert [entry.invocation for entry in log.entries()] == ["call-1", "call-2"]


def test_a_reader_changing_what_entries_gave_it_changes_nothing_kept() -> None:
    log = audit_log(include_input=True, principal=lambda user: {"id": user.id, "roles": ["reader"]})
    log.record(make_record(input={"id": "todo-1", "tags": ["a"]}))
    [first] = log.entries()
    read_input: Any = first.input
    read_principal: Any = first.principal
    read_input["id"] = "todo-666"
    read_input["tags"].append("b")
    read_principal["id"] = "mallory"
    read_principal["roles"].append("admin")
    [again] = log.entries()
    assert again.input == {"id": "todo-1", "tags": ["a"]}
    assert again.principal == {"id": "u-alice", "roles": ["reader"]}
    assert again == only_entry(log)


def test_an_entry_without_containers_is_handed_out_as_kept() -> None:
    log = audit_log(include_input=True, principal=lambda user: user.id)
    log.record(make_record(input="text"))
    assert log.entries()[0] is log.entries()[0]  # nothing in it to copy


def test_clear_forgets_every_entry_and_keeps_recording() -> None:
    log = audit_log()
    log.record(make_record())
    log.record(make_record())
    log.clear()
    assert log.entries() == []
    log.record(make_record(invocation=Invocation(id="after")))
    assert [entry.invocation for entry in log.entries()] == ["after"]


@pytest.mark.parametrize("capacity", [0, -1])
def test_capacity_below_one_is_rejected(capacity: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        audit_log(capacity=capacity)


@pytest.mark.parametrize(("capacity", "what"), [("x", "a str"), (True, "a bool"), (2.0, "a float"), (None, "a NoneType")])
def test_a_capacity_that_is_not_an_int_is_refused_when_the_log_is_made(capacity: object, what: str) -> None:
    with pytest.raises(ContractError) as raised:
        audit_log(capacity=cast(Any, capacity))
    assert str(raised.value) == (
        f'Cannot make this audit log: "capacity" must be a whole number of entries; it is {what}'
    )
    with pytest.raises(ContractError):
        AuditLog(capacity=cast(Any, capacity))


def test_capacity_of_one_is_allowed() -> None:
    log = audit_log(capacity=1)
    log.record(make_record(invocation=Invocation(id="a")))
    log.record(make_record(invocation=Invocation(id="b")))
    assert [entry.invocation for entry in log.entries()] == ["b"]


def test_redact_as_a_single_string_is_rejected() -> None:
    with pytest.raises(TypeError, match="single string"):
        audit_log(redact="token")


def test_audit_log_is_an_audit_sink() -> None:
    sink: AuditSink = audit_log()
    sink.record(make_record())
    assert isinstance(sink, AuditLog)
    assert len(sink.entries()) == 1


# Entry fields


def test_entry_copies_the_invocation_and_decision() -> None:
    log = audit_log(clock=lambda: 42.5)
    log.record(
        make_record(
            invocation=Invocation(id="mcp-7", transport="mcp"),
            decision="refused",
            outcome="AgentAuthorizationError",
        )
    )
    assert only_entry(log) == AuditEntry(
        at=42.5,
        invocation="mcp-7",
        transport="mcp",
        capability="delete_todo",
        tag="RequestedDeleteTodo",
        decision="refused",
        outcome="AgentAuthorizationError",
    )


def test_clock_is_called_once_per_record() -> None:
    ticks = ticking_clock()
    log = audit_log(clock=lambda: next(ticks))
    log.record(make_record())
    log.record(make_record())
    assert [entry.at for entry in log.entries()] == [100.0, 101.0]


def test_unknown_capability_has_no_tag() -> None:
    log = audit_log()
    log.record(make_record(capability="nope", tag=None, decision="refused"))
    assert only_entry(log).tag is UNSET


def test_entries_are_frozen() -> None:
    log = audit_log()
    log.record(make_record())
    with pytest.raises(AttributeError):
        only_entry(log).outcome = "completed"  # pyright: ignore[reportAttributeAccessIssue]


# Principal


def test_principal_is_not_recorded_without_a_projection() -> None:
    log = audit_log()
    log.record(make_record(principal=ALICE))
    entry = only_entry(log)
    assert entry.principal is UNSET
    assert b"s3cret" not in msgspec.json.encode(entry)
    assert b"principal" not in msgspec.json.encode(entry)


def test_principal_is_projected() -> None:
    log = audit_log(principal=lambda user: user.id)
    log.record(make_record(principal=ALICE))
    assert only_entry(log).principal == "u-alice"


def test_a_projected_set_and_an_input_set_are_recorded_in_order() -> None:
    # Hash order differs between processes: one call must be recorded alike in each.
    roles = frozenset(["ops", "editor", "viewer", "billing", "admin", "owner", "guest", "audit"])
    log = audit_log(principal=lambda user: roles, include_input=True)
    log.record(make_record(input={"title": "t", "tags": set("hgfedcba")}))
    # Items that do not compare are still recorded, as they come.
    log.record(make_record(input={"mixed": {1, "a", 2}}))
    first, second = log.entries()
    assert first.principal == sorted(roles)
    assert first.input == {"tags": sorted("hgfedcba"), "title": "t"}
    mixed: Any = second.input
    assert sorted(mixed["mixed"], key=str) == [1, 2, "a"]


def test_unresolved_principal_is_none_and_the_projection_is_not_called() -> None:
    seen: list[object] = []

    def project(user: object) -> object:
        seen.append(user)
        return "projected"

    log = audit_log(principal=project)
    log.record(make_record(principal=None, principal_resolved=False, decision="refused"))
    assert seen == []
    assert only_entry(log).principal is None
    assert b'"principal":null' in msgspec.json.encode(only_entry(log))


def test_resolved_none_principal_is_projected() -> None:
    # A host without `principal` resolves to None; that is still a resolved principal.
    seen: list[object] = []

    def project(user: object) -> object:
        seen.append(user)
        return "anonymous"

    log = audit_log(principal=project)
    log.record(make_record(principal=None))
    assert seen == [None]
    assert only_entry(log).principal == "anonymous"


def test_a_raising_projection_records_the_entry_without_a_principal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def project(user: User) -> object:
        raise RuntimeError("projection bug")

    log = audit_log(principal=project)
    with caplog.at_level(logging.ERROR, logger="agentfx.audit"):
        log.record(make_record(outcome="completed"))
    entry = only_entry(log)
    assert entry.principal is UNSET
    assert entry.outcome == "completed"
    assert "projection raised" in caplog.text


def test_an_async_projection_is_refused_when_the_log_is_made() -> None:
    async def project(user: User) -> object:
        return user.id

    class Projection:
        async def __call__(self, user: User) -> object:
            return user.id

    for projection, why in ((project, "it is a coroutine function"), (Projection(), "its __call__ is a coroutine function")):
        with pytest.raises(ContractError) as raised:
            audit_log(principal=projection)
        assert str(raised.value) == f'Cannot make this audit log: "principal" must answer synchronously; {why}'
        with pytest.raises(ContractError):
            AuditLog(principal=projection)


@pytest.mark.parametrize(("projection", "what"), [(3, "an int"), ("id", "a str"), (["id"], "a list")])
def test_a_projection_that_is_not_a_function_is_refused_when_the_log_is_made(projection: object, what: str) -> None:
    # Accepted, it would fail at every record and drop every principal.
    with pytest.raises(ContractError) as raised:
        audit_log(principal=cast(Any, projection))
    assert str(raised.value) == (
        'Cannot make this audit log: "principal" must be a function projecting the principal '
        f"to what may be recorded, or None; it is {what}"
    )
    with pytest.raises(ContractError):
        AuditLog(principal=cast(Any, projection))


def test_a_projection_returning_an_awaitable_has_it_closed_and_records_no_principal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    made: list[CoroutineType[Any, Any, object]] = []

    async def lookup(user: User) -> object:
        return user.id

    def project(user: User) -> object:
        made.append(lookup(user))
        return made[-1]

    log = audit_log(principal=project)
    with caplog.at_level(logging.ERROR, logger="agentfx.audit"):
        log.record(make_record())
        log.record(make_record())
    assert [entry.principal for entry in log.entries()] == [UNSET, UNSET]
    assert all(coroutine.cr_frame is None for coroutine in made)  # closed, so never "never awaited"
    assert caplog.text.count("projection returned an awaitable") == 1


class _Slotted:
    """A sink that cannot be weakly referred to, whose ``record`` answers an awaitable."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = bytearray(1024)

    def record(self, record: AuditRecord, /) -> Any:
        return _never_awaited()


async def _never_awaited() -> None:
    pass


def test_a_sink_answering_an_awaitable_is_logged_once_and_never_held(caplog: pytest.LogCaptureFixture) -> None:
    import gc

    from agentfx import audit

    with caplog.at_level(logging.ERROR, logger="agentfx.audit"):
        for _ in range(3):
            safe_record(cast(AuditSink, _Slotted()), make_record())
    assert caplog.text.count("returned an awaitable from record") == 1
    gc.collect()
    # Known by its class: no instance outlives its own use.
    assert not [sink for sink in gc.get_objects() if type(sink) is _Slotted]
    assert _Slotted in audit._awaitable_from  # pyright: ignore[reportPrivateUsage]


# Input


def test_input_is_not_recorded_by_default() -> None:
    log = audit_log()
    log.record(make_record(input={"id": "todo-1"}))
    assert only_entry(log).input is UNSET
    assert b"input" not in msgspec.json.encode(only_entry(log))


def test_input_is_recorded_when_asked_refusals_included() -> None:
    log = audit_log(include_input=True)
    log.record(make_record(input={"id": "todo-1"}))
    log.record(make_record(input={"id": 7}, decision="refused", outcome="AgentInvalidInputError"))
    assert [entry.input for entry in log.entries()] == [{"id": "todo-1"}, {"id": 7}]


def test_recorded_input_is_a_deep_snapshot() -> None:
    payload: dict[str, object] = {"title": "Milk", "tags": ["a"], "meta": {"n": 1}}
    log = audit_log(include_input=True)
    log.record(make_record(input=payload))
    payload["title"] = "Eggs"
    tags = payload["tags"]
    assert isinstance(tags, list)
    tags.append("b")  # pyright: ignore[reportUnknownMemberType]
    meta = payload["meta"]
    assert isinstance(meta, dict)
    meta["n"] = 2
    assert only_entry(log).input == {"title": "Milk", "tags": ["a"], "meta": {"n": 1}}


def test_non_dict_input_is_recorded_without_redact() -> None:
    log = audit_log(include_input=True)
    for payload in (["token", 1], None, '{"token": "t0k",}'):
        log.record(make_record(input=payload))
    assert [entry.input for entry in log.entries()] == [["token", 1], None, '{"token": "t0k",}']


@pytest.mark.parametrize(
    "payload",
    [
        '{"user": "ada", "password": "hunter2",}',  # arguments that were not JSON, as text
        [{"password": "hunter2"}],  # a list of objects: a top-level key of none of them
        "hunter2",
        None,
    ],
)
def test_with_redact_an_input_that_is_not_an_object_is_redacted_whole(payload: object) -> None:
    log = audit_log(include_input=True, redact=["password"])
    log.record(make_record(input=payload))
    entry = only_entry(log)
    assert entry.input == "[redacted]"
    assert b"hunter2" not in msgspec.json.encode(entry)


def test_unencodable_input_does_not_break_recording() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "Opaque(password='hunter2')"

    log = audit_log(include_input=True)
    log.record(make_record(input={"id": "todo-1", "extra": Opaque()}))
    entry = only_entry(log)
    assert entry.input == {"id": "todo-1", "extra": "[unrecordable: Opaque]"}
    assert b"hunter2" not in msgspec.json.encode(entry)


def test_the_projected_principal_is_a_snapshot_that_always_encodes() -> None:
    class Identity:
        def __repr__(self) -> str:
            return "Identity(token='hunter2')"

    roles = ["reader"]
    principals: dict[str, object] = {"ann": {"name": "ann", "roles": roles}, "opaque": Identity(), "odd": "a\udc80"}
    log = audit_log(principal=lambda name: principals[name])
    for name in principals:
        log.record(make_record(principal=name))
    roles.append("admin")  # a later change to the caller's principal
    entries = log.entries()
    assert [entry.principal for entry in entries] == [
        {"name": "ann", "roles": ["reader"]},
        "[unrecordable: Identity]",
        "a\ufffd",
    ]
    encoded = msgspec.json.encode(entries)
    assert b"hunter2" not in encoded


def test_cyclic_input_records_a_placeholder() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    log = audit_log(include_input=True)
    log.record(make_record(input=cyclic))
    assert only_entry(log).input == "[unrecordable]"
    msgspec.json.encode(only_entry(log))


def test_an_input_over_the_limit_is_kept_as_its_size_alone() -> None:
    log = audit_log(include_input=True)
    at_limit = {"junk": "x" * (INPUT_LIMIT - len('{"junk":""}'))}
    over = {"junk": "hunter2" + "x" * (4 * 1024 * 1024)}
    log.record(make_record(input=at_limit))
    log.record(make_record(input=over, decision="refused", outcome="AgentUnknownCapabilityError"))
    log.record(make_record(input="hunter2" * INPUT_LIMIT))
    kept, marked, text = log.entries()
    assert kept.input == at_limit
    size = len(msgspec.json.encode(over))
    assert marked.input == f"[too large: {size} bytes of JSON]"
    assert text.input == f"[too large: {7 * INPUT_LIMIT + 2} bytes of JSON]"
    assert b"hunter2" not in msgspec.json.encode([marked, text])
    assert INPUT_LIMIT == 64 * 1024


def test_the_limit_is_on_what_is_kept_after_redaction() -> None:
    log = audit_log(include_input=True, redact=["blob"])
    log.record(make_record(input={"id": "todo-1", "blob": "x" * (2 * INPUT_LIMIT)}))
    assert only_entry(log).input == {"id": "todo-1", "blob": "[redacted]"}


def test_a_projected_principal_over_the_limit_is_kept_as_its_size_alone() -> None:
    log = audit_log(principal=lambda user: {"claims": "x" * INPUT_LIMIT})
    log.record(make_record())
    size = INPUT_LIMIT + len(b'{"claims":""}')
    assert only_entry(log).principal == f"[too large: {size} bytes of JSON]"


class Opaque(enum.Enum):
    HANDLE = object()


def test_an_input_or_principal_whose_snapshot_does_not_encode_is_unrecordable() -> None:
    # to_builtins hands an Enum member's value through as it is, which JSON may not say.
    log = audit_log(include_input=True, principal=lambda user: {"role": Opaque.HANDLE})
    log.record(make_record(input={"handle": Opaque.HANDLE, "id": "todo-1"}))
    entry = only_entry(log)
    assert (entry.input, entry.principal) == ("[unrecordable]", "[unrecordable]")
    msgspec.json.encode(entry)


ADAPTER_ID = "0123456789ab-18446744073709551615"
"""The longest id new_invocation_id makes: a process prefix and a 64-bit count."""


@pytest.mark.parametrize(
    ("invocation", "id", "transport"),
    [
        (Invocation(id="call-\ud800", transport="mcp"), "call-\ufffd", "mcp"),
        (Invocation(id="call-1", transport="x\udfff"), "call-1", "x\ufffd"),
        (Invocation(id="x" * 100_000, transport="y" * 100_000), "x" * 2 * ECHO_LIMIT + "…", "y" * ECHO_LIMIT + "…"),
        # What an adapter makes, a fresh id and the client's call id as echoed, is kept whole.
        (Invocation(id=f"{ADAPTER_ID}/{echo('c' * 10_000)}"), f"{ADAPTER_ID}/{'c' * ECHO_LIMIT}…", "in-app"),
        (Invocation(id=cast(Any, 7), transport=cast(Any, None)), "7", "None"),
    ],
    ids=["surrogate id", "surrogate transport", "long", "adapter id", "not text"],
)
def test_the_invocation_id_and_transport_are_bounded_and_always_encode(
    invocation: Invocation, id: str, transport: str
) -> None:
    log = audit_log()
    log.record(make_record(invocation=invocation))
    entry = only_entry(log)
    assert (entry.invocation, entry.transport) == (id, transport)
    assert len(msgspec.json.encode(entry)) < 1000


def test_redact_replaces_top_level_keys_only() -> None:
    payload = {"id": "todo-1", "token": "t0k", "nested": {"token": "inner"}}
    log = audit_log(include_input=True, redact=("token", "absent"))
    log.record(make_record(input=payload))
    assert only_entry(log).input == {
        "id": "todo-1",
        "token": "[redacted]",
        "nested": {"token": "inner"},
    }
    # Redaction works on the snapshot, never on the caller's payload.
    assert payload["token"] == "t0k"


@pytest.mark.parametrize(
    ("redact", "named"),
    [
        ([b"token"], "b'token' (a bytes)"),
        (("id", 7), "7 (an int)"),
        ([None], "None (a NoneType)"),
        ({"token", ("nested", "token")}, "('nested', 'token') (a tuple)"),
    ],
)
def test_a_redact_entry_that_is_not_a_string_is_refused_naming_it(redact: Any, named: str) -> None:
    # Every key of a recorded input is a string: such an entry would redact nothing.
    with pytest.raises(ContractError) as raised:
        audit_log(include_input=True, redact=redact)
    assert str(raised.value) == (
        f'Cannot make this audit log: "redact" takes key names as strings, got {named}, '
        "which matches no key of a recorded input"
    )
    with pytest.raises(ContractError):
        AuditLog(redact=redact)


def test_redact_as_bytes_is_refused_naming_it() -> None:
    for redact in (b"token", bytearray(b"token")):
        with pytest.raises(ContractError, match=re.escape(f"takes a collection of key names, got {redact!r}")):
            audit_log(redact=redact)  # pyright: ignore[reportArgumentType]


def test_redact_takes_any_collection_of_strings() -> None:
    def names() -> Iterator[str]:
        yield "token"

    for redact in (["token"], ("token",), {"token"}, frozenset({"token"}), {"token": 1}.keys(), names()):
        log = audit_log(include_input=True, redact=redact)
        log.record(make_record(input={"id": "todo-1", "token": "t0k"}))
        assert only_entry(log).input == {"id": "todo-1", "token": "[redacted]"}


def test_redact_matches_the_keys_as_the_snapshot_writes_them() -> None:
    # The empty key is a key JSON may send; a key with a lone surrogate is kept as its replacement.
    lone = "pass" + chr(0xD800)
    log = audit_log(include_input=True, redact=["", lone, "1"])
    log.record(make_record(input={"": "a", lone: "b", 1: "c", "id": "d"}))
    assert only_entry(log).input == {"": "[redacted]", encodable(lone): "[redacted]", "1": "[redacted]", "id": "d"}


def test_redact_applies_to_refusals() -> None:
    log = audit_log(include_input=True, redact=["token"])
    log.record(
        make_record(input={"token": "t0k"}, decision="refused", outcome="AgentInvalidInputError")
    )
    assert only_entry(log).input == {"token": "[redacted]"}


def test_redact_without_include_input_records_nothing() -> None:
    log = audit_log(redact=["token"])
    log.record(make_record(input={"token": "t0k"}))
    assert only_entry(log).input is UNSET


# Encoding


def test_encoded_entry_omits_absent_keys() -> None:
    log = audit_log(clock=lambda: 1.5)
    log.record(
        make_record(
            invocation=Invocation(id="call-9", transport="mcp"),
            capability="nope",
            tag=None,
            decision="refused",
            outcome="AgentUnknownCapabilityError",
            input={"x": 1},
        )
    )
    assert msgspec.json.encode(only_entry(log)) == (
        b'{"at":1.5,"invocation":"call-9","transport":"mcp","capability":"nope",'
        b'"decision":"refused","outcome":"AgentUnknownCapabilityError"}'
    )


def test_encoded_entry_keeps_the_design_field_order() -> None:
    log = audit_log(principal=lambda user: user.id, include_input=True, clock=lambda: 2.0)
    log.record(make_record(input={"id": "todo-1"}, outcome="completed"))
    assert msgspec.json.encode(only_entry(log)) == (
        b'{"at":2.0,"invocation":"call-1","transport":"in-app","capability":"delete_todo",'
        b'"tag":"RequestedDeleteTodo","principal":"u-alice","decision":"dispatched",'
        b'"outcome":"completed","input":{"id":"todo-1"}}'
    )


def test_encoded_entry_round_trips() -> None:
    log = audit_log(principal=lambda user: user.id, include_input=True, clock=lambda: 3.0)
    log.record(make_record(input={"id": "todo-1"}))
    log.record(make_record(tag=None, principal=None, principal_resolved=False, decision="refused"))
    for entry in log.entries():
        assert msgspec.json.decode(msgspec.json.encode(entry), type=AuditEntry) == entry


def test_the_model_has_no_field() -> None:
    assert "model" not in {name.lower() for name in AuditEntry.__struct_fields__}
    assert "model" not in {name.lower() for name in AuditRecord.__struct_fields__}


# safe_record


class RaisingSink:
    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.calls = 0

    def record(self, record: AuditRecord, /) -> None:
        self.calls += 1
        raise self.error


class Interrupt(BaseException):
    """A stand-in for KeyboardInterrupt that pytest will not act on."""


def test_safe_record_forwards_to_the_sink() -> None:
    log = audit_log()
    safe_record(log, make_record())
    assert len(log.entries()) == 1


def test_safe_record_without_a_sink_does_nothing() -> None:
    safe_record(None, make_record())


def test_safe_record_swallows_a_raising_sink(caplog: pytest.LogCaptureFixture) -> None:
    sink = RaisingSink(OSError("disk full"))
    with caplog.at_level(logging.ERROR, logger="agentfx.audit"):
        safe_record(sink, make_record())
    assert sink.calls == 1
    assert "RaisingSink raised" in caplog.text


def test_safe_record_lets_base_exceptions_through() -> None:
    sink = RaisingSink(Interrupt())
    with pytest.raises(Interrupt):
        safe_record(sink, make_record())
    assert sink.calls == 1


@pytest.mark.anyio
async def test_safe_record_lets_cancellation_through(anyio_backend: str) -> None:
    cancelled = anyio.get_cancelled_exc_class()
    propagated = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        try:
            await anyio.sleep(1)
        except cancelled as exc:
            try:
                safe_record(RaisingSink(exc), make_record())
            except cancelled:
                propagated = True
            raise
    assert scope.cancelled_caught
    assert propagated
