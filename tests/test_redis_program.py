"""agentfx.redis's program against a real redis-server: several programs (processes, as far as Redis can tell) on one namespace.

Each program has its own connections, lease token and local copy of the
Model, so two of them in one test are two processes to Redis. The program
runs on asyncio only (redis-py's client is asyncio-only): these tests run on
asyncio, and one checks the clear refusal on trio.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import msgspec
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError as RedisResponseError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from returns.io import IOSuccess

import agentfx
from agentfx.app import App
from agentfx.contract import ContractError
from agentfx.program import Command, Program
from agentfx.redis import RedisProgram, RedisProgramError, program, run_program
from tests.redis_app import Added, Boom, Confirmed, Message, Model, Opened, Requested, app, contract, fold, update
from tests.redis_programs import APPLY, LEASE, SEND, namespace, programs, running, script, swap_script
from tests.redis_server import Link, RedisServer
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import client
from tests.redis_server import server as server






async def settled(*copies: RedisProgram[Model, Message], version: int) -> None:
    with anyio.fail_after(5):
        while any(copy.version < version for copy in copies):
            await anyio.sleep(0.005)


async def writer_among(copies: list[RedisProgram[Model, Message]]) -> RedisProgram[Model, Message]:
    with anyio.fail_after(5):
        while True:
            holders = [copy for copy in copies if copy.is_writer]
            if holders:
                assert len(holders) == 1
                return holders[0]
            await anyio.sleep(0.01)


pytestmark = pytest.mark.anyio


async def test_processes_share_one_model_and_exactly_one_writes(server: RedisServer) -> None:
    async with programs(server.url, namespace(), 3) as copies:
        assert isinstance(copies[0], Program)
        sent: list[Message] = []
        for index in range(30):
            message = Added(key=f"k{index}", n=index)
            sent.append(message)
            await copies[index % 3].send(message)
            # Read-your-writes: send returns once this copy has applied it.
            assert copies[index % 3].model.keys[-1] == f"k{index}"
        await settled(*copies, version=30)
        assert {copy.model for copy in copies} == {fold(sent)}
        assert sum(copy.is_writer for copy in copies) == 1


async def test_a_fresh_program_loads_the_stored_model_not_its_init(server: RedisServer) -> None:
    ns = namespace()
    async with running(server.url, ns) as first:
        await first.send(Added(key="a", n=5))
    async with run_program(
        server.url, namespace=ns, init=Model(total=-1), update=update, message_type=Message, lease=LEASE
    ) as later:
        assert later.model == Model(keys=("a",), total=5)
        assert later.version == 1


async def test_commands_run_once_on_the_writer_and_their_messages_come_back_through_the_inbox(server: RedisServer) -> None:
    async with programs(server.url, namespace(), 2) as copies:
        writer = await writer_among(copies)
        follower = next(copy for copy in copies if copy is not writer)
        confirmed: list[Confirmed] = []
        follower.observe(lambda m: confirmed.append(m) if isinstance(m, Confirmed) else None)
        for index in range(5):
            await follower.send(Requested(key=f"r{index}"))
        await settled(*copies, version=10)
        # Commands run concurrently, so their answers may come back in any order, each once.
        assert sorted(m.key for m in confirmed) == [f"r{index}" for index in range(5)]
        assert writer.model.confirmed == follower.model.confirmed
        assert sorted(writer.model.confirmed) == [f"r{index}" for index in range(5)]


async def test_listeners_run_in_version_order_subscribers_first_and_only_on_change(server: RedisServer) -> None:
    async with programs(server.url, namespace(), 2) as (a, b):
        events: list[tuple[str, object]] = []
        b.subscribe(lambda: events.append(("model", b.model.total)))
        b.observe(lambda m: events.append(("message", m)))
        await a.send(Added(key="x", n=2))
        await a.send(Opened())
        await a.send(Opened())  # update returns the same Model: no subscriber call
        await settled(b, version=3)
        assert events == [
            ("model", 2),
            ("message", Added(key="x", n=2)),
            ("model", 2),
            ("message", Opened()),
            ("message", Opened()),
        ]


async def test_a_listener_that_raises_is_skipped_and_the_others_still_run(server: RedisServer) -> None:
    async with programs(server.url, namespace(), 1) as (a,):
        seen: list[object] = []

        def bad(_message: object) -> None:
            raise RuntimeError("listener bug")

        a.observe(bad)
        a.observe(seen.append)
        await a.send(Added(key="x"))
        await a.send(Added(key="y"))
        assert seen == [Added(key="x"), Added(key="y")]


async def test_a_message_holding_an_integer_past_64_bits_is_refused_unqueued_and_the_program_goes_on(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    # The strict decoder takes any JSON integer, and msgpack holds 64 bits:
    # before, send raised msgspec's OverflowError, and a command's Message
    # holding one ended the whole program with it.
    def big_answer(model: Model, message: Message) -> Model | tuple[Model, list[Command[Message]]]:
        if isinstance(message, Requested):

            async def answer() -> Message:
                return Added(key="big", n=2**64)

            return model, [answer]
        return update(model, message)

    ns = namespace()
    async with run_program(server.url, namespace=ns, init=Model(), update=big_answer, message_type=Message, lease=LEASE) as a:
        with pytest.raises(RedisProgramError) as refused:
            await a.send(Added(key="huge", n=-(2**63) - 1))
        assert str(refused.value) == (
            "The Message was not queued: it holds an integer outside -2**63 to 2**64 - 1, which the inbox (msgpack) cannot store"
        )
        await a.send(Added(key="edge", n=2**63 - 1))
        await a.send(Requested(key="r"))
        await a.send(Added(key="after"))
        assert a.model.keys == ("edge", "after") and a.version == 3
        with anyio.fail_after(5):
            while not any("a command's Message could not be queued; it is lost" in r.getMessage() for r in caplog.records):
                await anyio.sleep(0.01)
        await a.send(Added(key="still"))
        assert a.model.keys == ("edge", "after", "still")


async def test_an_update_that_raises_fails_that_send_and_changes_nothing(server: RedisServer) -> None:
    async with programs(server.url, namespace(), 2) as (a, b):
        await a.send(Added(key="x"))
        with pytest.raises(RedisProgramError, match="update raised while the writer applied this Message"):
            await b.send(Boom())
        await b.send(Added(key="y"))
        await settled(a, b, version=3)
        assert a.model == b.model == Model(keys=("x", "y"), total=2)


async def test_without_a_writer_sends_queue_until_the_inbox_is_full_and_a_new_writer_applies_each_once(
    server: RedisServer,
) -> None:
    ns = namespace()
    async with client(server.url) as raw:
        # Someone else holds the lease: nothing is applied, everything queues.
        await raw.set(f"{ns}:writer", "elsewhere", px=60_000)
        async with programs(server.url, ns, 1, max_pending=3, apply_timeout=0.2) as (a,):
            for key in ("a", "b", "c"):
                with pytest.raises(RedisProgramError, match="no writer applied it within 0.2s; it may still be applied later"):
                    await a.send(Added(key=key))
            with pytest.raises(RedisProgramError, match="already holds 3 Messages waiting for the writer; this one was not queued"):
                await a.send(Added(key="d"))
            assert a.model == Model() and a.version == 0
            await raw.delete(f"{ns}:writer")
            await settled(a, version=3)
            assert a.model.keys == ("a", "b", "c")
            await a.send(Added(key="e"))
            assert a.model.keys == ("a", "b", "c", "e")


async def test_the_inbox_bound_counts_only_messages_waiting_for_the_writer(server: RedisServer) -> None:
    # An applied entry left in the inbox would take a waiting one's room:
    # with room for one, every send after the first would be refused.
    ns = namespace()
    async with programs(server.url, ns, 1, max_pending=1) as (a,), client(server.url) as raw:
        for key in ("a", "b", "c"):
            await a.send(Added(key=key))
            assert await raw.xlen(f"{ns}:inbox") == 0
        assert a.model.keys == ("a", "b", "c")


@pytest.mark.parametrize("stored", [True, False], ids=["stored, reply lost", "lost before it was stored"])
async def test_a_batch_whose_apply_reply_was_lost_runs_its_commands_exactly_once(server: RedisServer, stored: bool) -> None:
    # The connection drops after the apply was sent: either Redis ran it (and
    # only the reply is lost) or it never arrived. Either way the command the
    # batch asked for runs once: not never (nobody asks again once the inbox
    # moved past it), not twice (a batch that was not stored is applied again).
    async with programs(server.url, namespace(), 1) as (a,):
        await writer_among([a])
        apply = script(a, APPLY)
        dropped: list[bool] = []

        async def reply_lost(**kwargs: Any) -> object:
            if not dropped:
                dropped.append(True)
                if stored:
                    await apply(**kwargs)
                raise RedisConnectionError("the connection closed before the reply")
            return await apply(**kwargs)

        swap_script(a, APPLY, reply_lost)
        await a.send(Requested(key="r"))
        with anyio.fail_after(5):
            while not a.model.confirmed:
                await anyio.sleep(0.01)
        await a.send(Added(key="after"))
        assert dropped and a.model.confirmed == ("r",)


async def test_a_landed_batch_runs_its_commands_even_when_the_check_after_it_fails(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The apply is stored, but its reply names a log entry behind this copy's,
    # so the writer checks the log before going on, and Redis is unreachable
    # for that check. The batch landed: its command is owed either way, and
    # nobody would ask for it again (the next read starts past the batch).
    async with programs(server.url, namespace(), 1) as (a,):
        await writer_among([a])
        apply = script(a, APPLY)
        behind: list[bool] = []

        async def reply_behind(**kwargs: Any) -> object:
            logged = await apply(**kwargs)
            if behind:
                return logged
            behind.append(True)
            return b"0-0"

        resync: Any = getattr(RedisProgram, "_resync")
        failed: list[str] = []

        async def unreachable(self: RedisProgram[Any, Any], kind: str, generation: int) -> bool | None:
            if self is a and kind == "check" and behind and not failed:
                failed.append(kind)
                raise RedisConnectionError("the connection closed during the check")
            return await resync(self, kind, generation)

        monkeypatch.setattr(RedisProgram, "_resync", unreachable)
        swap_script(a, APPLY, reply_behind)
        await a.send(Requested(key="r"))
        with anyio.fail_after(5):
            while not a.model.confirmed:
                await anyio.sleep(0.01)
        await a.send(Added(key="after"))
        assert failed == ["check"] and a.model.confirmed == ("r",)


@pytest.mark.parametrize("later", [1, 70], ids=["one version since", "more versions since than a page of the log"])
@pytest.mark.parametrize("stored", [True, False], ids=["stored, reply lost", "lost before it was stored"])
async def test_a_lost_reply_then_a_takeover_still_runs_the_batchs_commands_exactly_once(
    server: RedisServer, stored: bool, later: int
) -> None:
    # As above, but another process takes the lease and stores a later
    # version before the writer reads again: the stored version alone cannot
    # say whether the lost apply landed (and nobody ran its commands) or the
    # new writer applied the batch again (and ran them itself). The log's
    # entry of that version names its writer.
    ns = namespace()
    async with programs(server.url, ns, 2) as copies, client(server.url) as raw:
        first = await writer_among(copies)
        second = copies[1] if first is copies[0] else copies[0]
        apply = script(first, APPLY)
        dropped: list[bool] = []
        taken_over = anyio.Event()

        async def reply_lost(**kwargs: Any) -> object:
            if dropped:
                return await apply(**kwargs)
            dropped.append(True)
            if stored:
                await apply(**kwargs)
            await raw.set(f"{ns}:writer", second.token, px=60_000)
            # Shielded: the first writer's lease renewal notices the takeover and cancels this.
            with anyio.CancelScope(shield=True), anyio.fail_after(5):
                for index in range(later):
                    await second.send(Added(key=f"during{index}"))
            taken_over.set()
            raise RedisConnectionError("the connection closed before the reply")

        swap_script(first, APPLY, reply_lost)
        await first.send(Requested(key="r"))
        with anyio.fail_after(5):
            await taken_over.wait()
            while not first.model.confirmed:
                await anyio.sleep(0.01)
        await second.send(Added(key="after"))
        await settled(first, second, version=second.version)
        assert first.model.confirmed == second.model.confirmed == ("r",)
        assert first.model.keys == (*(f"during{index}" for index in range(later)), "after")


@pytest.mark.parametrize(
    ("log_length", "said"),
    [(10_000, "update raised"), (50, "whether update raised on it is no longer known")],
    ids=["the log holds it", "the log was trimmed past it"],
)
async def test_a_refused_send_whose_reply_comes_back_after_a_flood_of_other_refusals_still_raises(
    server: RedisServer, log_length: int, said: str
) -> None:
    # The log can outrun a send's reply: the copy reads the refusal before
    # the sender knows its entry, and parks it. Other processes' refusals are
    # parked too, a bounded number; more of them before the reply must not
    # turn this refusal into a success. The log says what became of it, or,
    # trimmed past it, that nobody here knows any more.
    async with programs(server.url, namespace(), 2, log_length=log_length) as copies:
        writer = await writer_among(copies)
        sender = copies[1] if writer is copies[0] else copies[0]
        await sender.send(Added(key="a"))
        enqueue = script(sender, SEND)
        flooded = anyio.Event()
        queued = anyio.Event()

        async def reply_held(*args: Any, **kwargs: Any) -> object:
            reply = await enqueue(*args, **kwargs)
            queued.set()
            await flooded.wait()
            return reply

        swap_script(sender, SEND, reply_held)

        async def flood() -> None:
            await queued.wait()
            with anyio.fail_after(20):
                async with anyio.create_task_group() as task_group:
                    for _ in range(300):
                        task_group.start_soon(refused, writer)
                await settled(sender, version=writer.version)
            flooded.set()

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(flood)
            with pytest.raises(RedisProgramError, match=said):
                await sender.send(Boom())
        assert len(getattr(sender, "_failures")) <= 256
        assert sender.model.keys == ("a",)


async def refused(copy: RedisProgram[Model, Message]) -> None:
    with pytest.raises(RedisProgramError, match="update raised"):
        await copy.send(Boom())


async def test_a_stored_version_rewritten_as_no_writer_writes_it_is_refused_not_applied_in_a_loop(
    server: RedisServer,
) -> None:
    # Python's int() reads "1_0", the apply script's tonumber() does not: a
    # writer that took it would be fenced on every apply and try again at once.
    ns = namespace()
    async with programs(server.url, ns, 1, apply_timeout=1.0) as (a,), client(server.url) as raw:
        await writer_among([a])
        await a.send(Added(key="before"))
        await raw.hset(f"{ns}:model", "version", b"1_0")
        apply = script(a, APPLY)
        applies: list[None] = []

        async def counted(*args: Any, **kwargs: Any) -> object:
            applies.append(None)
            return await apply(*args, **kwargs)

        swap_script(a, APPLY, counted)
        with pytest.raises(RedisProgramError, match="holds a version or an inbox id no writer stored"):
            await a.send(Added(key="after"))
        # One fenced apply, then the stored version is read and refused: no busy loop.
        assert len(applies) <= 2
        assert a.model.keys == ("before",)


async def test_a_writer_fenced_on_every_apply_competes_again_at_its_polling_pace_not_at_once(server: RedisServer) -> None:
    # Whatever makes the apply script refuse every batch, the writer must not
    # spin on take the lease, apply, refused, take it again.
    async with programs(server.url, namespace(), 1, apply_timeout=0.6) as (a,):
        await writer_among([a])
        applies: list[None] = []

        async def fenced(*_args: Any, **_kwargs: Any) -> object:
            applies.append(None)
            raise RedisResponseError("AGENTFX_LEASE the lease moved")

        swap_script(a, APPLY, fenced)
        with pytest.raises(RedisProgramError, match="no writer applied it"):
            await a.send(Added(key="fenced"))
        # Polled every quarter lease (75 ms) over 0.6 s: about 8 tries, where a loop would make hundreds.
        assert 1 <= len(applies) <= 20


async def test_a_writer_whose_lease_was_taken_cannot_apply(server: RedisServer) -> None:
    ns = namespace()
    async with programs(server.url, ns, 1, apply_timeout=0.2) as (a,), client(server.url) as raw:
        await writer_among([a])
        await a.send(Added(key="before"))
        # The lease is overwritten (as if it expired and another process took it).
        await raw.set(f"{ns}:writer", "usurper", px=int(LEASE * 2000))
        with pytest.raises(RedisProgramError, match="no writer applied it"):
            await a.send(Added(key="fenced"))
        assert a.model.keys == ("before",)
        # The usurper's lease runs out; a takes it back and applies the queued Message once.
        await settled(a, version=2)
        assert a.model.keys == ("before", "fenced")
        assert await raw.get(f"{ns}:writer") == a.token.encode()


async def test_a_writer_whose_stored_model_moved_under_it_reloads_it_rather_than_overwrite_it(server: RedisServer) -> None:
    # The lease alone does not fence a writer whose stored Model another writer
    # moved on (a stale batch): the atomic apply also checks the version it
    # started from, and the writer reloads instead of overwriting.
    ns = namespace()
    async with programs(server.url, ns, 1, apply_timeout=5) as (a,), client(server.url) as raw:
        await writer_among([a])
        await a.send(Added(key="before"))
        moved = msgspec.structs.replace(a.model, keys=(*a.model.keys, "elsewhere"))
        await raw.hset(f"{ns}:model", mapping={"model": msgspec.msgpack.encode(moved), "version": 2})
        await a.send(Added(key="after"))
        stored, version = await raw.hmget(f"{ns}:model", ["model", "version"])
        assert isinstance(stored, bytes) and isinstance(version, bytes)
        assert msgspec.msgpack.decode(stored, type=Model).keys == ("before", "elsewhere", "after")
        assert int(version) == 3


async def test_leaving_hands_the_lease_over_at_once(server: RedisServer) -> None:
    ns = namespace()
    stop = anyio.Event()

    async def leaves(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        async with running(server.url, ns, lease=30.0) as first:
            await writer_among([first])
            task_status.started()
            await stop.wait()

    async with anyio.create_task_group() as group:
        await group.start(leaves)
        async with running(server.url, ns, lease=30.0) as stays:
            assert not stays.is_writer
            stop.set()
            # A 30 s lease, released on exit: the other takes over within its poll, not after expiry.
            with anyio.fail_after(2):
                while not stays.is_writer:
                    await anyio.sleep(0.01)
            await stays.send(Added(key="after"))
            assert stays.model.keys == ("after",)


async def test_redis_unreachable_fails_sends_keeps_the_model_and_reconnects(server: RedisServer) -> None:
    ns = namespace()
    link = Link(server.port)
    async with anyio.create_task_group() as group:
        await group.start(link.run)
        async with programs(link.url, ns, 1) as (a,):
            await writer_among([a])
            async with running(server.url, ns) as direct:
                await a.send(Added(key="before", n=1))
                link.cut()
                with pytest.raises(RedisProgramError, match="Redis is unreachable; the Message may not have been queued"):
                    await a.send(Added(key="lost"))
                assert a.model == Model(keys=("before",), total=1)
                # Acknowledged while the writer is cut off: the lease moves to a process that can reach Redis.
                await direct.send(Added(key="during", n=2))
                with anyio.fail_after(5):
                    while a.connected:
                        await anyio.sleep(0.01)
                assert a.model == Model(keys=("before",), total=1)
                link.restore()
                await settled(a, version=2)
                assert a.model == direct.model == Model(keys=("before", "during"), total=3)
                await a.send(Added(key="after"))
                assert a.connected and a.model.keys == ("before", "during", "after")
        group.cancel_scope.cancel()


async def test_a_copy_left_behind_a_trimmed_log_reloads_the_model(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    link = Link(server.port)
    async with anyio.create_task_group() as group:
        await group.start(link.run)
        async with running(server.url, ns, log_length=2) as writer:
            await writer_among([writer])
            async with running(link.url, ns, log_length=2) as behind:
                changes: list[int] = []
                behind.subscribe(lambda: changes.append(behind.model.total))
                link.cut()
                for index in range(300):
                    await writer.send(Added(key=f"k{index}"))
                link.restore()
                await settled(behind, version=300)
                assert behind.model == writer.model
                assert changes[-1] == 300
        assert any("was trimmed past version" in record.getMessage() for record in caplog.records)
        group.cancel_scope.cancel()


class _NoInput(msgspec.Struct, frozen=True):
    pass


async def test_an_invocation_keeps_its_snapshot_while_another_process_changes_the_model(server: RedisServer) -> None:
    ns = namespace()
    release = anyio.Event()
    seen: list[int] = []

    async def authorize(request: Any) -> bool:
        seen.append(request.model.total)
        await release.wait()
        return True

    Tally = agentfx.for_model(Model)
    checked = Tally.define(
        messages=Tally.expose(
            Message,
            Tally.variant(
                Added,
                "Add the total seen",
                name="echo",
                input=_NoInput,
                to_message=lambda _, ctx: Added(key="echo", n=ctx.model.total),
                authorize=authorize,
            ),
        )
    )
    factory = program(server.url, namespace=ns, message_type=Message, lease=LEASE)
    async with App(checked, init=Model(), update=update, program=factory).run() as runtime, running(server.url, ns) as other:
        await other.send(Added(key="a", n=10))
        await settled(other, version=1)
        # The serving process's own copy must have caught up too: its snapshot is what the call reads.
        with anyio.fail_after(5):
            while runtime.host.model().total != 10:
                await anyio.sleep(0.005)
        outcome: list[Any] = []
        async with anyio.create_task_group() as group:

            async def call() -> None:
                outcome.append(await runtime.messages.dispatch_unknown("echo", {}))

            group.start_soon(call)
            with anyio.fail_after(5):
                while not seen:
                    await anyio.sleep(0.005)
            await other.send(Added(key="b", n=100))
            with anyio.fail_after(5):
                while runtime.host.model().total != 110:
                    await anyio.sleep(0.005)
            release.set()
        assert isinstance(outcome[0], IOSuccess)
        await settled(other, version=3)
        # The Message was built from the snapshot the invocation read (10), not the newer Model (110).
        assert other.model.keys[-1] == "echo" and other.model.total == 120
        assert seen == [10]


async def test_a_completion_settles_when_another_process_wrote_the_answer(server: RedisServer) -> None:
    ns = namespace()
    factory = program(server.url, namespace=ns, message_type=Message, lease=LEASE)
    log = agentfx.audit_log()
    served = App(contract, init=Model(), update=update, program=factory, audit=log)
    async with running(server.url, ns) as writer:
        await writer_among([writer])
        async with served.program() as follower:
            assert isinstance(follower, RedisProgram) and not follower.is_writer
            runtime = served.bind(follower)
            result = await runtime.messages.call(Requested, {"key": "q"})
            assert result.completion is not None and result.completion.status == "completed"
            assert result.completion.message == Confirmed(key="q", by=result.completion.message.by)
            assert writer.model.confirmed == ("q",)
    assert [(e.capability, e.decision, e.outcome) for e in log.entries()] == [("request", "dispatched", "completed")]


async def test_a_send_that_fails_is_a_host_defect_audited_unknown(server: RedisServer) -> None:
    ns = namespace()
    link = Link(server.port)
    log = agentfx.audit_log()
    async with anyio.create_task_group() as group:
        await group.start(link.run)
        factory = program(link.url, namespace=ns, message_type=Message, lease=LEASE)
        async with app.run(program=factory, audit=log) as runtime:
            await runtime.messages.call(Added, {"key": "ok"})
            link.cut()
            with pytest.raises(RedisProgramError):
                await runtime.messages.dispatch(Added, {"key": "lost"})
            with pytest.raises(RedisProgramError):
                await runtime.messages.call(Added, {"key": "lost again"})
            assert runtime.host.model().keys == ("ok",)
            link.restore()
        group.cancel_scope.cancel()
    assert [(e.capability, e.decision, e.outcome) for e in log.entries()] == [
        ("add", "dispatched", "dispatched"),
        ("add", "unknown", "AgentDefect"),
        ("add", "unknown", "AgentDefect"),
    ]


async def test_app_run_takes_a_program_factory_and_the_app_keeps_its_own(server: RedisServer) -> None:
    ns = namespace()
    factory = program(server.url, namespace=ns, message_type=Message, lease=LEASE)
    async with app.run(program=factory) as on_redis:
        await on_redis.messages.call(Added, {"key": "shared"})
    async with app.run() as in_process:
        assert in_process.host.model() == Model()
    shared = App(contract, init=Model(), update=update, program=factory)
    async with shared.run() as again, shared.program() as direct:
        assert again.host.model().keys == ("shared",)
        assert isinstance(direct, RedisProgram)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sends=st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from(["add", "open", "request", "boom"]), st.integers(-3, 3)),
        min_size=1,
        max_size=12,
    )
)
def test_every_process_sees_every_message_in_one_version_order_with_the_model_it_made(
    server: RedisServer, sends: list[tuple[int, str, int]]
) -> None:
    def message(kind: str, n: int, index: int) -> Message:
        match kind:
            case "add":
                return Added(key=f"k{index}", n=n)
            case "open":
                return Opened()
            case "request":
                return Requested(key=f"r{index}")
            case _:
                return Boom()

    async def scenario() -> None:
        ns = namespace()
        async with programs(server.url, ns, 3) as copies:
            seen: list[list[tuple[Message, Model]]] = [[] for _ in copies]
            for copy, log in zip(copies, seen, strict=True):
                copy.observe(lambda m, copy=copy, log=log: log.append((m, copy.model)))

            async def send(index: int, target: int, kind: str, n: int) -> None:
                try:
                    await copies[target].send(message(kind, n, index))
                except RedisProgramError:
                    assert kind == "boom"

            async with anyio.create_task_group() as group:
                for index, (target, kind, n) in enumerate(sends):
                    group.start_soon(send, index, target, kind, n)
            expected_versions = len(sends) + sum(kind == "request" for _, kind, _ in sends)
            await settled(*copies, version=expected_versions)
            # A Message update refused is applied as a failure: no observer hears it.
            observed = expected_versions - sum(kind == "boom" for _, kind, _ in sends)
            assert [len(log) for log in seen] == [observed] * 3
            # One order everywhere, and each observer saw the Model that order makes.
            assert seen[0] == seen[1] == seen[2]
            order = [m for m, _ in seen[0]]
            for position, (_, model) in enumerate(seen[0]):
                assert model == fold(order[: position + 1])
            assert sorted(m.key for m in order if isinstance(m, Added)) == sorted(
                f"k{index}" for index, (_, kind, _) in enumerate(sends) if kind == "add"
            )

    anyio.run(scenario, backend="asyncio")


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ({"namespace": ""}, "namespace must be a non-empty string"),
        ({"namespace": 5}, "namespace must be a non-empty string without spaces, got 5"),
        ({"lease": 0}, "The writer lease must be a positive number of seconds"),
        ({"lease": "5"}, "The writer lease must be a positive number of seconds, at most a day, got '5'"),
        ({"lease": True}, "The writer lease must be a positive number of seconds"),
        ({"apply_timeout": float("inf")}, "apply_timeout must be a positive number of seconds"),
        ({"apply_timeout": None}, "apply_timeout must be a positive number of seconds"),
        ({"lease": 10**400}, "The writer lease must be a positive number of seconds, at most a day"),
        ({"lease": 1e300}, "The writer lease must be a positive number of seconds, at most a day"),
        ({"max_pending": 2.5}, "max_pending must be an integer of at least 1, got 2.5"),
        ({"max_pending": True}, "max_pending must be an integer of at least 1"),
        ({"log_length": 0}, "log_length must be an integer of at least 1"),
        ({"log_bytes": 0}, "log_bytes must be an integer of at least 1"),
        ({"log_bytes": 2.5}, "log_bytes must be an integer of at least 1, got 2.5"),
        ({"message_type": None}, "message_type is the Message union"),
        ({"message_type": object()}, "message_type must be a type msgspec can decode"),
        ({"model_type": "Model"}, "model_type must be a type msgspec can decode"),
    ],
    ids=repr,
)
async def test_programmer_mistakes_are_contract_errors(server: RedisServer, options: dict[str, Any], refusal: str) -> None:
    # Refused when the factory is made and when a program is run, before
    # anything reaches Redis: each would otherwise fail later, most of them
    # on every send (a message type msgspec cannot decode, a lease of "5").
    arguments: dict[str, Any] = {"namespace": "x", "message_type": Message, **options}
    with pytest.raises(ContractError) as made:
        program(server.url, **arguments)
    assert refusal in str(made.value)
    with pytest.raises(ContractError) as ran:
        async with run_program(server.url, init=Model(), update=update, **arguments):
            pass
    assert refusal in str(ran.value)


async def test_durations_may_be_any_real_number_of_seconds(server: RedisServer) -> None:
    from decimal import Decimal
    from fractions import Fraction

    for lease, apply_timeout in ((Fraction(1, 2), Decimal("5")), (Decimal("0.5"), Fraction(5))):
        async with running(server.url, namespace(), lease=lease, apply_timeout=apply_timeout) as copy:
            await copy.send(Added(key="k"))
            assert copy.model.keys == ("k",)


def test_the_factory_repr_never_shows_the_url() -> None:
    factory = program("redis://:hunter2@127.0.0.1:1/0", namespace="shop", message_type=Message)
    assert "hunter2" not in repr(factory) and "shop" in repr(factory)


def test_the_program_refuses_to_run_on_trio(server: RedisServer) -> None:
    async def scenario() -> None:
        async with running(server.url, namespace()):
            pass

    with pytest.raises(RuntimeError, match="agentfx.redis runs on asyncio only"):
        anyio.run(scenario, backend="trio")


async def test_starting_without_redis_fails_at_once() -> None:
    with RedisServerGone() as url, pytest.raises(RedisConnectionError):
        async with running(url, namespace()):
            pass


class RedisServerGone:
    """A loopback URL nothing listens on."""

    def __enter__(self) -> str:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        return f"redis://127.0.0.1:{port}/0"

    def __exit__(self, *_: object) -> None:
        return None


async def test_the_readme_example_serves_the_todo_app_on_redis(server: RedisServer) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## One Model, many processes (Redis)", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None
    ns = namespace()
    code = found.group(1).replace("redis://127.0.0.1:6379/0", server.url).replace('namespace="todo"', f'namespace="{ns}"')
    scope: dict[str, Any] = {"__name__": "readme"}
    exec(compile(code, "README.md", "exec"), scope)
    readme_app: App[Any, Any, Any] = scope["app"]
    async with readme_app.run() as first, readme_app.run() as second:
        result = await first.messages.call("create_todo", {"title": "shared"})
        assert result.completion is not None and result.completion.status == "completed"
        with anyio.fail_after(5):
            while [todo.title for todo in second.host.model().todos][-1:] != ["shared"]:
                await anyio.sleep(0.01)


async def test_a_stopped_program_refuses_to_send_and_leaves_no_listener_or_lease(server: RedisServer) -> None:
    ns = namespace()
    async with running(server.url, ns) as stopped:
        await writer_among([stopped])
        unsubscribe = stopped.subscribe(lambda: None)
        unsubscribe()
        assert stopped.listener_count == 0
    with pytest.raises(RuntimeError, match="the program has stopped"):
        await stopped.send(Added(key="late"))
    assert "stopped" in repr(stopped)
    async with client(server.url) as raw:
        assert await raw.get(f"{ns}:writer") is None


async def test_a_malformed_log_entry_is_skipped_without_its_text_and_the_copies_keep_tailing(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    secret = "not-for-the-log-0xfeed"
    async with programs(server.url, ns, 2) as copies:
        await copies[0].send(Added(key="before"))
        async with client(server.url) as raw:
            # Not written by any writer: no version, a version that is not a number, a bad inbox id.
            await raw.xadd(f"{ns}:log", {"junk": secret})
            await raw.xadd(f"{ns}:log", {"v": secret, "i": "1-0", "f": "c", "m": secret})
            await raw.xadd(f"{ns}:log", {"v": "2", "i": secret, "f": "u", "m": b""})
        await copies[1].send(Added(key="after"))
        await settled(*copies, version=2)
        assert all(copy.model.keys == ("before", "after") for copy in copies)
    assert any("malformed" in record.getMessage() for record in caplog.records)
    assert not any(secret in record.getMessage() or record.exc_info for record in caplog.records if "malformed" in record.getMessage())


async def test_after_redis_lost_its_data_the_copies_reload_rather_than_ignore_the_lower_versions(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    async with programs(server.url, ns, 2, apply_timeout=3.0) as copies:
        for index in range(3):
            await copies[index % 2].send(Added(key=f"k{index}"))
        await settled(*copies, version=3)
        async with client(server.url) as raw:
            # As a restart without persistence (or from an older snapshot) leaves it.
            for key in ("inbox", "writer", "model", "log"):
                await raw.delete(f"{ns}:{key}")
        for copy in copies:
            # The first Message after the loss finds the copy's history gone: applied, or an honest "unknown".
            try:
                await copy.send(Added(key="first"))
            except RedisProgramError as failure:
                assert "Redis lost data" in str(failure)
        for copy in copies:
            await copy.send(Added(key="then"))
        with anyio.fail_after(5):
            while copies[0].version != copies[1].version:
                await anyio.sleep(0.005)
        assert copies[0].model == copies[1].model
        assert copies[0].model.total == copies[0].version and copies[0].model.keys[-2:] == ("then", "then")
    # The loss was seen for what it is, not taken for a trimmed log.
    assert any("went back past" in record.getMessage() for record in caplog.records)


async def test_a_copy_that_cannot_reload_the_model_keeps_running_and_backs_off(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    async with running(server.url, ns) as copy:
        await copy.send(Added(key="a"))
        async with client(server.url) as raw:
            # A Model this process's types cannot read (a newer deploy's, say), and a log that skips ahead to it.
            await raw.hset(f"{ns}:model", mapping={"model": b"\xc1not msgpack", "version": 5})
            await raw.xadd(f"{ns}:log", {"v": "5", "i": "1-0", "f": "u", "m": b""})
        await anyio.sleep(1.2)
        assert copy.version == 1 and copy.model.keys == ("a",)
    refusals = [record for record in caplog.records if "does not decode" in record.getMessage()]
    # Pauses that double from 50 ms: a handful of reloads in 1.2 s, not one every 50 ms.
    assert 1 <= len(refusals) <= 6, len(refusals)


async def test_a_send_waiting_for_its_apply_when_the_program_stops_is_told_at_once(server: RedisServer) -> None:
    ns = namespace()
    failures: list[str] = []
    async with client(server.url) as raw:
        # Someone else holds the lease: the Message is queued and waits for a writer.
        await raw.set(f"{ns}:writer", "elsewhere", px=60_000)
        async with anyio.create_task_group() as senders:
            async with running(server.url, ns, apply_timeout=30.0) as stopping:

                async def send() -> None:
                    try:
                        await stopping.send(Added(key="late"))
                    except RedisProgramError as failure:
                        failures.append(str(failure))

                senders.start_soon(send)
                with anyio.fail_after(5):
                    while not await raw.xlen(f"{ns}:inbox"):
                        await anyio.sleep(0.005)
            with anyio.fail_after(2):
                while not failures:
                    await anyio.sleep(0.005)
    assert failures == ["The program stopped before the Message was applied; it may still be applied by another process"]


async def test_an_entry_out_of_version_order_is_skipped_after_one_reload(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    async with running(server.url, ns) as copy:
        await copy.send(Added(key="a"))
        await copy.send(Added(key="b"))
        async with client(server.url) as raw:
            # Well formed, but at versions no writer would append now: behind, and far ahead.
            await raw.xadd(f"{ns}:log", {"v": "1", "i": "1-0", "f": "u", "m": b""})
            await raw.xadd(f"{ns}:log", {"v": "999", "i": "1-0", "f": "u", "m": b""})
        await copy.send(Added(key="c"))
        await copy.send(Added(key="d"))
        assert copy.version == 4 and copy.model.keys == ("a", "b", "c", "d")
    # One reload each, not one per read of the same entry; and not taken for lost data (the stored Model is not behind).
    messages = [record.getMessage() for record in caplog.records]
    assert len([m for m in messages if "holds an entry behind version" in m]) == 1
    assert len([m for m in messages if "was trimmed past version" in m]) <= 1
    assert not any("went back past" in m for m in messages)


async def test_a_writer_whose_connection_blipped_resumes_under_its_own_lease_rather_than_wait_it_out(
    server: RedisServer,
) -> None:
    ns = namespace()
    link = Link(server.port)
    async with anyio.create_task_group() as group:
        await group.start(link.run)
        # A 30 s lease: waiting out its own lease would outlast the 3 s this send may take.
        async with programs(link.url, ns, 1, lease=30.0, apply_timeout=3.0) as (writer,):
            await writer_among([writer])
            await writer.send(Added(key="before"))
            link.cut()
            with anyio.fail_after(5):
                while writer.is_writer or writer.connected:
                    await anyio.sleep(0.01)
            await anyio.sleep(0.1)
            link.restore()
            async with client(link.url) as through:
                with anyio.fail_after(5):
                    while True:
                        try:
                            await through.exists("ping")
                            break
                        except RedisConnectionError:
                            await anyio.sleep(0.01)
            for _attempt in range(3):
                try:
                    await writer.send(Added(key="after"))
                    break
                except RedisProgramError as failure:
                    # A pooled connection the cut closed may fail one send (it is never retried:
                    # it may have been queued); waiting out the lease would fail it as not applied.
                    assert "Redis is unreachable" in str(failure)
            assert writer.is_writer and writer.model.keys[:2] == ("before", "after")
        group.cancel_scope.cancel()
