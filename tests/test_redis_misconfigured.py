"""agentfx.redis against namespaces it cannot run as asked: another deploy's types, keys of the wrong kind.

A stored Model this process's types cannot take (it does not decode, or the
fingerprint stored next to it is another set of types') is a state the
process survives: it hands the writer lease back, answers its waiting senders,
keeps serving its copy and leaves the Model alone. A key holding the wrong
kind of value is a misconfiguration no retry mends: the program stops with a
:class:`RedisProgramError` that names the key. Each test runs a real
redis-server (asyncio only: redis-py's client is asyncio-only).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
import msgspec
import pytest
import redis.asyncio
from redis.exceptions import ResponseError

from agentfx.redis import RedisProgram, RedisProgramError, _client, run_program
from agentfx.redis._program import _fingerprint, _server_version  # pyright: ignore[reportPrivateUsage]
from tests.redis_app import Added, Message, Model
from tests.redis_programs import APPLY, LEASE, namespace, running, script, swap_script
from tests.redis_server import RedisServer
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import client
from tests.redis_server import server as server

pytestmark = pytest.mark.anyio



class Wide(msgspec.Struct, frozen=True):
    """A newer deploy's Model: one more field than :class:`Model`."""

    keys: tuple[str, ...] = ()
    total: int = 0
    open: bool = False
    confirmed: tuple[str, ...] = ()
    owner: str = ""


def wide_update(model: Wide, message: Message) -> Wide:
    if isinstance(message, Added):
        return msgspec.structs.replace(model, keys=(*model.keys, message.key), total=model.total + message.n)
    return model




def running_wide(url: str, ns: str, init: Wide | None = None, **options: Any) -> Any:
    options.setdefault("lease", LEASE)
    return run_program(
        url, namespace=ns, init=Wide() if init is None else init, update=wide_update, message_type=Message, **options
    )


async def until(check: Callable[[], Awaitable[bool]], seconds: float = 5) -> None:
    with anyio.fail_after(seconds):
        while not await check():
            await anyio.sleep(0.01)


def records(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if text in record.getMessage()]


# -- a stored Model this process cannot take --------------------------------------


