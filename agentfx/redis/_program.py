"""The reference program on Redis: one Model shared by many processes, one writer at a time.

This layer owns the keys of one namespace and what happens to them:

- ``<ns>:inbox``, a stream: :meth:`RedisProgram.send` appends the
  msgspec-encoded Message (refused when :data:`MAX_PENDING` are waiting);
- ``<ns>:writer``, the lease (``SET NX PX``, renewed, and kept by its holder
  across a reconnect): exactly one process holds it, reads the inbox, runs
  ``update`` and starts the commands;
- ``<ns>:model``, a hash with the Model, its version, the last applied inbox
  id, the log id of that version, the lease token of the writer that stored
  it, the fingerprint of the types that wrote it (a process whose Model or
  Message types differ does not write), the id of its history
  (``epoch``: a new one whenever Redis holds no Model, set by the first send
  or writer to find none) and the inbox ids of the last 256 Messages
  ``update`` refused (``failed``: a sender whose log entry was trimmed away
  still learns it);
- ``<ns>:log``, a stream of ``(version, inbox id, message, Model)``, the
  Model only where the Message changed it; the last entry of each batch also
  names the writer that stored it. It is capped by entries
  (:data:`LOG_LENGTH`) and by bytes (:data:`LOG_BYTES`): a large Model is
  kept in fewer versions, never in ten thousand.

The writer applies a batch of inbox entries in one Lua script that checks it
still holds the lease and that the version has not moved, stores the Model,
the version and the last applied inbox id, appends one log entry per Message,
trims the log and what the inbox no longer needs: all of it or nothing. A
batch holds at most 256 Messages and stops once its Messages and Models pass
about 8 MiB, or a quarter of the log's bytes (a single larger one goes
alone), so a large Model costs the writer a few copies of itself per batch,
not hundreds. ``update`` runs synchronously, so nothing renews the lease
during a batch: it also stops once a third of the lease has passed since the
lease was last renewed (each apply renews it), so a slow ``update`` makes
smaller batches instead of losing the lease on every one, and the writer
keeps applying as long as one ``update`` takes well under the lease. The
writer trims the log by the sizes of the entries it appended; entries
another writer left are counted as large as the largest this writer
appended. A writer that dies mid-batch leaves the inbox where the last
applied id says, so the next writer resumes there and nothing is applied
twice or lost.

Every process, the writer included, keeps a local copy of the Model by tailing
the log, so :attr:`~agentfx.program.Program.model` stays synchronous and
immutable, and notifies its subscribers and observers in version order: a
completion contract works whichever process took the call.

Redis may lose what it held: restarted without persistence, flushed, or
gone back to an older copy. What it lost is lost, and no process writes its
copy back. Every process compares its copy with what Redis holds on
reconnecting, on every quiet read of the log (a third of the lease without
an entry), whenever it takes the writer lease, when the log's versions go
back and when the writer's log ids do. When Redis no longer holds the
history the copy follows (another history id, no Model, a lower version, or
a log id behind the copy's), the process logs one warning, takes the Model
Redis holds (``init`` when it holds none) and calls its subscribers once;
observers are not called, as no Message was applied. When that history is
one the copy has read nothing of and its log still starts at its first
version (Messages sent since a flush or an empty restart), the copy takes
``init`` at version 0 instead and reads that log from its start: its
observers hear each Message of the history Redis holds, in version order,
as every other copy's do. ``version`` is the
stored history's: a subscriber sees it go down with the reload (to 0 after
an empty restart), and every process agrees on it again. A sender waiting
across the reset learns what became of its Message: applied in what Redis
holds (``send`` returns, or raises as ``update`` did), still queued there
(it waits on), or queued in what Redis lost (``send`` raises at once, saying
it will not be applied: send it again if it still should be). A Message sent
after the reset joins what Redis holds and is applied once, its sender told
so. A call waiting for a completion across the reset sees the reloaded Model
(a state completion settles if it holds there) and otherwise waits for its
answer until its own timeout: a command the lost history started still
sends its Message, into what Redis holds now.

A key of the namespace holding the wrong kind of value (a string where the
log's stream should be, say) is a misconfiguration no retry mends: the
program stops with a :class:`RedisProgramError` naming the key. A refusal
that says what Redis is doing rather than what it holds (``BUSY`` while
another client's script runs, ``LOADING``, a failover's ``READONLY``) is
retried with backoff, as a lost connection is. So does a
key of the right kind that agentfx did not write (a hash with fields no
writer stores, a stream of other entries, a lease that never expires),
found at the start: the namespace is another program's, and agentfx
neither consumes nor writes it. A stored
Model this process's types cannot take (another deploy's) is not: the process
keeps serving its copy and leaves the writing to processes that can.

It deliberately knows nothing of contracts, dispatch or MCP: it is a
:class:`~agentfx.program.Program` (same ``model``, ``send``, ``observe``,
``subscribe``, ``host``) so every adapter works unchanged. It runs on asyncio
only, because redis-py's client is asyncio-only.
"""

from __future__ import annotations

import asyncio
import decimal
import enum
import hashlib
import logging
import math
import numbers
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeGuard, TypeVar, cast

import anyio
import msgspec
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

from ..app import ProgramFactory
from ..contract import ContractError
from ..program import Command, Commands, Program, _as_pair, _raise_bare  # pyright: ignore[reportPrivateUsage]
from ..schema import json_schema_components
from . import _client

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = [
    "DEFAULT_LEASE",
    "LOG_BYTES",
    "LOG_LENGTH",
    "MAX_PENDING",
    "RedisProgram",
    "RedisProgramError",
    "program",
    "run_program",
]

_logger = logging.getLogger("agentfx.redis")

M = TypeVar("M")
Msg = TypeVar("Msg")

DEFAULT_LEASE = 5.0
"""Seconds a writer lease lasts unless renewed; a dead writer is replaced within twice this."""

MAX_PENDING = 10_000
"""Messages the inbox holds before :meth:`RedisProgram.send` refuses another."""

LOG_LENGTH = 10_000
"""Roughly how many versions ``<ns>:log`` keeps; a copy further behind reloads the Model."""

LOG_BYTES = 64 * 1024 * 1024
"""Roughly how many bytes of Messages and Models ``<ns>:log`` keeps (64 MiB), whatever :data:`LOG_LENGTH` allows.

It counts the encoded Messages and Models; Redis takes somewhat more to
hold them (about 80 MB for 64 MiB of 1 MB Models). A 1 MB Model is kept in
about 64 versions. The log keeps at least 8 entries (and the whole batch just
applied) however large they are, so a copy a few versions behind still
catches up from the log; one further behind reloads the Model, as when the
log was trimmed by length.
"""

_BATCH = 256
_BATCH_BYTES = 8 * 1024 * 1024
"""Roughly the most bytes of Messages and Models one apply (and of Messages one queueing call) carries.

An apply carries at most a quarter of ``log_bytes`` when that is less. The
batch stops once it passes its budget; a single larger Message or Model goes alone.
"""
_LOG_MIN = 8
"""The fewest entries the log keeps for its byte bound, however large they are."""
_ENTRY_BYTES = 64
"""Roughly what a log entry takes beyond its Message and Model: its ids, version, flag and field names."""
_LOG_PAGE = 64
_REFUSAL_MAX = 200
_BACKOFF = (0.05, 2.0)
_CHANGED, _UNCHANGED, _FAILED = b"c", b"u", b"x"

# One call queues a whole batch of sends (group commit): ARGV[1] is the
# bound, ARGV[2] a fresh history id, then one Message per argument. It
# returns the history the Messages joined (the stored one, or ARGV[2] when
# Redis holds none: a fresh namespace, or one Redis lost), then each entry
# id, or nil once the inbox is full. XLEN counts only entries waiting for the
# writer: the apply trims every entry up to and including the last one it
# applied. Both keys are read before anything is written.
_SEND = """
local room = tonumber(ARGV[1]) - redis.call('XLEN', KEYS[1])
local history = redis.call('HGET', KEYS[2], 'epoch')
if not history then
  history = ARGV[2]
  redis.call('HSET', KEYS[2], 'epoch', history)
end
local ids = {history}
for k = 3, #ARGV do
  if room > 0 then
    ids[#ids + 1] = redis.call('XADD', KEYS[1], '*', 'm', ARGV[k])
    room = room - 1
  else
    ids[#ids + 1] = false
  end
end
return ids
"""

# What a copy compares itself with, in one read: KEYS model, log, inbox;
# ARGV[1] '1' to read the Model too, then inbox ids to look for. Returns the
# stored version, log id, history and last applied inbox id, the Model (or
# whether there is one), the id of the log's last entry, the id and version
# of its first entry (read with the Model only), then 1 or 0 per inbox id:
# whether it still waits in the inbox.
_STATE = """
local h = redis.call('HMGET', KEYS[1], 'version', 'log', 'epoch', 'applied', 'failed')
local model
local first = false
local first_version = false
if ARGV[1] == '1' then
  model = redis.call('HGET', KEYS[1], 'model')
  local entry = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1]
  if entry then
    first = entry[1]
    for k = 1, #entry[2], 2 do
      if entry[2][k] == 'v' then first_version = entry[2][k + 1] end
    end
  end
else
  model = redis.call('HEXISTS', KEYS[1], 'model')
end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
local reply = {h[1], h[2], h[3], h[4], model, last and last[1] or false, first, first_version, h[5]}
for k = 2, #ARGV do
  reply[#reply + 1] = #redis.call('XRANGE', KEYS[3], ARGV[k], ARGV[k], 'COUNT', 1)
end
return reply
"""

