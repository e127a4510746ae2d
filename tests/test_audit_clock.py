"""The audit log's clock: refused when it cannot work, and never a reason to lose or spoil an entry."""

from __future__ import annotations

import logging
import math
import types
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import msgspec
import pytest

from agentfx.audit import AuditEntry, AuditLog, AuditRecord, audit_log, safe_record
from agentfx.errors import ContractError
from agentfx.invocation import Invocation

RECORD = AuditRecord(Invocation(id="call-1"), "delete_todo", "RequestedDeleteTodo", None, "dispatched", "dispatched", None)
WALL = 7.0
"""What the stand-in wall clock answers in these tests."""


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the audit module's view of the time module, so nothing else runs on a stopped clock.
    monkeypatch.setattr("agentfx.audit.time", types.SimpleNamespace(time=lambda: WALL))


def recorded(log: AuditLog) -> AuditEntry:
    [entry] = log.entries()
    # Every entry encodes, and decodes back as an entry: `at` is a float on the wire too.
    assert msgspec.json.decode(msgspec.json.encode(entry), type=AuditEntry) == entry
    return entry


def test_a_clock_that_is_not_a_function_is_refused_when_the_log_is_made() -> None:
    for clock, what in ((1000.0, "a float"), (None, "a NoneType"), ("now", "a str")):
        with pytest.raises(ContractError) as raised:
            audit_log(clock=clock)  # pyright: ignore[reportArgumentType]
        assert str(raised.value) == (
            f'Cannot make this audit log: "clock" must be a function answering the time in seconds; it is {what}'
        )
        with pytest.raises(ContractError):
            AuditLog(clock=clock)  # pyright: ignore[reportArgumentType]


def test_an_async_clock_is_refused_when_the_log_is_made() -> None:
    async def now() -> float:
        return 0.0

    class Clock:
        async def __call__(self) -> float:
            return 0.0

    for clock, why in ((now, "it is a coroutine function"), (Clock(), "its __call__ is a coroutine function")):
        with pytest.raises(ContractError) as raised:
            audit_log(clock=clock)  # pyright: ignore[reportArgumentType]
        assert str(raised.value) == f'Cannot make this audit log: "clock" must answer synchronously; {why}'


@pytest.mark.parametrize(
    ("answer", "cause"),
    [
        ("now", "answered a str, not a number of seconds"),
        (None, "answered None, not a number of seconds"),
        (True, "answered a bool, not a number of seconds"),
        (math.nan, "answered a float that is not a finite number of seconds"),
        (math.inf, "answered a float that is not a finite number of seconds"),
        (-math.inf, "answered a float that is not a finite number of seconds"),
        (Decimal("NaN"), "answered a Decimal that is not a finite number of seconds"),
        (10**400, "answered an int that is not a finite number of seconds"),
        (1j, "answered a complex that is not a finite number of seconds"),
        ([1.0], "answered a list, not a number of seconds"),
    ],
    ids=["str", "none", "bool", "nan", "inf", "-inf", "decimal-nan", "huge-int", "complex", "list"],
)
def test_a_clock_answering_no_number_still_records_an_encodable_entry(
    answer: object, cause: str, wall: None, caplog: pytest.LogCaptureFixture
) -> None:
    log = audit_log(clock=lambda: answer)  # pyright: ignore[reportArgumentType]
    with caplog.at_level(logging.ERROR, logger="agentfx.audit"):
        log.record(RECORD)
        log.record(RECORD)
    assert [entry.at for entry in log.entries()] == [WALL, WALL]
    log.clear()
    log.record(RECORD)
    assert recorded(log).at == WALL
    # Said, not silent, and once per cause however many entries it stamps.
    assert caplog.text.count(f"audit clock {cause}; entries are stamped with time.time() instead") == 1


def test_each_cause_is_logged_once(wall: None, caplog: pytest.LogCaptureFixture) -> None:
    answers: list[object] = ["now", None, "later", None, math.nan]
    log = audit_log(clock=lambda: answers.pop(0))  # pyright: ignore[reportArgumentType]
    with caplog.at_level(logging.ERROR, logger="agentfx.audit"):
        for _ in range(5):
            log.record(RECORD)
    assert len(log.entries()) == 5
    assert [record.getMessage().split(";")[0] for record in caplog.records] == [
        "audit clock answered a str, not a number of seconds",
        "audit clock answered None, not a number of seconds",
        "audit clock answered a float that is not a finite number of seconds",
    ]


def test_a_clock_answering_an_awaitable_has_it_closed_and_the_entry_recorded(
    wall: None, caplog: pytest.LogCaptureFixture
) -> None:
    made: list[Any] = []

    async def later() -> float:
        return 1.0

    def clock() -> float:
        made.append(later())
        return made[-1]

    log = audit_log(clock=clock)
    with caplog.at_level(logging.ERROR, logger="agentfx.audit"):
        log.record(RECORD)
        log.record(RECORD)
    assert [entry.at for entry in log.entries()] == [WALL, WALL]
    assert all(coroutine.cr_frame is None for coroutine in made)  # closed, so never "never awaited"
    assert caplog.text.count("audit clock answered a coroutine, closed unawaited; it must answer synchronously") == 1


def test_a_clock_that_raises_still_records_the_entry(wall: None, caplog: pytest.LogCaptureFixture) -> None:
    def clock() -> float:
        raise OSError("no time source")

    log = audit_log(clock=clock)
    with caplog.at_level(logging.ERROR, logger="agentfx.audit"):
        safe_record(log, RECORD)
        safe_record(log, RECORD)
    assert [entry.at for entry in log.entries()] == [WALL, WALL]
    assert caplog.text.count("audit clock raised OSError; entries are stamped with time.time() instead") == 1
    assert "no time source" in caplog.text  # with its traceback, once
    assert "audit sink" not in caplog.text  # the log itself did not fail


@pytest.mark.parametrize(
    ("answer", "at"),
    [(1.5, 1.5), (5, 5.0), (-2, -2.0), (Fraction(1, 2), 0.5), (Decimal("2.25"), 2.25)],
)
def test_a_clock_answering_any_finite_number_is_kept_as_a_float(
    answer: object, at: float, caplog: pytest.LogCaptureFixture
) -> None:
    clock: Callable[[], Any] = lambda: answer  # noqa: E731
    log = audit_log(clock=clock)
    with caplog.at_level(logging.ERROR, logger="agentfx.audit"):
        log.record(RECORD)
    entry = recorded(log)
    assert type(entry.at) is float
    assert entry.at == at
    assert caplog.text == ""