async def test_a_writer_whose_stored_model_does_not_decode_hands_the_lease_back_and_keeps_serving(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    secret = "model-contents-0xfeed"
    unreadable = msgspec.msgpack.encode({"keys": [secret], "total": secret})
    failures: list[RedisProgramError] = []
    async with client(server.url) as raw, running(server.url, ns, apply_timeout=30.0) as copy:
        program: RedisProgram[Model, Message] = copy
        await program.send(Added(key="a"))
        # Another deploy holds the lease and stores a Model this process's types cannot read.
        await raw.set(f"{ns}:writer", "elsewhere", px=60_000)
        await raw.hset(f"{ns}:model", "model", unreadable)
        async with anyio.create_task_group() as senders:

            async def send() -> None:
                try:
                    await program.send(Added(key="queued"))
                except RedisProgramError as failure:
                    failures.append(failure)

            senders.start_soon(send)
            await until(lambda: _inbox_holds(raw, ns, 1))
            # The other deploy goes away: this process takes the lease and finds the Model it cannot read.
            await raw.delete(f"{ns}:writer")
            with anyio.fail_after(2):  # well within apply_timeout: an answer, not a wait
                while not failures:
                    await anyio.sleep(0.01)
        assert "cannot apply Messages on namespace" in str(failures[0]) and f"{ns}:inbox" in str(failures[0])
        # Handed back at once (not held until it expires), nothing written, the Message still queued.
        await until(lambda: _not_held_by(raw, ns, program.token))
        await anyio.sleep(0.5)
        assert not program.is_writer
        assert await raw.hget(f"{ns}:model", "model") == unreadable
        assert await raw.xlen(f"{ns}:inbox") == 1  # the queued one (applied entries are trimmed)
        # It keeps serving its copy, and its block runs on.
        assert program.model == Model(keys=("a",), total=1) and program.version == 1
        # The Model is mended: it takes the lease again and applies the queued Message, once.
        await raw.hset(f"{ns}:model", "model", msgspec.msgpack.encode(Model(keys=("a",), total=1)))
        await until(lambda: _version_at_least(program, 2))
        assert program.model == Model(keys=("a", "queued"), total=2)
        await program.send(Added(key="after"))
        assert program.model.keys == ("a", "queued", "after")
    refusals = records(caplog, "will not write namespace")
    # Said once, naming the key, for all the lease takes it backed off between; never the Model's contents.
    assert len(refusals) == 1 and f"{ns}:model does not decode" in refusals[0].getMessage()
    assert not any(secret in record.getMessage() or record.exc_info for record in caplog.records)
    assert records(caplog, "writes namespace") != []


def _keyspace_events(raw: redis.asyncio.Redis, flags: str) -> Awaitable[object]:
    """``CONFIG SET notify-keyspace-events flags`` (redis-py leaves ``execute_command`` untyped)."""
    command = cast("Callable[..., Awaitable[object]]", getattr(raw, "execute_command"))
    return command("CONFIG", "SET", "notify-keyspace-events", flags)


async def _inbox_holds(raw: redis.asyncio.Redis, ns: str, count: int) -> bool:
    return await raw.xlen(f"{ns}:inbox") >= count


async def _not_held_by(raw: redis.asyncio.Redis, ns: str, token: str) -> bool:
    return await raw.get(f"{ns}:writer") != token.encode()


async def _version_at_least(program: RedisProgram[Any, Any], version: int) -> bool:
    return program.version >= version


async def test_a_process_that_cannot_write_takes_the_lease_seldom(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    async with client(server.url) as raw, running(server.url, ns) as copy:
        await copy.send(Added(key="a"))
        await raw.set(f"{ns}:writer", "elsewhere", px=60_000)
        await raw.hset(f"{ns}:model", "model", b"\xc1")
        # Redis tells of every SET and DEL of the lease: each take and each hand-back.
        await _keyspace_events(raw, "Kg$x")
        events = _client.pubsub(raw)
        try:
            await events.subscribe(f"__keyspace@0__:{ns}:writer")
            await raw.delete(f"{ns}:writer")
            seen: list[bytes] = []
            # Over 1.2 s at a 0.3 s lease, the pauses between takes double from 50 ms.
            with anyio.move_on_after(1.2):
                while True:
                    data = _client.message_data(await _client.next_message(events, timeout=0.1))
                    if data is not None:
                        seen.append(data)
        finally:
            await events.aclose()
            await _keyspace_events(raw, "")
        takes = seen.count(b"set")
        assert 2 <= takes <= 6, seen
        # Each take handed back at once (a DEL, not an expiry), the first DEL being the test's own.
        assert seen.count(b"del") == takes + 1 and b"expired" not in seen
        assert copy.version == 1 and not copy.is_writer
    assert len(records(caplog, "will not write namespace")) == 1


async def test_starting_on_a_model_that_does_not_decode_fails_with_an_error_naming_the_key(server: RedisServer) -> None:
    ns = namespace()
    async with client(server.url) as raw:
        await raw.hset(f"{ns}:model", mapping={"model": msgspec.msgpack.encode({"total": "many"}), "version": 3})
    with pytest.raises(RedisProgramError, match=f"{ns}:model does not decode with this process's Model type") as failure:
        async with running(server.url, ns):
            pass
    assert isinstance(failure.value.__cause__, msgspec.ValidationError)


# -- the types' fingerprint ----------------------------------------------------------


async def test_an_older_deploy_does_not_write_a_newer_ones_model_so_its_fields_survive(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    async with running_wide(server.url, ns, init=Wide(owner="alice")) as new:
        await new.send(Added(key="by-new"))
        async with running(server.url, ns, apply_timeout=3.0) as old:
            # A follower while the newer writer lives: its sends are applied by it.
            await old.send(Added(key="by-old-follower"))
            assert old.model.keys == ("by-new", "by-old-follower")
    async with running(server.url, ns, apply_timeout=3.0) as old:
        # Alone, it must not write: decoding drops `owner`, and storing would lose it for good.
        with pytest.raises(RedisProgramError, match="cannot apply Messages on namespace"):
            await old.send(Added(key="by-old"))
        assert not old.is_writer and old.model.keys == ("by-new", "by-old-follower")
    async with running_wide(server.url, ns) as new:
        # The newer deploy comes back: the field is intact and the queued Message is applied, once.
        await until(lambda: _version_at_least(new, 3))
        assert new.model == Wide(keys=("by-new", "by-old-follower", "by-old"), total=3, owner="alice")
    refusal = records(caplog, "will not write namespace")[0].getMessage()
    assert "types differ from this process's" in refusal and f"HDEL {ns}:model types" in refusal


async def test_a_model_stored_without_a_fingerprint_keeps_working_and_gets_one(server: RedisServer) -> None:
    ns = namespace()
    async with client(server.url) as raw:
        # As the code before fingerprints stored it.
        await raw.hset(
            f"{ns}:model",
            mapping={"model": msgspec.msgpack.encode(Model(keys=("old",), total=1)), "version": 1,
                     "applied": "0-0", "log": "0-0"},
        )
        async with running(server.url, ns) as copy:
            await copy.send(Added(key="new"))
            assert copy.model == Model(keys=("old", "new"), total=2)
        assert await raw.hget(f"{ns}:model", "types") == _fingerprint(Model, Message).encode()


async def test_hdel_of_the_fingerprint_lets_new_types_take_the_model_over(server: RedisServer) -> None:
    ns = namespace()
    async with running(server.url, ns) as old:
        await old.send(Added(key="a"))
    async with client(server.url) as raw:
        # The documented migration: every process with the old types has stopped.
        await raw.hdel(f"{ns}:model", "types")
        async with running_wide(server.url, ns) as new:
            await new.send(Added(key="b"))
            assert new.model == Wide(keys=("a", "b"), total=2)
        assert await raw.hget(f"{ns}:model", "types") == _fingerprint(Wide, Message).encode()


async def test_a_fingerprint_stored_while_this_process_writes_stops_its_writes_in_the_script(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    failures: list[RedisProgramError] = []
    async with client(server.url) as raw, running(server.url, ns, apply_timeout=30.0) as copy:
        program: RedisProgram[Model, Message] = copy
        await program.send(Added(key="a"))
        assert program.is_writer
        # Another deploy's types wrote meanwhile (a lease lost and retaken, say).
        await raw.hset(f"{ns}:model", "types", "0123456789abcdef")
        with anyio.fail_after(5):
            try:
                await program.send(Added(key="refused"))
            except RedisProgramError as failure:
                failures.append(failure)
        assert failures and f"{ns}:inbox" in str(failures[0])
        await until(lambda: _not_held_by(raw, ns, program.token))
        assert program.model == Model(keys=("a",), total=1)
        # Its own fingerprint back: the queued Message is applied, once.
        await raw.hset(f"{ns}:model", "types", _fingerprint(Model, Message))
        await until(lambda: _version_at_least(program, 2))
        assert program.model == Model(keys=("a", "refused"), total=2)
    assert any("another fingerprint was stored while this process wrote" in r.getMessage() for r in caplog.records)


def _fingerprints_elsewhere(module: str, model: str, seeds: tuple[str, ...]) -> set[str]:
    """The fingerprint of ``module.model`` with the test Messages, as processes with these hash seeds compute it."""
    code = (
        "from agentfx.redis._program import _fingerprint\n"
        "from tests.redis_app import Message\n"
        f"from {module} import {model}\n"
        f"print(_fingerprint({model}, Message))\n"
    )
    return {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            timeout=60,
        ).stdout.strip()
        for seed in seeds
    }


def test_the_fingerprint_is_the_same_in_another_process_and_follows_only_what_is_stored() -> None:
    assert _fingerprints_elsewhere("tests.redis_app", "Model", ("12345",)) == {_fingerprint(Model, Message)} != {""}

    class Model2(msgspec.Struct, frozen=True):
        """Another docstring, the same fields."""

        keys: tuple[str, ...] = ()
        total: int = 0
        open: bool = False
        confirmed: tuple[str, ...] = ()

    class Retyped(msgspec.Struct, frozen=True):
        keys: tuple[str, ...] = ()
        total: str = ""
        open: bool = False
        confirmed: tuple[str, ...] = ()

    # A renamed class is another $defs entry; the docstring alone changes nothing.
    Model2.__name__ = Model2.__qualname__ = "Model"
    assert _fingerprint(Model2, Message) == _fingerprint(Model, Message)
    assert _fingerprint(Retyped, Message) != _fingerprint(Model, Message)
    assert _fingerprint(Model, Added) != _fingerprint(Model, Message)
    # A type msgspec cannot describe: no fingerprint, nothing checked.
    assert _fingerprint(object, Message) == ""


# -- keys of the wrong kind ----------------------------------------------------------


async def _replace(raw: redis.asyncio.Redis, key: str) -> None:
    await raw.delete(key)
    if key.endswith(":writer"):
        await raw.rpush(key, "not a lease")
    else:
        await raw.set(key, "oops")


@pytest.mark.parametrize(("name", "kind", "holds"), [
    ("log", "stream", "the log"),
    ("inbox", "stream", "the inbox"),
    ("model", "hash", "the Model"),
    ("writer", "string", "the writer lease"),
])
async def test_a_key_of_the_wrong_type_stops_the_program_with_an_error_naming_it(
    server: RedisServer, caplog: pytest.LogCaptureFixture, name: str, kind: str, holds: str
) -> None:
    ns = namespace()
    key = f"{ns}:{name}"
    actual = "list" if name == "writer" else "string"
    outside: list[BaseException] = []
    stopped: RedisProgramError | None = None
    async with client(server.url) as raw, anyio.create_task_group() as requests:
        try:
            async with running(server.url, ns, apply_timeout=30.0) as copy:
                await copy.send(Added(key="a"))
                # Held elsewhere for a moment, so the next Message waits to be applied.
                await raw.set(f"{ns}:writer", "elsewhere", px=60_000)

                async def send() -> None:
                    # A server's request task, outside the program's task group.
                    try:
                        await copy.send(Added(key="b"))
                    except RedisProgramError as failure:
                        outside.append(failure)

                requests.start_soon(send)
                await until(lambda: _inbox_holds(raw, ns, 1))
                await _replace(raw, key)
                if name != "writer":
                    await raw.delete(f"{ns}:writer")
                with anyio.fail_after(5):
                    await anyio.sleep_forever()
        except RedisProgramError as failure:
            stopped = failure
        if name in ("inbox", "model"):
            # It met the key as the writer: it hands the lease over rather than let it expire.
            assert await raw.get(f"{ns}:writer") is None
        with anyio.fail_after(2):
            while not outside:
                await anyio.sleep(0.01)
    assert stopped is not None, "the program kept running"
    message = str(stopped)
    assert message.startswith(f"{key} is a {actual}, not the {kind} that holds {holds} of namespace {ns!r}")
    assert "delete or rename that key" in message
    assert isinstance(stopped.__cause__, ResponseError)
    # The sender waiting outside is told why, too.
    assert isinstance(outside[0], RedisProgramError) and f"{key} is a {actual}" in str(outside[0])
    # One accurate line; no "retrying" for what no retry mends.
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
    assert len(records(caplog, f"{key} is a {actual}")) == 1
    assert not records(caplog, "retrying")


async def test_an_inbox_of_the_wrong_type_met_by_the_apply_script_stores_nothing(server: RedisServer) -> None:
    # The writer has read the batch; the inbox is replaced before it applies.
    # The script fails on it before writing the log or the Model (Redis undoes
    # nothing), so no version is stored whose commands would never run.
    ns = namespace()
    stopped: RedisProgramError | None = None
    async with client(server.url) as raw:
        try:
            async with running(server.url, ns, apply_timeout=5.0) as copy:
                await copy.send(Added(key="a"))
                apply = script(copy, APPLY)

                async def replaced_first(*args: Any, **kwargs: Any) -> object:
                    await raw.delete(f"{ns}:inbox")
                    await raw.set(f"{ns}:inbox", "oops")
                    return await apply(*args, **kwargs)

                swap_script(copy, APPLY, replaced_first)
                with pytest.raises(RedisProgramError):
                    await copy.send(Added(key="b"))
                with anyio.fail_after(5):
                    await anyio.sleep_forever()
        except RedisProgramError as failure:
            stopped = failure
        assert stopped is not None and str(stopped).startswith(f"{ns}:inbox is a string")
        assert await raw.hget(f"{ns}:model", "version") == b"1"
        assert await raw.xlen(f"{ns}:log") == 1


async def test_starting_on_a_model_key_of_the_wrong_type_fails_with_an_error_naming_it(server: RedisServer) -> None:
    ns = namespace()
    async with client(server.url) as raw:
        await raw.set(f"{ns}:model", "oops")
    with pytest.raises(RedisProgramError, match=f"^{ns}:model is a string, not the hash that holds the Model"):
        async with running(server.url, ns):
            pass


async def test_a_send_onto_an_inbox_of_the_wrong_type_fails_and_stops_the_program_naming_it(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    refused: list[RedisProgramError] = []
    stopped: RedisProgramError | None = None
    async with client(server.url) as raw:
        # Another process writes: this one only queues, so its send is the first to meet the inbox.
        await raw.set(f"{ns}:writer", "elsewhere", px=60_000)
        try:
            async with running(server.url, ns) as copy:
                # After the start, which would refuse it: the send is the first to meet it.
                await raw.set(f"{ns}:inbox", "oops")
                try:
                    await copy.send(Added(key="a"))
                except RedisProgramError as failure:
                    refused.append(failure)
                with anyio.fail_after(5):
                    await anyio.sleep_forever()
        except RedisProgramError as failure:
            stopped = failure
    assert "Redis refused to queue the Message" in str(refused[0])
    assert stopped is not None and str(stopped).startswith(f"{ns}:inbox is a string, not the stream that holds the inbox")
    assert isinstance(stopped.__cause__, ResponseError)
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1


class Loose(msgspec.Struct, frozen=True):
    """Another deploy's Model: its total may be text, which :class:`Model` cannot read."""

    keys: tuple[str, ...] = ()
    total: int | str = 0
    open: bool = False
    confirmed: tuple[str, ...] = ()


def loose_update(model: Loose, message: Message) -> Loose:
    if isinstance(message, Added):
        return msgspec.structs.replace(model, keys=(*model.keys, message.key), total=message.key)
    return model


async def test_a_follower_that_cannot_read_the_writers_models_says_so_once_and_fails_its_sends(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    async with run_program(
        server.url, namespace=ns, init=Loose(), update=loose_update, message_type=Message, lease=LEASE
    ) as writer:
        await until(lambda: _writes(writer))
        async with running(server.url, ns, apply_timeout=3.0) as follower:
            for index in range(5):
                await writer.send(Added(key=f"text{index}"))
            with pytest.raises(RedisProgramError, match="this process cannot decode the Model the writer stored"):
                await follower.send(Added(key="mine"))
            # It saw the versions go by, but not a Model it cannot read.
            assert follower.version == 6 and follower.model == Model()
            assert writer.model.keys[-1] == "mine"
    unreadable = records(caplog, f"of {ns}:log does not decode with this process's types")
    assert len(unreadable) == 1 and not unreadable[0].exc_info


async def _writes(program: RedisProgram[Any, Any]) -> bool:
    return program.is_writer


class Tagged(msgspec.Struct, frozen=True):
    tags: frozenset[str] = frozenset({"alpha", "beta", "gamma", "delta", "epsilon"})
    title: str = ""  # a field named like a keyword the fingerprint leaves out is structure all the same


class Untagged(msgspec.Struct, frozen=True):
    """:class:`Tagged` without its ``title`` field."""

    tags: frozenset[str] = frozenset({"alpha", "beta", "gamma", "delta", "epsilon"})


class Retagged(msgspec.Struct, frozen=True):
    """:class:`Tagged` with another default: a Model that omits defaults reads it back."""

    tags: frozenset[str] = frozenset({"alpha"})
    title: str = ""


def test_a_set_default_listed_in_another_order_in_another_process_is_the_same_fingerprint() -> None:
    seen = _fingerprints_elsewhere("tests.test_redis_misconfigured", "Tagged", ("1", "2", "3", "4"))
    assert seen == {_fingerprint(Tagged, Message)}
    # Named alike, so that only the field tells them apart.
    Untagged.__name__ = Untagged.__qualname__ = "Tagged"
    assert _fingerprint(Tagged, Message) != _fingerprint(Untagged, Message)
    Retagged.__name__ = Retagged.__qualname__ = "Tagged"
    assert _fingerprint(Retagged, Message) != _fingerprint(Tagged, Message)


@pytest.mark.parametrize("reported", ["6.0.16", "5.0.7"])
async def test_a_redis_too_old_for_the_scripts_is_refused_at_the_start_naming_its_version(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch, reported: str
) -> None:
    # Older than 6.2 (XTRIM MINID), every apply would fail and every send time out saying only that no writer applied it.
    async def old(redis: object) -> dict[str, object]:
        return {"redis_version": reported}

    monkeypatch.setattr(_client, "server_info", old)
    ns = namespace()
    major_minor = ".".join(reported.split(".")[:2])
    with pytest.raises(
        RedisProgramError, match=f"^Redis {major_minor} cannot hold namespace '{ns}': agentfx.redis needs Redis 6.2 or newer$"
    ):
        async with running(server.url, ns):
            pass
    async with client(server.url) as raw:
        assert await raw.exists(f"{ns}:model", f"{ns}:writer") == 0


async def test_a_redis_that_will_not_say_its_version_is_not_refused(server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    async def hidden(redis: object) -> dict[str, object]:
        raise ResponseError("unknown command 'INFO'")

    monkeypatch.setattr(_client, "server_info", hidden)
    async with running(server.url, namespace()) as copy:
        await copy.send(Added(key="k"))
        assert copy.model.keys == ("k",)


async def test_the_real_server_passes_the_version_check(server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[dict[str, object]] = []
    real = _client.server_info

    async def recorded(redis: Any) -> dict[str, object]:
        asked.append(await real(redis))
        return asked[-1]

    monkeypatch.setattr(_client, "server_info", recorded)
    async with running(server.url, namespace()) as copy:
        # Asked once, at the start, and this server is new enough.
        assert len(asked) == 1 and isinstance(asked[0].get("redis_version"), str)
        version = _server_version(asked[0]["redis_version"])
        assert version is not None and version >= (6, 2)
        await copy.send(Added(key="k"))
        assert copy.model.keys == ("k",)


async def test_a_command_redis_refuses_is_reported_in_its_own_words(server: RedisServer) -> None:
    # Not a key of the wrong type: a user whose ACL forbids the commands. The
    # words are Redis's (redis-py has taken the error code off them already).
    user = f"limited-{uuid.uuid4().hex[:6]}"
    async with client(server.url) as raw:
        await raw.acl_setuser(user, enabled=True, passwords=["+secret"], keys=["*"], commands=["+ping", "+get"])  # pyright: ignore[reportUnknownMemberType]
    try:
        ns = namespace()
        url = server.url.replace("redis://", f"redis://{user}:secret@", 1)
        with pytest.raises(RedisProgramError) as refused:
            async with running(url, ns):
                pass
        assert str(refused.value) == (
            f"Redis refused to read {ns}:model for namespace '{ns}': "
            "this user has no permissions to run the 'hmget' command"
        )
    finally:
        async with client(server.url) as raw:
            await raw.acl_deluser(user)  # pyright: ignore[reportUnknownMemberType]


@pytest.mark.parametrize(("suffix", "kind", "holds"), [("log", "stream", "the log"), ("inbox", "stream", "the inbox")])
async def test_starting_on_another_key_of_the_wrong_type_fails_before_serving_naming_it(
    server: RedisServer, suffix: str, kind: str, holds: str
) -> None:
    # Not only the Model's key: found at the start, not once serving has begun.
    ns = namespace()
    async with client(server.url) as raw:
        await raw.set(f"{ns}:{suffix}", "oops")
    entered: list[bool] = []
    with pytest.raises(RedisProgramError, match=f"^{ns}:{suffix} is a string, not the {kind} that holds {holds}"):
        async with running(server.url, ns):
            entered.append(True)
    assert entered == []