# KEYS: writer, model, log, inbox. ARGV: token, lease ms, how many entries
# the log keeps (the writer counts them by bytes, _LogSizes), base version,
# entry count, types fingerprint (empty: none), history id, then per entry:
# inbox id, flag, message, Model (empty unless the flag says the Model
# changed). Every key is read before anything is written, so a key of the
# wrong type fails the script before it changes anything.
_APPLY = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('AGENTFX_LEASE lost') end
-- Read only to fail here, before any write, if either stream is of the wrong type.
redis.call('XLEN', KEYS[3])
redis.call('XLEN', KEYS[4])
local version = tonumber(redis.call('HGET', KEYS[2], 'version') or '0')
if version ~= tonumber(ARGV[4]) then return redis.error_reply('AGENTFX_VERSION moved') end
if redis.call('HGET', KEYS[2], 'epoch') ~= ARGV[7] then return redis.error_reply('AGENTFX_VERSION another history') end
local types = redis.call('HGET', KEYS[2], 'types')
if types and ARGV[6] ~= '' and types ~= ARGV[6] then return redis.error_reply('AGENTFX_TYPES differ') end
local model = false
local logid = false
local last = false
local count = tonumber(ARGV[5])
local failed = {}
for k = 0, count - 1 do
  local b = 8 + 4 * k
  version = version + 1
  local fields = {'v', version, 'i', ARGV[b], 'f', ARGV[b + 1], 'm', ARGV[b + 2]}
  if ARGV[b + 1] == 'x' then failed[#failed + 1] = ARGV[b] end
  if ARGV[b + 1] == 'c' then
    model = ARGV[b + 3]
    fields[#fields + 1] = 's'
    fields[#fields + 1] = model
  end
  if k == count - 1 then
    -- The batch's last entry names its writer: a writer whose reply was lost reads it to learn whether its apply landed.
    fields[#fields + 1] = 'w'
    fields[#fields + 1] = ARGV[1]
  end
  logid = redis.call('XADD', KEYS[3], '*', unpack(fields))
  last = ARGV[b]
end
-- Once, after the batch: the count keeps this batch's entries, so no copy misses them.
redis.call('XTRIM', KEYS[3], 'MAXLEN', '~', ARGV[3])
if model then redis.call('HSET', KEYS[2], 'model', model) end
redis.call('HSET', KEYS[2], 'version', version, 'applied', last, 'log', logid, 'by', ARGV[1])
if ARGV[6] ~= '' and not types then redis.call('HSET', KEYS[2], 'types', ARGV[6]) end
if #failed > 0 then
  -- The inbox ids update refused, the newest 256: a sender whose log entry was trimmed away still learns it.
  local kept = {}
  local before = redis.call('HGET', KEYS[2], 'failed')
  if before then for id in string.gmatch(before, '%S+') do kept[#kept + 1] = id end end
  for _, id in ipairs(failed) do kept[#kept + 1] = id end
  redis.call('HSET', KEYS[2], 'failed', table.concat(kept, ' ', math.max(1, #kept - 255), #kept))
end
-- MINID keeps the id it is given, so that one goes after it: no applied entry
-- takes a waiting one's room. No arithmetic on the id: Lua's numbers are
-- doubles, and a sequence past 2^53 (anyone may XADD one) would be no id at
-- all, failing the script after it stored the batch (Redis undoes nothing).
redis.call('XTRIM', KEYS[4], 'MINID', last)
redis.call('XDEL', KEYS[4], last)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return logid
"""

# Take the lease, or keep it when it is still this process's own: a writer
# that stopped on a lost connection resumes at once instead of waiting its
# own lease out. Fencing stays the apply script's (token and version).
_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisProgramError(RuntimeError):
    """:meth:`RedisProgram.send` could not see its Message applied, or the program cannot run on its namespace.

    From ``send``, the pipeline treats it like any exception from
    ``host.dispatch``: a defect, audited with decision ``unknown``. From a
    :func:`run_program` block, the program stopped (or did not start) because
    a key of the namespace is not what it keeps there: the message names the
    key and what to fix. Either way it names what went wrong, never the
    Message's or the Model's contents.
    """


class _LeaseLost(Exception):
    pass


class _Refused(Exception):
    """This process must not write the namespace: the stored Model is not its types'."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fix = fix


def _fingerprint(model_type: object, message_type: object) -> str:
    """A digest of the Model and Message types, the same in every process that runs the same types.

    Derived from the JSON schema of both (set defaults in a stable order,
    as agentfx's schemas have them: msgspec lists them in hash order, which
    differs from process to process), without titles, docstrings and
    examples, which do not change what is stored; defaults do (a Model that
    omits them reads them back). Empty when msgspec cannot describe a type
    (then nothing is checked).

    >>> _fingerprint(int, str) == _fingerprint(int, str) != _fingerprint(str, str)
    True
    """
    try:
        schemas, components = json_schema_components((model_type, message_type))
    except (TypeError, ValueError):
        return ""
    described = msgspec.json.encode(_structure({"types": schemas, "$defs": components}), order="sorted")
    return hashlib.sha256(described).hexdigest()[:16]


_NOT_STRUCTURE = frozenset(("title", "description", "examples"))
"""Schema keywords that say nothing of what a stored value holds."""

_NAMING = frozenset(("properties", "$defs", "patternProperties", "dependentSchemas"))
"""Schema keywords whose keys are names (of properties, definitions), each mapping to a schema."""


def _structure(node: object, *, names: bool = False) -> object:
    # Keywords are dropped from a schema, never from a mapping of names: a
    # property may be called "default" or "title".
    if isinstance(node, dict):
        schema = cast("dict[str, object]", node)
        if names:
            return {key: _structure(value) for key, value in schema.items()}
        return {
            key: _structure(value, names=key in _NAMING)
            for key, value in schema.items()
            if key not in _NOT_STRUCTURE
        }
    if isinstance(node, list):
        return [_structure(value) for value in cast("list[object]", node)]
    return node


_PASSING = ("BUSY", "LOADING", "MASTERDOWN", "TRYAGAIN", "UNBLOCKED", "OOM", "CLUSTERDOWN", "READONLY")
"""The first words of refusals that say what Redis is doing now, not what the namespace holds: retried."""


def _passing(exc: ResponseError) -> bool:
    """Redis refused for a state it leaves by itself (another client's long script, a load, a failover): retry, with backoff."""
    return str(exc).startswith(_PASSING)


def _wrong_type(exc: BaseException) -> TypeGuard[ResponseError]:
    """Redis refused a command because a key holds another kind of value: a misconfiguration, not a fault."""
    return isinstance(exc, ResponseError) and str(exc).startswith("WRONGTYPE")


StreamId = tuple[int, int]


_NEEDS = (6, 2)
"""The oldest Redis whose commands the scripts use (``XTRIM MINID``, exclusive ``XREVRANGE`` bounds)."""


def _server_version(reported: object) -> tuple[int, int] | None:
    """``(major, minor)`` of a ``redis_version`` such as ``"7.0.15"``; ``None`` when it does not read as one.

    >>> _server_version("6.0.16"), _server_version("7.2"), _server_version(None)
    ((6, 0), (7, 2), None)
    """
    if not isinstance(reported, str):
        return None
    parts = reported.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def _version_of(stored: object) -> int | None:
    """A stored version, or ``None`` when the value is no writer's.

    Only ASCII digits, as the apply script's ``tonumber`` reads a count:
    ``int`` would also take ``1_0``, `` 1`` or ``+1``, which the script
    refuses, and a writer that took one would try to apply forever.

    >>> _version_of(b"10"), _version_of(None), _version_of(b"1_0"), _version_of(b" 1")
    (10, 0, None, None)
    """
    if stored is None:
        return 0
    raw = cast("bytes", stored)
    return int(raw) if raw.isdigit() else None


def _stream_id(raw: bytes | str) -> StreamId:
    """A stream id's two numbers, ASCII digits only, as Redis writes them.

    >>> _stream_id(b"5-1"), _stream_id("7")
    ((5, 1), (7, 0))
    >>> _stream_id(b"1_0-0")
    Traceback (most recent call last):
    ValueError: not a stream id: '1_0-0'
    """
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    if not (ms.isdigit() and (not seq or seq.isdigit())):
        raise ValueError(f"not a stream id: {text!r}")
    return int(ms), int(seq or 0)


_GONE = 16
"""How many histories Redis lost a copy remembers, to answer a send queued in one of them at once."""


class _Stored:
    """What Redis holds of a namespace's Model, read at once by :data:`_STATE`."""

    __slots__ = ("_failed", "_ids", "first_version", "history", "model", "version", "waiting")

    def __init__(self, reply: list[object], *, full: bool) -> None:
        version, log, history, applied, model, last, first, first_version, failed, *waiting = reply
        self._failed = cast("bytes | None", failed)
        # 0 when nothing was stored, None when the value is no writer's.
        self.version = _version_of(version)
        self.history = cast("bytes | None", history)
        # The Model when read in full; otherwise a placeholder saying there is one.
        self.model = cast("bytes | None", model) if full else (b"" if model else None)
        self.waiting = [bool(queued) for queued in cast("list[int]", waiting)]
        # The version of the log's first entry, as stored (read with the Model only).
        self.first_version = cast("bytes | None", first_version)
        self._ids = {"log": log, "applied": applied, "last": last, "first": first}

    def refused(self, entry: StreamId) -> bool | None:
        """Whether ``update`` raised on the applied inbox entry ``entry``, from the stored record of the last 256.

        ``None`` when the record cannot say: it is full, and ``entry`` is older
        than all it holds (refusals are recorded in the order they were
        applied, so one older than its first may have been let go).
        """
        if not self._failed:
            return False
        kept = self._failed.split()
        if f"{entry[0]}-{entry[1]}".encode() in kept:
            return True
        if len(kept) < _REFUSALS_KEPT:
            return False
        try:
            return False if entry > _stream_id(kept[0]) else None
        except ValueError:
            return None

    def stream_id(self, name: str) -> StreamId | None:
        """The stored ``log``, ``applied``, ``last`` or ``first`` (the log's last or first entry) id; ``None`` when absent.

        Raises:
            ValueError: It is no stream id.
        """
        raw = self._ids[name]
        return None if raw is None else _stream_id(cast("bytes", raw))


_MODEL_FIELDS = ("model", "version", "applied", "log", "by", "types", "epoch", "failed")
"""Every field a writer or a send stores in ``<ns>:model``."""

_INBOX_FIELDS = frozenset((b"m",))
_LOG_NEEDS = frozenset((b"v", b"i", b"f"))
_LOG_FIELDS = frozenset((b"v", b"i", b"f", b"m", b"s", b"w"))


def _stored_by_agentfx(values: Mapping[str, object]) -> bool:
    """Whether the stored version reads as a count and the stored ids as stream ids, as a writer stores them.

    >>> _stored_by_agentfx({"version": b"3", "applied": b"1-0", "log": b"2-1"})
    True
    >>> _stored_by_agentfx({"version": b"three", "applied": None, "log": None})
    False
    """
    version = values.get("version")
    if version is not None and not cast("bytes", version).isdigit():
        return False
    for name in ("applied", "log"):
        raw = values.get(name)
        if raw is not None:
            try:
                _stream_id(cast("bytes", raw))
            except ValueError:
                return False
    return True


class _Recheck(enum.Enum):
    """What the tail does after comparing its copy with what Redis holds."""

    NOTHING = "take the entries read"
    RELOADED = "read from the reloaded position"
    FAILED = "pause, then read the same entries again"
    UNREAD = "Redis could not be read: read again"
    STOP = "the program stops"


class _Waiter:
    __slots__ = ("done", "failure", "history")

    def __init__(self, history: bytes) -> None:
        self.done = anyio.Event()
        self.failure: str | None = None
        # The stored history the Message joined when it was queued.
        self.history = history


class _Outgoing:
    """One Message on its way to the inbox, in the next batch the flusher sends."""

    __slots__ = ("data", "done", "entry", "failure", "history")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.done = anyio.Event()
        self.entry: StreamId | None = None
        self.failure = _UNSENT
        self.history = b""


def _taken(sizes: Iterable[int], budget: int) -> int:
    """How many Messages of these ``sizes`` (in bytes) one call carries: at most :data:`_BATCH`, none past ``budget``.

    A single Message larger than ``budget`` goes alone.

    >>> _taken([10] * 5, 25), _taken([99, 1], 25), _taken([0] * 300, 25), _taken([], 25)
    (3, 1, 256, 0)
    """
    spent = 0
    count = 0
    for size in sizes:
        if spent >= budget or count == _BATCH:
            break
        spent += size
        count += 1
    return count


_UNSENT = "The program stopped while the Message was on its way to Redis; whether it was queued is unknown"
_UNREACHABLE = "Redis is unreachable; the Message may not have been queued"
_STOPPED = "The program stopped before the Message was applied; it may still be applied by another process"
_TOO_LARGE = (
    "The Message was not queued: it holds an integer outside -2**63 to 2**64 - 1, "
    "which the inbox (msgpack) cannot store"
)
_LOST = (
    "Redis lost data (it restarted empty, was flushed or went back to an older copy) while the Message "
    "waited: it is not in the Model Redis holds now and will not be applied; send it again if it still should be"
)
_RAISED = "update raised while the writer applied this Message; the Model is unchanged"
_ILLEGIBLE = "this process cannot decode the Model the writer stored"
_REFUSALS_KEPT = 256
"""How many of the inbox ids ``update`` refused ``<ns>:model`` keeps (the apply script's ``255``, plus one)."""
_UNKNOWN_OUTCOME = (
    "A writer applied the Message, but whether update raised on it is no longer known here: "
    "the log and the record of refusals no longer hold it"
)


class _Keys:
    __slots__ = ("inbox", "log", "model", "writer")

    def __init__(self, namespace: str) -> None:
        self.inbox = f"{namespace}:inbox"
        self.writer = f"{namespace}:writer"
        self.model = f"{namespace}:model"
        self.log = f"{namespace}:log"

    def kinds(self) -> tuple[tuple[str, str, str], ...]:
        """``(key, the Redis type it must have, what it holds)`` for every key."""
        return (
            (self.inbox, "stream", "the inbox"),
            (self.writer, "string", "the writer lease"),
            (self.model, "hash", "the Model"),
            (self.log, "stream", "the log"),
        )


class RedisProgram(Program[M, Msg]):
    """A :class:`~agentfx.program.Program` whose Model lives in Redis; obtain one from :func:`run_program`.

    ``model``, ``observe``, ``subscribe``, ``host`` and ``listener_count``
    behave as the in-process program's, over this process's copy of the
    Model. Listeners run in version order, subscribers (when the Model
    changed) before observers, after the copy has taken the new Model. Unlike
    the in-process program, a listener that raises is logged and skipped: it
    runs in the task that tails the log, not in the sender's.
    """

    __slots__ = (
        "_applied",
        "_at",
        "_client",
        "_connected",
        "_keys",
        "_lease",
        "_log_id",
        "_model_decoder",
        "_message_decoder",
        "_namespace",
        "_evicted",
        "_failures",
        "_fingerprint",
        "_flushing",
        "_generation",
        "_gone",
        "_halted",
        "_halting",
        "_history",
        "_illegible",
        "_init",
        "_refusal",
        "_reloading",
        "_renewed",
        "_options",
        "_outbox",
        "_read_count",
        "_scripts",
        "_token",
        "_unstarted",
        "_version",
        "_waiters",
        "_writer",
    )

    def __init__(
        self,
        model: M,
        update: Callable[[M, Msg], M | tuple[M, Commands[Msg]]],
        task_group: TaskGroup,
        *,
        client: Redis,
        namespace: str,
        model_type: object,
        message_type: object,
        options: _Options,
    ) -> None:
        super().__init__(model, update, task_group)
        self._client = client
        self._namespace = namespace
        self._keys = _Keys(namespace)
        self._options = options
        self._lease = options.lease
        self._model_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(cast("Any", model_type))
        self._message_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(cast("Any", message_type))
        # Says who holds the lease to whoever reads <ns>:writer.
        self._token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._version = 0
        self._log_id = "0-0"
        self._applied: StreamId = (0, 0)
        # The log id of this copy's version, and the id of the stored history
        # it follows (a new one each time Redis loses the namespace); None
        # until it has read one.
        self._at: StreamId = (0, 0)
        self._history: bytes | None = None
        # Histories this copy followed that Redis lost, newest last.
        self._gone: list[bytes] = []
        # Counts reloads: a read of the log begun before one is stale.
        self._generation: int = 0
        self._reloading = anyio.Lock()
        self._init = model
        self._waiters: dict[StreamId, _Waiter] = {}
        # The commands of the last batch this writer applied whose reply was
        # lost, with the version that batch reached: they run once the stored
        # Model shows this writer's apply landed.
        self._unstarted: tuple[int, list[Command[Msg]]] | None = None
        self._writer = False
        # When (time.monotonic) the writer last asked Redis for the lease it
        # then got or kept: the lease lasts at least a lease from then.
        self._renewed = 0.0
        self._connected = True
        self._outbox: list[_Outgoing] = []
        self._flushing = False
        self._failures: dict[StreamId, str] = {}
        # The newest entry whose parked failure was let go to keep _failures
        # bounded: a send at or below it that finds none asks the log.
        self._evicted: StreamId = (0, 0)
        self._fingerprint = _fingerprint(model_type, message_type)
        # Why this process does not write now (its types cannot take the stored Model), or None.
        self._refusal: str | None = None
        self._halting = False
        # Whether the last log entry's Model did not decode (said once, not once per version).
        self._illegible = False
        # How many log entries one read asks for: fewer when the last read's
        # carried large Models, so a read holds about one apply's bytes, not the whole log's.
        self._read_count = _BATCH
        self._halted: RedisProgramError | None = None
        self._scripts = (
            client.register_script(_SEND),
            client.register_script(_APPLY),
            client.register_script(_RENEW),
            client.register_script(_RELEASE),
            client.register_script(_ACQUIRE),
            client.register_script(_STATE),
        )

    @property
    def namespace(self) -> str:
        """The prefix of every key this program uses."""
        return self._namespace

    @property
    def version(self) -> int:
        """The version of this process's copy of the Model: how many Messages the writers have applied.

        It counts the history Redis holds: when Redis lost the namespace, it
        goes back with the reloaded Model (to 0 after an empty restart).
        """
        return self._version

    @property
    def token(self) -> str:
        """This process's lease token, ``host:pid:random``; ``<ns>:writer`` holds the writer's."""
        return self._token

    @property
    def is_writer(self) -> bool:
        """Whether this process holds the writer lease right now."""
        return self._writer

    @property
    def connected(self) -> bool:
        """Whether the last read of the log reached Redis; the Model is the last copy either way."""
        return self._connected

    # -- sending ---------------------------------------------------------

    def _host_dispatch(self) -> Callable[[Msg], object]:
        # Sending goes through Redis, and is awaited: the host dispatches through send itself.
        return self.send

    async def send(self, message: Msg) -> None:
        """Queue ``message`` on the inbox and return once this process's copy has applied it.

        Raises:
            RuntimeError: The program has stopped.
            RedisProgramError: Redis is unreachable or the inbox is full (the
                Message was not queued, or whether it was is unknown), the
                Message holds an integer past 64 bits (not queued), no
                writer applied it within ``apply_timeout`` (or before the
                program stopped), ``update`` raised on the writer, or Redis
                lost the data it was queued in (it will not be applied). Or,
                rarely, the writer applied it but whether ``update`` raised is
                no longer known: this copy read past it before the send's
                reply came back, and the log was trimmed past it meanwhile.
        """
        if self._closed:
            raise RuntimeError("Cannot send a Message: the program has stopped (its run_program block has exited)")
        generation = self._generation
        entry, history = await self._enqueue(message)
        current = self._history is None or history == self._history
        if entry <= self._applied and current and generation == self._generation:
            # The log may already have been read past it by the time the reply came back.
            failure = self._failures.get(entry)
            if failure is None and entry <= self._evicted:
                failure = await self._outcome_past_parking(entry)
            if failure is not None:
                raise RedisProgramError(failure)
            return
        if self._closed:
            # The program stopped while the Message was on its way: its waiters
            # were answered already, and nobody would answer this one.
            raise RedisProgramError(_STOPPED if self._halted is None else f"{_STOPPED} ({self._halted})")
        waiter = self._waiters[entry] = _Waiter(history)
        try:
            if history in self._gone or (generation != self._generation and entry <= self._applied):
                # The copy reloaded while the Message was on its way: the log
                # it now reads from may be past it, or in another history.
                try:
                    await self._resync("late", self._generation)
                except (RedisError, OSError):
                    pass  # Unanswered, it waits as any other: the tail reads on, or it times out.
            with anyio.move_on_after(self._options.apply_timeout):
                await waiter.done.wait()
        finally:
            del self._waiters[entry]
        if not waiter.done.is_set():
            raise RedisProgramError(
                f"The Message was queued on {self._keys.inbox}, but no writer applied it within "
                f"{self._options.apply_timeout:g}s; it may still be applied later"
            )
        if waiter.failure is not None:
            raise RedisProgramError(waiter.failure)

    async def _enqueue(self, message: Msg) -> tuple[StreamId, bytes]:
        """Queue ``message``: its inbox id, and the id of the stored history it joined."""
        try:
            data = msgspec.msgpack.encode(message)
        except OverflowError:
            # A strict decoder takes any JSON integer, and a command may build
            # one; msgpack holds 64 bits. Nothing is queued, and a command's
            # Message is lost with a line in the log, not the program.
            raise RedisProgramError(_TOO_LARGE) from None
        outgoing = _Outgoing(data)
        self._outbox.append(outgoing)
        if not self._flushing:
            self._flushing = True
            self._task_group.start_soon(self._flush)
        await outgoing.done.wait()
        if outgoing.entry is None:
            raise RedisProgramError(outgoing.failure)
        return outgoing.entry, outgoing.history

    async def _flush(self) -> None:
        """Send what the outbox holds, one script call per batch, until it is empty.

        Sends made while a batch is on the wire wait for the next one, so
        under load one round trip queues many Messages and at rest a lone
        send goes out at once.
        """
        batch: list[_Outgoing] = []
        try:
            while self._outbox:
                taken = _taken((len(item.data) for item in self._outbox), _BATCH_BYTES)
                batch = self._outbox[:taken]
                del self._outbox[:taken]
                misconfigured: ResponseError | None = None
                try:
                    reply = await self._scripts[0](
                        keys=[self._keys.inbox, self._keys.model],
                        args=[self._options.max_pending, uuid.uuid4().hex, *(item.data for item in batch)],
                    )
                except (RedisConnectionError, RedisTimeoutError, OSError):
                    for item in batch:
                        item.failure = _UNREACHABLE
                except RedisError as exc:
                    if _wrong_type(exc):
                        # Not transient: the program stops, and says why once (in _halt).
                        misconfigured = exc
                        failure = (
                            f"Redis refused to queue the Message: a key of namespace {self._namespace!r} holds "
                            "the wrong kind of value, and the program stops"
                        )
                    else:
                        _logger.exception("Redis refused to queue %d Messages", len(batch))
                        failure = f"Redis refused to queue the Message ({type(exc).__name__})"
                    for item in batch:
                        item.failure = failure
                else:
                    full = (
                        f"{self._keys.inbox} already holds {self._options.max_pending} Messages waiting for the "
                        "writer; this one was not queued"
                    )
                    history, *ids = cast("list[bytes | None]", reply)
                    for item, entry in zip(batch, ids, strict=True):
                        if entry is None:
                            item.failure = full
                        else:
                            item.entry = _stream_id(entry)
                            item.history = history or b""
                for item in batch:
                    item.done.set()
                batch = []
                if misconfigured is not None:
                    await self._halt(misconfigured, f"queue a Message on {self._keys.inbox}")
                    return
        finally:
            # Stopped mid-flight (the program is leaving): nobody may wait forever.
            self._flushing = False
            for item in (*batch, *self._outbox):
                item.done.set()
            self._outbox.clear()

    async def _run_command(self, command: Command[Msg]) -> None:
        result = await command()
        if result is not None and not self._closed:
            try:
                await self._enqueue(result)
            except RedisProgramError:
                _logger.exception("a command's Message could not be queued; it is lost")

    # -- the local copy --------------------------------------------------

    async def _load(self, init: M) -> None:
        """Take the stored Model (or ``init`` for a fresh namespace) as this copy's start.

        Raises:
            RedisProgramError: Redis is older than the scripts need, ``<ns>:model``
                is not a hash, or its Model does not decode with this process's
                types (there is no copy to serve).
        """
        await self._check_server()
        try:
            raw, version, log_id, types, history = await self._client.hmget(
                self._keys.model, ["model", "version", "log", "types", "epoch"]
            )
        except ResponseError as exc:
            raise await self._misconfiguration(exc, f"read {self._keys.model}") from exc
        # Every key, not only the Model's: a log or inbox of the wrong kind would
        # otherwise stop the program only once it had started serving.
        wrong = await self._wrong_kinds()
        if wrong:
            raise self._wrong_keys_error(wrong)
        foreign = await self._foreign_keys()
        if foreign:
            them = ("that key", "it") if len(foreign) == 1 else ("those keys", "them")
            raise RedisProgramError(
                f"{'; '.join(foreign)} of namespace {self._namespace!r}: another program's keys, which agentfx "
                f"does not take over; choose another namespace, or delete {them[0]} if nothing else uses {them[1]}"
            )
        if raw is None:
            self._model = init
        else:
            try:
                self._model = self._model_decoder.decode(cast("bytes", raw))
            except msgspec.DecodeError as exc:
                raise RedisProgramError(
                    f"{self._keys.model} does not decode with this process's Model type, so it has no Model of "
                    f"namespace {self._namespace!r} to serve: run the types that stored it, or migrate the stored Model"
                ) from exc
        self._version = 0 if version is None else int(cast("bytes", version))
        self._log_id = "0-0" if log_id is None else cast("bytes", log_id).decode()
        try:
            self._at = _stream_id(self._log_id)
        except ValueError:
            self._log_id = "0-0"  # No writer's: the log is read from its start, and a reload mends the rest.
        self._history = cast("bytes | None", history)
        refusal = self._mismatch(types)
        if refusal is not None:
            # It can serve what it decoded, but must not write it back.
            self._refuse(*refusal)

    async def _check_server(self) -> None:
        """Refuse a Redis older than :data:`_NEEDS` where it says its version.

        Without this, the writer's apply would fail on every batch (``XTRIM
        MINID`` came in 6.2) and each send would time out, saying only that no
        writer applied it.
        """
        try:
            info = await _client.server_info(self._client)
        except ResponseError:
            return  # INFO renamed or disabled, as some managed services do: nothing to check against.
        version = _server_version(info.get("redis_version"))
        if version is not None and version < _NEEDS:
            raise RedisProgramError(
                f"Redis {'.'.join(map(str, version))} cannot hold namespace {self._namespace!r}: "
                f"agentfx.redis needs Redis {'.'.join(map(str, _NEEDS))} or newer"
            )

    async def _tail(self) -> None:
        delay = _BACKOFF[0]
        # How long to wait before reading entries again that this copy could
        # not take; it grows while the reload keeps failing, so a namespace
        # that cannot be reloaded costs a read every few seconds, not a busy loop.
        stalled = _BACKOFF[0]
        budget = _batch_bytes(self._options.log_bytes)
        while True:
            generation = self._generation
            try:
                reply = await self._client.xread(
                    {self._keys.log: self._log_id}, count=self._read_count, block=self._options.block_ms
                )
            except (RedisConnectionError, RedisTimeoutError, OSError):
                if self._connected:
                    _logger.warning("lost Redis while reading %s; the Model stays at version %d", self._keys.log, self._version)
                self._connected = False
                await anyio.sleep(delay)
                delay = min(delay * 2, self._options.backoff_max)
                continue
            except ResponseError as exc:
                if _passing(exc):
                    # Busy with another client's script, say: it passes, as a lost connection does.
                    await anyio.sleep(delay)
                    delay = min(delay * 2, self._options.backoff_max)
                    continue
                # Connection faults and passing states are the only ones a retry
                # mends; a refused read (a key of the wrong type, say) is not.
                await self._halt(exc, f"read {self._keys.log}")
                return
            # After a reconnect (Redis may have restarted empty) and on a quiet
            # read (it may have been flushed, or its log's ids gone back, so
            # that no entry ever reaches this read): is it still this copy's history?
            check = not reply or not self._connected
            if not self._connected:
                _logger.warning("reconnected to Redis; reading %s from version %d", self._keys.log, self._version)
            self._connected = True
            delay = _BACKOFF[0]
            if generation != self._generation:
                continue  # The writer reloaded the copy while this read was on its way: read again from there.
            entries = [
                entry
                for _stream, page in cast("list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]", reply or [])
                for entry in page
            ]
            if entries:
                largest = max(len(fields.get(b"s", b"")) + len(fields.get(b"m", b"")) for _, fields in entries)
                self._read_count = max(1, min(_BATCH, budget // max(1, largest)))
            if check:
                outcome = await self._recheck("check", generation)
                if outcome is _Recheck.STOP:
                    return
                if outcome is not _Recheck.NOTHING:
                    # Reloaded (the entries read are of the history it left), or could not: read again.
                    stalled = await self._pause(outcome, stalled)
                    continue
            for log_id, fields in entries:
                taken = self._take(log_id, fields)
                if taken is not True:
                    outcome = await self._recheck("behind" if taken is None else "trimmed", generation)
                    if outcome is _Recheck.STOP:
                        return
                    stalled = await self._pause(outcome, stalled)
                    break
                self._log_id = log_id.decode()

    async def _recheck(self, kind: str, generation: int) -> _Recheck:
        """:meth:`_resync`, for the tail."""
        try:
            reloaded = await self._resync(kind, generation)
        except (RedisConnectionError, RedisTimeoutError, OSError):
            return _Recheck.UNREAD
        except ResponseError as exc:
            if _passing(exc):
                return _Recheck.UNREAD
            await self._halt(exc, f"read {self._keys.model}")
            return _Recheck.STOP
        if reloaded is None:
            return _Recheck.FAILED
        return _Recheck.RELOADED if reloaded else _Recheck.NOTHING

    async def _pause(self, outcome: _Recheck, stalled: float) -> float:
        """After a failed reload, wait ``stalled`` before reading the same entries again; the next pause to take."""
        if outcome is _Recheck.RELOADED:
            return _BACKOFF[0]
        if outcome is _Recheck.FAILED:
            # Read the same entries again after a pause, not in a tight loop.
            await anyio.sleep(stalled)
            return min(stalled * 2, self._options.backoff_max)
        return stalled

    def _take(self, log_id: bytes, fields: dict[bytes, bytes]) -> bool | None:
        """Apply one log entry to the copy.

        ``True`` when it was taken (or skipped as malformed), ``False`` when
        versions were skipped (the log was trimmed), ``None`` when the log
        went back to a version this copy is past (Redis lost data).
        """
        try:
            version = int(fields[b"v"])
            flag = fields[b"f"]
            entry = _stream_id(fields[b"i"])
            if flag not in (_CHANGED, _UNCHANGED, _FAILED) or (flag != _FAILED and b"m" not in fields):
                raise ValueError(flag)
            if flag == _CHANGED and b"s" not in fields:
                raise ValueError(flag)
        except (KeyError, ValueError):
            # Not a writer's entry (every one has these fields): never its text in the log.
            _logger.error("%s holds a malformed entry %s; it is skipped", self._keys.log, log_id.decode())
            return True
        if version <= self._version:
            # Tailing reads past this copy's version only, so a lower one is
            # a log that started over: the namespace was lost and rebuilt.
            return None
        if version != self._version + 1:
            return False
        self._version = version
        self._applied = entry
        self._at = _stream_id(log_id)
        failure: str | None = None
        if flag == _FAILED:
            failure = _RAISED
        else:
            try:
                message = self._message_decoder.decode(fields[b"m"])
                if flag == _CHANGED:
                    self._model = self._model_decoder.decode(fields[b"s"])
            except msgspec.DecodeError:
                if not self._illegible:
                    # No traceback: msgspec's text may quote the Model's contents.
                    _logger.error(
                        "version %d of %s does not decode with this process's types; its copy stays behind "
                        "until an entry does (every process on a namespace must run identical types)",
                        version, self._keys.log,
                    )
                self._illegible = True
                failure = _ILLEGIBLE
            else:
                self._illegible = False
                if flag == _CHANGED:
                    self._notify(self._subscribers.snapshot(), ())
                self._notify(self._observers.snapshot(), (message,))
        waiter = self._waiters.get(entry)
        if waiter is not None:
            waiter.failure = failure
            waiter.done.set()
        elif failure is not None:
            # Its sender may not be waiting yet (the log outran the send's reply).
            self._failures[entry] = failure
            if len(self._failures) > _BATCH:
                # Any process's refusals are parked here, so a flood of others'
                # could push out the one a sender is about to claim: it is
                # looked up again then (_outcome_past_parking), never taken for a success.
                oldest = next(iter(self._failures))
                del self._failures[oldest]
                self._evicted = max(self._evicted, oldest)
        return True

    async def _outcome_past_parking(self, entry: StreamId) -> str | None:
        """The failure of a send whose entry this copy applied before the send learned its id, its parked one let go.

        The log's entry for it says whether ``update`` raised; a copy that
        cannot decode what the writer stores says so, as it would have; a log
        trimmed past it (or unreadable now) leaves the outcome unknown, which
        is said, not taken for a success.
        """
        flags, _ = await self._outcomes({entry})
        flag = flags.get(entry)
        if flag is None:
            return _UNKNOWN_OUTCOME
        if flag == _FAILED:
            return _RAISED
        return _ILLEGIBLE if self._illegible else None

    def _notify(self, listeners: tuple[Any, ...], args: tuple[object, ...]) -> None:
        for listener in listeners:
            try:
                listener.call(*args)
            except Exception:
                _logger.exception("a listener raised at version %d; the others still run", self._version)

    async def _resync(self, kind: str, generation: int) -> bool | None:
        """Compare this copy with what Redis holds, and reload ``<ns>:model`` when it must.

        ``kind`` says why: ``"trimmed"`` (the log skipped versions: reload),
        ``"behind"`` (the log held a version this copy is past: reload),
        ``"check"`` (a quiet read, a reconnect, a writer starting: reload only
        when Redis no longer holds the history this copy follows) or
        ``"late"`` (a send whose reply came back after a reload: answer the
        waiting senders, and reload only as a check would). Whatever the
        kind, a stored history that is not this copy's is a reset: what
        Redis lost is lost, and the copy takes what it holds now.

        ``generation`` is the copy's as the caller last saw it; when another
        reload has happened since, this one has nothing to do.

        Returns:
            ``True`` when the copy was reloaded (or was by someone else
            meanwhile), ``False`` when a check found nothing to reload,
            ``None`` when it should have reloaded but could not.
        """
        async with self._reloading:
            if generation != self._generation:
                return True
            if kind == "check":
                stored = await self._state(full=False, entries=())
                if not self._diverged(stored):
                    if self._history is None and stored.history is not None and stored.model is not None:
                        # A namespace stored before histories had ids, or a fresh one: this is its id from now on.
                        self._history = stored.history
                    return False
            # Waiters whose Messages were queued before this read: what it says of them holds.
            before = [(entry, waiter) for entry, waiter in self._waiters.items() if not waiter.done.is_set()]
            stored = await self._state(full=True, entries=[entry for entry, _ in before])
            reset = self._diverged(stored)
            if kind == "late" and not reset:
                await self._answer(before, stored)
                return False
            if stored.model is None and not reset:
                _logger.error("%s is missing while %s skips versions; the Model stays at version %d",
                              self._keys.model, self._keys.log, self._version)
                return None
            try:
                model = self._init if stored.model is None else self._model_decoder.decode(stored.model)
                version = stored.version
                if version is None:
                    raise ValueError(version)
                applied = stored.stream_id("applied")
                at = stored.stream_id("log")
                last = stored.stream_id("last")
                first = stored.stream_id("first")
            except (msgspec.DecodeError, ValueError):
                _logger.error("%s does not decode with this process's types; the Model stays at version %d",
                              self._keys.model, self._version)
                return None
            if reset:
                # One line, whatever caused it: no Model, no text Redis holds.
                _logger.warning(
                    "%s went back past version %d: Redis lost data (it restarted empty, was flushed or went back "
                    "to an older copy); this process now serves the Model it holds, at version %d",
                    self._namespace, self._version, version,
                )
            elif kind == "behind":
                _logger.warning(
                    "%s holds an entry behind version %d; reloading the Model at version %d",
                    self._keys.log, self._version, version,
                )
            elif kind == "trimmed":
                _logger.warning(
                    "%s was trimmed past version %d; reloading the Model at version %d "
                    "(observers miss the Messages between)",
                    self._keys.log, self._version, version,
                )
            if last is not None and (at is None or last > at):
                # Entries after the one the stored Model names are no writer's (a writer stores both at once).
                _logger.error("%s holds entries after version %d's that no writer stored; they are skipped",
                              self._keys.log, version)
            position = max(at or (0, 0), last or (0, 0))
            # A history this copy has read nothing of (each of its entries is
            # past this copy's position) whose log still starts at its first
            # version: the copy starts it from init and reads its log from the
            # start, so its observers hear each of its Messages, as every other
            # copy's do. Otherwise it takes the stored Model, and its observers
            # miss the Messages before it.
            replay = (
                reset
                and first is not None
                and first > self._at
                and stored.first_version == b"1"
                and at is not None
                and last == at
            )
            if replay:
                model, version, applied, at, position = self._init, 0, None, None, (0, 0)
            if reset:
                self._failures.clear()
                if self._history is not None and self._history != stored.history:
                    self._gone.append(self._history)
                    del self._gone[:-_GONE]
            self._model = model
            self._version = version
            self._applied = applied or (0, 0)
            self._at = at or (0, 0)
            self._log_id = f"{position[0]}-{position[1]}"
            self._history = stored.history
            self._generation += 1
            self._notify(self._subscribers.snapshot(), ())
            await self._answer(before, stored, replay=replay)
            # A send whose reply came back while the read above was on its way
            # waits unseen by it: it saw neither the new generation nor the
            # applied id past its entry, so it did not ask as a late one does,
            # and the tail now reads on from past its entry. Told here, or it
            # would wait out its apply_timeout. (One registering from now on
            # sees the new generation, and asks itself.)
            asked = {id(waiter) for _, waiter in before}
            unseen = [
                (entry, waiter)
                for entry, waiter in self._waiters.items()
                if id(waiter) not in asked and not waiter.done.is_set() and entry <= self._applied
            ]
            if unseen:
                try:
                    await self._answer(unseen, await self._state(full=False, entries=[entry for entry, _ in unseen]))
                except (RedisError, OSError):
                    pass  # The reload stands; unanswered, they wait as any other, and time out.
            return True

    def _diverged(self, stored: _Stored) -> bool:
        """Whether Redis no longer holds the history this copy follows (it restarted empty, was flushed, went back).

        The stored Model is this copy's history when it carries the same id
        (or one of them has none yet) and is at or past this copy's version
        with a log id at or past the one of this copy's version (the same one
        at the same version).
        """
        if stored.history is not None and self._history is not None and stored.history != self._history:
            return True
        if stored.model is None:
            # Nothing stored: only a copy that has seen nothing yet is at what Redis holds.
            return self._version > 0 or (self._history is not None and stored.history is None)
        version = stored.version
        try:
            at = stored.stream_id("log")
        except ValueError:
            return False  # No writer's: the reload refuses it, with what it says.
        if version is None:
            return False
        if version < self._version:
            return True
        if at is None or self._version == 0:
            return False
        return at != self._at if version == self._version else at < self._at

    async def _state(self, *, full: bool, entries: list[StreamId] | tuple[()]) -> _Stored:
        reply = await self._scripts[5](
            keys=[self._keys.model, self._keys.log, self._keys.inbox],
            args=["1" if full else "0", *(f"{ms}-{seq}" for ms, seq in entries)],
        )
        return _Stored(cast("list[object]", reply), full=full)

    async def _answer(self, waiting: list[tuple[StreamId, _Waiter]], stored: _Stored, *, replay: bool = False) -> None:
        """Tell each sender that waited before ``stored`` was read what became of its Message, where that is known.

        Still in the inbox: it waits on, in the history Redis holds now.
        Queued in a history Redis lost: the log's entry for it says how it
        was applied (an inbox Redis kept, a Model it lost), and without one
        it never will be. In the stored history and applied as far as this
        copy has read: the log's entry says how; without one (trimmed away)
        it was, as the stored record of what ``update`` refused tells, unless
        the log reaches back past it (Redis went back to an older copy of
        this history, and a later Message was applied over the lost one).
        Neither applied nor queued: Redis lost it. The rest (applied past
        this copy's version) the log tells as it is read.

        With ``replay`` the copy has gone back to ``init`` to read the
        stored history's log from its start: a Message the log applied is
        told as the copy reads it (so ``send`` returns once the copy has
        applied it), and only one Redis lost is told now.
        """
        try:
            applied = stored.stream_id("applied") or (0, 0)
        except ValueError:
            return
        looked: dict[StreamId, _Waiter] = {}
        for (entry, waiter), queued in zip(waiting, stored.waiting, strict=True):
            if waiter.done.is_set():
                continue
            if queued:
                waiter.history = stored.history or waiter.history
            elif stored.history is not None and waiter.history != stored.history:
                looked[entry] = waiter
            elif entry <= (applied if replay else self._applied):
                looked[entry] = waiter
            elif entry > applied:
                waiter.failure = _LOST
                waiter.done.set()
        if not looked:
            return
        flags, oldest = await self._outcomes(set(looked))
        for entry, waiter in looked.items():
            flag = flags.get(entry)
            if flag is None and (
                (stored.history is not None and waiter.history != stored.history)
                # The log reaches back past it without applying it: an older copy came back, and a later Message
                # was applied over it (the applied id alone would say it was).
                or (oldest is not None and oldest < entry)
            ):
                waiter.failure = _LOST
            elif replay:
                continue  # Applied in the log the copy reads from its start (or not known to be lost): it tells.
            elif flag == _FAILED:
                waiter.failure = _RAISED
            elif flag is None:
                # Without its log entry (trimmed away), the stored record of what update refused says, if it can.
                refused = stored.refused(entry)
                waiter.failure = _UNKNOWN_OUTCOME if refused is None else _RAISED if refused else None
            waiter.done.set()

    async def _outcomes(self, wanted: set[StreamId]) -> tuple[dict[StreamId, bytes], StreamId | None]:
        """The flag of each log entry that applied one of the inbox ids ``wanted``, and the oldest inbox id read.

        Read newest first (see :meth:`_newest_first`): a rare path (a reload
        while senders wait). Whatever cannot be read is left out. The log
        applies the inbox in order, so a wanted id with no entry, older than
        the oldest one read, was never applied in this log.
        """
        found: dict[StreamId, bytes] = {}
        lowest = min(wanted)
        oldest: StreamId | None = None
        async with aclosing(self._newest_first()) as entries:
            async for fields in entries:
                try:
                    entry = _stream_id(fields[b"i"])
                except (KeyError, ValueError):
                    continue
                oldest = entry
                if entry in wanted:
                    found[entry] = fields.get(b"f", b"")
                if entry < lowest or len(found) == len(wanted):
                    break
        return found, oldest

    async def _newest_first(self) -> AsyncGenerator[dict[bytes, bytes]]:
        """The log's entries, newest first, in pages, never past the log's length; ends early if Redis cannot be read.

        For the rare paths that look something up in the log (a reload while
        senders wait, a lost reply then a takeover): they may read a few pages.
        """
        end = "+"
        size = min(_LOG_PAGE, self._read_count)
        for _ in range(max(1, self._options.log_length // size + 1)):
            try:
                reply = await self._client.xrevrange(self._keys.log, max=end, min="-", count=size)
            except (RedisError, OSError):
                return
            page = cast("list[tuple[bytes, dict[bytes, bytes]]]", reply or [])
            for _, fields in page:
                yield fields
            if len(page) < size:
                return
            end = f"({page[-1][0].decode()}"

    def _stop_waiting(self) -> None:
        """The program is stopping: a sender still waiting would otherwise wait out its ``apply_timeout``."""
        failure = _STOPPED if self._halted is None else f"{_STOPPED} ({self._halted})"
        self._answer_waiters(failure)

    def _answer_waiters(self, failure: str) -> None:
        for waiter in self._waiters.values():
            if not waiter.done.is_set():
                waiter.failure = failure
                waiter.done.set()

    # -- what no retry mends ----------------------------------------------

    async def _wrong_kinds(self) -> list[str]:
        """Each key of the namespace holding the wrong kind of value, said with what it should hold."""
        wrong: list[str] = []
        for key, kind, holds in self._keys.kinds():
            actual = cast("bytes", await self._client.type(key)).decode()
            if actual not in (kind, "none"):
                wrong.append(f"{key} is a {actual}, not the {kind} that holds {holds}")
        return wrong

    async def _foreign_keys(self) -> list[str]:
        """Each key of the namespace holding the right kind of value that agentfx did not write: another program's.

        The Model's hash holds only the fields a writer or a send stores, with
        a version and ids that read as such; a stream's first or last entry
        has an inbox's or a log's fields; a lease expires. Only what is
        there is looked at: an empty namespace, or a key agentfx has not
        written yet, is agentfx's to take.
        """
        keys = self._keys
        foreign: list[str] = []
        count = await self._client.hlen(keys.model)
        if count:
            stored = await self._client.hmget(keys.model, list(_MODEL_FIELDS))
            values: dict[str, object] = dict(zip(_MODEL_FIELDS, stored, strict=True))
            if (
                sum(value is not None for value in values.values()) < count
                # A fingerprint alone is a writer's first store cut short (a flush
                # between its writes): agentfx's, which the next writer completes.
                or (values["model"] is None and values["epoch"] is None and not (count == 1 and values["types"]))
                or not _stored_by_agentfx(values)
            ):
                foreign.append(f"{keys.model} is a hash agentfx did not write, not the one that holds the Model")
        for key, needs, allows, holds in (
            (keys.inbox, _INBOX_FIELDS, _INBOX_FIELDS, "the inbox"),
            (keys.log, _LOG_NEEDS, _LOG_FIELDS, "the log"),
        ):
            ends = [
                *cast("list[tuple[bytes, dict[bytes, bytes]]]", await self._client.xrange(key, count=1)),
                *cast("list[tuple[bytes, dict[bytes, bytes]]]", await self._client.xrevrange(key, count=1)),
            ]
            # Both ends, so one stray entry (which the tail skips) does not disown a log.
            if ends and not any(needs <= fields.keys() <= allows for _, fields in ends):
                foreign.append(f"{key} is a stream agentfx did not write, not the one that holds {holds}")
        if await self._client.pttl(keys.writer) == -1:
            foreign.append(f"{keys.writer} is a string that never expires, not the writer lease")
        return foreign

    def _wrong_keys_error(self, wrong: list[str]) -> RedisProgramError:
        them = "that key" if len(wrong) == 1 else "those keys"
        return RedisProgramError(
            f"{'; '.join(wrong)} of namespace {self._namespace!r}: delete or rename {them} "
            "(or choose another namespace) and start the program again"
        )

    async def _misconfiguration(self, exc: ResponseError, doing: str) -> RedisProgramError:
        """The error for a command Redis refused on this namespace: which key is of the wrong type, and what to do."""
        wrong: list[str] = []
        try:
            wrong = await self._wrong_kinds()
        except RedisError:
            pass  # Say what is known: the refusal itself.
        if wrong:
            error = self._wrong_keys_error(wrong)
        else:
            # redis-py has already taken the error code off the text (a
            # NOPERM is a NoPermissionError saying "this user has no
            # permissions ..."): the text itself says why, bounded.
            said = " ".join(str(exc).split())[:_REFUSAL_MAX] or type(exc).__name__
            error = RedisProgramError(f"Redis refused to {doing} for namespace {self._namespace!r}: {said}")
        error.__cause__ = exc
        return error

    async def _halt(self, exc: ResponseError, doing: str) -> None:
        """Stop the program: Redis refused a command on the namespace in a way no retry mends.

        The :func:`run_program` block raises the error; every sender still
        waiting is told. Whichever loop sees it first says so; the others are
        cancelled with the program.
        """
        if self._halting:
            return
        self._halting = True
        error = await self._misconfiguration(exc, doing)
        _logger.error("the program of %s stops: %s", self._namespace, error)
        self._halted = error
        with anyio.move_on_after(1):
            # Held or not: a process that stops hands the lease over rather than let it expire.
            try:
                await self._scripts[3](keys=[self._keys.writer], args=[self._token])
            except RedisError:
                pass
        self._task_group.cancel_scope.cancel()

    def _mismatch(self, types: object) -> tuple[str, str] | None:
        """Why this process must not write a Model stored with the fingerprint ``types``, or ``None``."""
        if types is None or not self._fingerprint:
            # Stored before fingerprints (or types msgspec cannot describe): nothing to compare.
            return None
        stored = cast("bytes", types).decode(errors="replace")
        if stored == self._fingerprint:
            return None
        return self._differ(f"fingerprint {stored}, this process's {self._fingerprint}")

    def _differ(self, detail: str) -> tuple[str, str]:
        return (
            f"{self._keys.model} was stored by processes whose Model or Message types differ from this "
            f"process's ({detail})",
            f"once every process with the other types has stopped, HDEL {self._keys.model} types "
            "lets this process's types take the Model over",
        )

    def _undecodable(self) -> tuple[str, str]:
        return (
            f"{self._keys.model} does not decode with this process's Model type",
            "stop the processes with the other types, or migrate the stored Model",
        )

    def _refuse(self, reason: str, fix: str) -> None:
        """This process will not write: say so once, and answer whoever waits on it now."""
        if self._refusal != reason:
            self._refusal = reason
            # Never the Model or the decoder's text (it may quote the Model): the key and the remedy.
            _logger.error(
                "this process will not write namespace %r: %s; it keeps serving its copy at version %d and "
                "tries again later. Every process on a namespace must run identical Model and Message types: %s",
                self._namespace, reason, self._version, fix,
            )
        self._answer_waiters(
            f"This process cannot apply Messages on namespace {self._namespace!r} ({reason}); the Message "
            f"stays queued on {self._keys.inbox} and another process may still apply it"
        )

    # -- the writer ------------------------------------------------------

    async def _lead(self, init: M) -> None:
        """Compete for the lease forever; while holding it, apply the inbox."""
        delay = _BACKOFF[0]
        # How long a process whose types cannot take the stored Model waits
        # before looking again: it grows, so it seldom takes the lease from
        # a process that can write.
        refused = _BACKOFF[0]
        # Frequent enough that a released lease is taken at once, an expired one well within 2 x lease.
        poll = min(self._lease / 4, 0.25)
        while True:
            try:
                asked = time.monotonic()
                acquired = await self._scripts[4](keys=[self._keys.writer], args=[self._token, self._options.lease_ms])
                if not acquired:
                    if self._unstarted is not None:
                        # Another writer took over: what it stored says what became of the lost reply's batch.
                        version, by = await self._client.hmget(self._keys.model, ["version", "by"])
                        await self._settle_unstarted(_version_of(version), by)
                    await anyio.sleep(poll)
                    continue
                delay = _BACKOFF[0]
                self._renewed = asked
                await self._write(init)
            except _LeaseLost:
                _logger.warning("lost the writer lease of %s", self._namespace)
                # Before competing again: a refusal that comes back at once
                # (the script fenced every apply) must not become a busy loop.
                await anyio.sleep(poll)
            except _Refused as refusal:
                # _write has handed the lease back; the copy keeps what it has.
                self._writer = False
                self._refuse(refusal.reason, refusal.fix)
                await anyio.sleep(refused)
                refused = min(refused * 2, self._options.backoff_max)
            except (RedisError, OSError) as exc:
                if _wrong_type(exc):
                    await self._halt(exc, f"write namespace {self._namespace!r}")
                    return
                if self._writer or not isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError):
                    _logger.warning("the writer of %s stopped: %s; retrying", self._namespace, type(exc).__name__)
                self._writer = False
                await anyio.sleep(delay)
                delay = min(delay * 2, self._options.backoff_max)
            finally:
                self._writer = False
                if self._refusal is None:
                    refused = _BACKOFF[0]

    async def _write(self, init: M) -> None:
        lost = False
        handover = False

        async def renew(scope: anyio.CancelScope) -> None:
            nonlocal lost
            while True:
                await anyio.sleep(self._lease / 3)
                asked = time.monotonic()
                try:
                    kept = await self._scripts[2](keys=[self._keys.writer], args=[self._token, self._options.lease_ms])
                except RedisError:
                    kept = 0
                if not kept:
                    lost = True
                    scope.cancel()
                    return
                self._renewed = max(self._renewed, asked)

        try:
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(renew, group.cancel_scope)
                    await self._apply_inbox(init)
            except BaseExceptionGroup as failures:
                # The group wraps even a lone failure; the caller tells them apart.
                if len(failures.exceptions) == 1:
                    raise failures.exceptions[0] from None
                raise
        except _Refused:
            handover = True
            raise
        finally:
            if self._closed or handover:
                with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                    # Leaving on purpose (or unable to write): hand the lease over now rather than after it expires.
                    try:
                        await self._scripts[3](keys=[self._keys.writer], args=[self._token])
                    except RedisError:
                        pass
        if lost:
            raise _LeaseLost

    async def _apply_inbox(self, init: M) -> None:
        """Apply the inbox while holding the lease.

        Raises:
            _Refused: The stored Model is not this process's types' to write
                (another fingerprint, or it does not decode).
        """
        raw, version, applied, types, by, history = await self._client.hmget(
            self._keys.model, ["model", "version", "applied", "types", "by", "epoch"]
        )
        refusal = self._mismatch(types)
        if refusal is not None:
            raise _Refused(*refusal)
        if raw is None:
            model = init
            # A fresh namespace (or one Redis lost): store the initial Model so a copy started later reads it.
            if await self._client.hsetnx(self._keys.model, "model", msgspec.msgpack.encode(init)) and self._fingerprint:
                await self._client.hsetnx(self._keys.model, "types", self._fingerprint)
        else:
            try:
                model = cast(M, self._model_decoder.decode(cast("bytes", raw)))
            except msgspec.DecodeError:
                # Never the decoder's text: it may quote the Model.
                raise _Refused(*self._undecodable()) from None
        try:
            stored_version = _version_of(version)
            position = "0-0" if applied is None else cast("bytes", applied).decode()
            _stream_id(position)
            if stored_version is None:
                raise ValueError(version)
            base = stored_version
        except ValueError:
            raise _Refused(
                f"{self._keys.model} holds a version or an inbox id no writer stored",
                "restore the namespace's keys or choose another namespace",
            ) from None
        if history is None:
            # A fresh namespace, or one stored before histories had ids: this one names it from now on.
            await self._client.hsetnx(self._keys.model, "epoch", uuid.uuid4().hex)
            history = await self._client.hget(self._keys.model, "epoch")
        # The stored Model may not be the one this process copied (Redis lost
        # the namespace while this writer was away): the copy reloads first.
        await self._resync("check", self._generation)
        await self._settle_unstarted(base, by)
        self._writer = True
        if self._refusal is not None:
            _logger.warning("this process writes namespace %r again: the stored Model is its types'", self._namespace)
            self._refusal = None
        _logger.info("took the writer lease of %s", self._namespace)
        fingerprint = self._fingerprint
        update = self._update
        decode = self._message_decoder.decode
        # This writer's own: a new writer (or this one after a failed apply) counts the log afresh.
        log = _LogSizes(self._options.log_bytes, self._options.log_length)
        budget = _batch_bytes(self._options.log_bytes)
        # How many inbox entries one read asks for: about what the last batch
        # took when it stopped on its budget, so large Messages left for the
        # next batch are not read again and again.
        wanted = _BATCH
        clock = time.monotonic
        # update runs synchronously, so the lease cannot be renewed during a
        # batch: it stops once a third of the lease has passed since the lease
        # was last renewed (each apply renews it), leaving the rest of the
        # lease to store it. Its first Message always goes.
        third = self._lease / 3
        while True:
            reply = await self._client.xread({self._keys.inbox: position}, count=wanted, block=self._options.block_ms)
            if not reply:
                continue
            entries = cast("list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]", reply)[0][1]
            body: list[EncodableT] = []
            sizes: list[int] = []
            spent = 0
            commands: list[Command[Msg]] = []
            deadline = self._renewed + third
            for entry_id, fields in entries:
                data = fields.get(b"m", b"")
                snapshot = b""
                try:
                    message = decode(data)
                except msgspec.DecodeError:
                    # Never the decoder's text: it may quote the entry.
                    _logger.error("inbox entry %s is not a Message of this program; it is recorded as failed", entry_id.decode())
                    body += [entry_id, _FAILED, data, b""]
                else:
                    try:
                        result = update(model, message)
                        pair = _as_pair(result) if result.__class__ is tuple else None
                        new = cast(M, result) if pair is None else cast(M, pair[0])
                        snapshot = b"" if new is model else msgspec.msgpack.encode(new)
                    except Exception:
                        _logger.exception("update raised on inbox entry %s; it is recorded as failed", entry_id.decode())
                        body += [entry_id, _FAILED, data, b""]
                        snapshot = b""
                    else:
                        body += [entry_id, _UNCHANGED if new is model else _CHANGED, data, snapshot]
                        model = new
                        if pair is not None:
                            commands.extend(pair[1])
                size = len(data) + len(snapshot)
                spent += size
                sizes.append(size + _ENTRY_BYTES)
                if spent >= budget or clock() >= deadline:
                    # The rest waits for the next batch (the next read starts after this one's last entry).
                    break
            count = len(sizes)
            wanted = count if count < len(entries) else min(_BATCH, 2 * wanted)
            entries = entries[:count]
            args: list[EncodableT] = [
                self._token, self._options.lease_ms, log.keep(sizes), base, count, fingerprint,
                cast("bytes", history or b""), *body,
            ]
            # Kept until the reply says the batch was stored: a reply lost on
            # the way back leaves the batch applied and its commands unasked,
            # and nobody would ask them again (the next read starts past it).
            self._unstarted = (base + count, commands) if commands else None
            asked = clock()
            try:
                logged = await self._scripts[1](
                    keys=[self._keys.writer, self._keys.model, self._keys.log, self._keys.inbox], args=args
                )
            except ResponseError as exc:
                if "AGENTFX_" not in str(exc):
                    # Any other error may come after the script's first write
                    # (Redis undoes nothing): the batch may have landed, as
                    # when a reply is lost, and the stored version settles it.
                    raise
                # Refused whole, before anything was written: its next writer asks again.
                self._unstarted = None
                if "AGENTFX_TYPES" in str(exc):
                    # Another process's types wrote since this batch began.
                    raise _Refused(*self._differ("another fingerprint was stored while this process wrote")) from None
                raise _LeaseLost from None
            self._unstarted = None
            # The apply renewed the lease as it stored the batch.
            self._renewed = max(self._renewed, asked)
            base += count
            position = entries[-1][0].decode()
            # Only after the apply is stored: a batch that was not applied
            # asked for nothing, and its next writer will ask again. And
            # before anything else that may fail: the batch landed, and
            # nobody would ask for its commands again (the next read starts
            # past it).
            self._start_commands(commands)
            if _stream_id(cast("bytes", logged)) <= self._at:
                # The log's ids went back behind this copy's: it is not the log this copy read.
                await self._resync("check", self._generation)

    def _start_commands(self, commands: list[Command[Msg]]) -> None:
        start = self._task_group.start_soon
        for command in commands:
            start(self._run_command, command)

    async def _settle_unstarted(self, stored: int | None, by: object) -> None:
        """Run or drop the commands of a batch whose apply reply was lost, now that the stored Model is read.

        ``stored`` is the stored version (``None`` when it does not read as
        one), ``by`` the token of the writer that stored it. Below the batch's
        version, the batch was never stored: whoever applies it asks for its
        commands again. At it, and stored by this writer, it landed: its
        commands run now. Past it, or by another writer, the log's entry of
        that version says who stored it: this writer (its apply landed before
        the other took over, and nobody asked for the commands) or another
        (which applied the batch again and ran them). When the log no longer
        holds that entry, nobody can tell: they are dropped, and the log says so.
        """
        unstarted = self._unstarted
        if unstarted is None:
            return
        self._unstarted = None
        reached, commands = unstarted
        if stored is not None and stored < reached:
            return
        token = self._token.encode()
        writer: object = by if stored == reached else await self._writer_of(reached)
        if writer == token:
            _logger.warning("the reply to applying version %d of %s was lost; its commands run now", reached, self._namespace)
            self._start_commands(commands)
        elif writer is not None:
            _logger.info(
                "the reply to applying version %d of %s was lost; another writer applied that version and ran its commands",
                reached, self._namespace,
            )
        else:
            _logger.error(
                "the reply to applying version %d of %s was lost and another writer has stored since; "
                "%d command(s) that version asked for may not have run",
                reached, self._namespace, len(commands),
            )

    async def _writer_of(self, version: int) -> bytes | None:
        """The token in the log entry of ``version``: its writer's if it ended a batch, ``b""`` if not, ``None`` if it is gone.

        Read newest first (see :meth:`_newest_first`): a rare path.
        """
        async with aclosing(self._newest_first()) as entries:
            async for fields in entries:
                try:
                    found = int(fields[b"v"])
                except (KeyError, ValueError):
                    continue
                if found == version:
                    return fields.get(b"w", b"")
                if found < version:
                    return None
        return None

    def __repr__(self) -> str:
        state = "stopped" if self._closed else ("writer" if self._writer else "running")
        return f"<RedisProgram {self._namespace!r} {state} version={self._version} listeners={self.listener_count}>"


class _Options(msgspec.Struct, frozen=True):
    lease: float
    apply_timeout: float
    max_pending: int
    log_length: int
    backoff_max: float
    log_bytes: int

    @property
    def lease_ms(self) -> int:
        return max(1, math.ceil(self.lease * 1000))

    @property
    def block_ms(self) -> int:
        # Short enough that a writer notices a lost lease between reads.
        return max(1, int(self.lease * 1000 / 3))


def _batch_bytes(log_bytes: int) -> int:
    """The byte budget of one apply: :data:`_BATCH_BYTES`, or a quarter of the log's, so the log holds a few batches.

    >>> _batch_bytes(LOG_BYTES) == _BATCH_BYTES, _batch_bytes(1000), _batch_bytes(1)
    (True, 250, 1)
    """
    return max(1, min(_BATCH_BYTES, log_bytes // 4))


class _LogSizes:
    """How many entries the log keeps so that they hold about ``log_bytes``, from the sizes of those a writer appended.

    One per writer's turn, for the entries it appends (newest last): it
    keeps the newest that fit in ``log_bytes``, at least :data:`_LOG_MIN` and
    the whole batch just appended, at most ``log_length``. Entries already in
    the log when the turn began are of unknown size: while this writer's own
    fit with room to spare, as many of them are kept as would fit if each
    were as large as the largest it appended, and none once its own fill
    the log.

    >>> log = _LogSizes(1000, 100)
    >>> log.keep([100] * 3)  # its 3, and room for 7 as large from before its turn
    10
    >>> log.keep([100] * 20)  # more than fit: the batch just appended is kept whole
    20
    >>> log.keep([10])  # the newest that fit
    10
    """

    __slots__ = ("_bytes", "_largest", "_length", "_limit", "_older", "_sizes")

    def __init__(self, log_bytes: int, log_length: int) -> None:
        self._sizes: deque[int] = deque()
        self._bytes = 0
        self._largest = 1
        self._limit = log_bytes
        self._length = log_length
        # Whether entries from before this turn may still be in the log.
        self._older = True

    def keep(self, batch: list[int]) -> int:
        """Count ``batch`` (the sizes of the entries about to be appended) in, and say how many entries the log keeps."""
        sizes = self._sizes
        sizes.extend(batch)
        self._bytes += sum(batch)
        self._largest = max(self._largest, *batch) if batch else self._largest
        floor = max(_LOG_MIN, len(batch))
        while len(sizes) > self._length or (self._bytes > self._limit and len(sizes) > floor):
            self._bytes -= sizes.popleft()
            self._older = False
        older = (self._limit - self._bytes) // self._largest if self._older and self._bytes < self._limit else 0
        if self._older and older == 0:
            self._older = False
        return min(self._length, len(sizes) + older)


def check_namespace(namespace: object) -> None:
    """Refuse a namespace that is not a non-empty string without spaces (it prefixes every key).

    Raises:
        ContractError: It is not.
    """
    if not isinstance(namespace, str) or not namespace or any(c.isspace() for c in namespace):
        raise ContractError(f"The Redis namespace must be a non-empty string without spaces, got {namespace!r}")


def _check(
    namespace: object,
    lease: object,
    apply_timeout: object,
    max_pending: object,
    log_length: object,
    message_type: object,
    model_type: object,
    log_bytes: object,
) -> None:
    check_namespace(namespace)
    for name, seconds in (("The writer lease", lease), ("apply_timeout", apply_timeout)):
        if not (_is_number(seconds) and 0 < _seconds(seconds) <= _LONGEST):
            raise ContractError(f"{name} must be a positive number of seconds, at most a day, got {seconds!r}")
    for name, size in (("max_pending", max_pending), ("log_length", log_length), ("log_bytes", log_bytes)):
        if not (isinstance(size, int) and not isinstance(size, bool) and size >= 1):
            raise ContractError(f"{name} must be an integer of at least 1, got {size!r}")
    if message_type is None:
        raise ContractError("message_type is the Message union the inbox and the log carry (msgspec decodes them with it)")
    for name, tp in (("message_type", message_type), ("model_type", model_type)):
        if tp is None:
            continue
        try:
            msgspec.msgpack.Decoder(cast("Any", tp))
        except TypeError:
            # msgspec's text names the type it cannot decode, which is the developer's own.
            raise ContractError(f"{name} must be a type msgspec can decode, got {tp!r}") from None


_LONGEST = 86_400.0
"""The longest lease or apply timeout: Redis takes a lease in milliseconds, and longer ones are mistakes."""


def _seconds(value: object) -> float:
    # A Decimal's sNaN, or an int too large for a float, is no duration either.
    try:
        return float(cast(float, value))
    except (OverflowError, ValueError):
        return math.nan


def _is_number(value: object) -> bool:
    # Any real number (a Fraction, a Decimal) is seconds, as for completion timeouts; a bool is not.
    return not isinstance(value, bool) and isinstance(value, numbers.Real | decimal.Decimal)


@asynccontextmanager
async def run_program(
    url: str,
    *,
    namespace: str,
    init: M,
    update: Callable[[M, Msg], M | tuple[M, Commands[Msg]]],
    message_type: object,
    model_type: object = None,
    lease: float = DEFAULT_LEASE,
    apply_timeout: float = 30.0,
    max_pending: int = MAX_PENDING,
    log_length: int = LOG_LENGTH,
    log_bytes: int = LOG_BYTES,
) -> AsyncGenerator[RedisProgram[M, Msg]]:
    """Run an Elm program whose Model is shared, through Redis, by every process on ``namespace``.

    Every process runs the same ``init`` and ``update``; one of them at a
    time holds the writer lease and applies the inbox. ``init`` is the Model
    of a namespace nothing has been stored under yet; otherwise the stored
    Model is loaded. ``update`` and its commands follow
    :func:`agentfx.run_program`'s rules; commands run on the writer and their
    Messages go through the inbox. An ``update`` that raises is logged on the
    writer, the Model is unchanged and the sender's :meth:`RedisProgram.send`
    raises :class:`RedisProgramError`.

    asyncio only: redis-py's client runs on asyncio, not on trio.

    Args:
        url: A redis-py URL, ``redis://host:port/db``.
        namespace: The prefix of the keys; processes sharing it share a Model.
        init: The Model of a fresh namespace.
        update: ``update(model, message)``; synchronous and pure.
        message_type: The Message union, to decode the inbox and the log with msgspec.
        model_type: The Model's type for decoding; ``type(init)`` by default
            (pass it when that loses information, e.g. a tuple of Structs).
        lease: Seconds the writer lease lasts unless renewed (every third of it).
        apply_timeout: Seconds :meth:`RedisProgram.send` waits for its Message to be applied.
        max_pending: Messages the inbox holds before ``send`` refuses another.
        log_length: Roughly how many versions the log keeps.
        log_bytes: Roughly how many bytes of Messages and Models the log keeps
            (at least a few versions, however large); a copy further behind
            reloads the stored Model. One apply carries at most a quarter of
            it, and at most 8 MiB.

    Every process on a namespace must run identical Model and Message
    types: the writer stores a fingerprint of them next to the Model, and a
    process whose fingerprint differs (or whose types cannot decode the
    stored Model) does not write. It logs why once, hands the lease back,
    answers the sends waiting on it with :class:`RedisProgramError`, keeps
    serving its copy, and looks again later.

    When Redis loses the namespace (a restart without persistence, a flush),
    every process reloads what it holds, ``init`` when nothing: what it lost
    is lost, as the module's documentation says.

    Raises:
        ContractError: A malformed namespace, a duration that is not a positive
            number, a size that is not a positive integer, or a ``message_type``
            (or ``model_type``) msgspec cannot decode.
        RuntimeError: Not running on asyncio.
        redis.exceptions.ConnectionError: Redis is unreachable when the program starts.
        RedisProgramError: Redis is older than 6.2, a key of the namespace
            holds the wrong kind of value (at the start or later: the program
            stops and the block raises it), a key of the namespace holds what
            agentfx did not write (another program's, at the start), or the
            stored Model does not decode with ``model_type`` at the start.
    """
    _check(namespace, lease, apply_timeout, max_pending, log_length, message_type, model_type, log_bytes)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("agentfx.redis runs on asyncio only: redis-py's client does not run on trio") from None
    options = _Options(float(lease), float(apply_timeout), max_pending, log_length, _BACKOFF[1], log_bytes)
    # No retries: a retried XADD whose first reply was lost would queue the
    # Message twice. Failures surface, and the loops reconnect with backoff.
    pool = _client.pool(
        url,
        max_connections=64,
        timeout=5,
        retry=Retry(NoBackoff(), 0),
        socket_connect_timeout=2,
        socket_timeout=options.lease + 5,
    )
    client = Redis(connection_pool=pool)
    lone: BaseException | None = None
    halted: RedisProgramError | None = None
    try:
        async with anyio.create_task_group() as task_group:
            program = RedisProgram(
                init,
                update,
                task_group,
                client=client,
                namespace=namespace,
                model_type=type(init) if model_type is None else model_type,
                message_type=message_type,
                options=options,
            )
            await program._load(init)  # pyright: ignore[reportPrivateUsage]
            task_group.start_soon(program._tail)  # pyright: ignore[reportPrivateUsage]
            task_group.start_soon(program._lead, init)  # pyright: ignore[reportPrivateUsage]
            try:
                yield program
            finally:
                task_group.cancel_scope.cancel()
                # Its senders may run outside this task group (a server's requests).
                program._stop_waiting()  # pyright: ignore[reportPrivateUsage]
                # Set when the program stopped itself (and cancelled the block): raised below.
                halted = program._halted  # pyright: ignore[reportPrivateUsage]
    except BaseExceptionGroup as group:
        # As agentfx.run_program: a lone failure (the block's own, a command's)
        # comes out bare, so callers catch what was raised.
        if len(group.exceptions) != 1:
            raise
        lone = group.exceptions[0]
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()
            await pool.aclose()
    if lone is not None:
        try:
            _raise_bare(lone)
        finally:
            del lone
    if halted is not None:
        raise halted


def program(
    url: str,
    *,
    namespace: str,
    message_type: object,
    model_type: object = None,
    lease: float = DEFAULT_LEASE,
    apply_timeout: float = 30.0,
    max_pending: int = MAX_PENDING,
    log_length: int = LOG_LENGTH,
    log_bytes: int = LOG_BYTES,
) -> ProgramFactory:
    """A program factory for :class:`agentfx.App`: ``App(..., program=program(url, namespace=..., message_type=Msg))``.

    The arguments are :func:`run_program`'s; ``init`` and ``update`` come
    from the App. ``message_type`` is required because a factory receives
    only ``init`` and ``update``.

    >>> factory = program("redis://127.0.0.1:6379/0", namespace="todo", message_type=int)
    >>> factory
    <agentfx.redis program namespace='todo'>
    """
    _check(namespace, lease, apply_timeout, max_pending, log_length, message_type, model_type, log_bytes)
    return _Factory[Any, Any](
        url,
        namespace=namespace,
        message_type=message_type,
        model_type=model_type,
        lease=lease,
        apply_timeout=apply_timeout,
        max_pending=max_pending,
        log_length=log_length,
        log_bytes=log_bytes,
    )


class _Factory(Generic[M, Msg]):
    """``(init, update) -> async context manager of a running program``, on Redis."""

    __slots__ = ("_options", "url", "namespace")

    def __init__(self, url: str, *, namespace: str, **options: Any) -> None:
        self.url = url
        self.namespace = namespace
        self._options = options

    def __call__(
        self, init: M, update: Callable[[M, Msg], M | tuple[M, Commands[Msg]]]
    ) -> AbstractAsyncContextManager[Program[M, Msg]]:
        return run_program(self.url, namespace=self.namespace, init=init, update=update, **self._options)

    def __repr__(self) -> str:
        # Never the URL: it may carry a password.
        return f"<agentfx.redis program namespace={self.namespace!r}>"
