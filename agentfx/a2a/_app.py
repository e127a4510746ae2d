"""The A2A server: the card and the JSON-RPC endpoint, as one Starlette app.

This layer owns the HTTP face, assembled from the SDK's own pieces: the card
route (``create_agent_card_routes``, at ``/.well-known/agent-card.json``), the
JSON-RPC route (``create_jsonrpc_routes`` at ``/a2a``, with the SDK's 0.3
compatibility on, so 0.3 ``message/send``, ``tasks/get`` and ``tasks/cancel``
reach the same tasks), the ``DefaultRequestHandler`` and a ``TaskStore`` (a
bounded one by default, :class:`._store.BoundedTaskStore`, which this layer
asks for a new task's room, or the room a message to a kept task grows it
by, before the SDK runs anything for it). In
front of them it puts the checks agentfx's MCP HTTP server makes, with the
same rules: loopback Host and Origin by default (421 and 403 otherwise), a
bounded request body, and an ``authenticate`` hook whose principal reaches
``authorize`` through the SDK's call context. Tasks belong to the principal
that created them: the SDK's task store scopes them by owner, so another
principal cannot read, cancel or confirm them. At most :data:`MAX_PRINCIPALS`
principals are held at once; an idle one (no request in flight, no live
task) is released when a new one needs its room. A task takes one answer
at a time, and only while it waits for one (the request handler refuses
the others before they are queued); every error the endpoint answers is
put in its own fixed words (:mod:`._answers`).

It deliberately knows nothing of dispatch or task states (:mod:`._executor`)
or of the card's contents (:mod:`._card`).
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Hashable, Iterable
from contextlib import aclosing, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast, overload

import anyio
from a2a.auth.user import User
from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    ServerCallContextBuilder,
    create_agent_card_routes,
    create_jsonrpc_routes,
)
from a2a.server.events import Event
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from google.protobuf.timestamp_pb2 import Timestamp
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse

# ``TypeVar(default=...)`` (PEP 696) is in ``typing`` from Python 3.13 only.
from typing_extensions import TypeVar

from .._asgi import replay as replay_body
from .._hosts import LOOPBACK_HOSTS, LOOPBACK_ORIGINS
from .._logs import withhold
from ..app import App
from ..errors import ContractError
from ..runtime import AgentRuntime
from ._answers import EXCHANGE_KEY, Answers, Exchange, read_envelope
from ._executor import NOT_WAITING, PRINCIPAL_STATE_KEY, AgentfxExecutor, RuntimeFor, dispatching, terminal_refusal
from ._store import (
    AT_CAPACITY,
    MAX_LIVE_TASKS_PER_OWNER,
    MAX_TASK_BYTES,
    MAX_TASKS,
    OWNER_AT_CAPACITY,
    TOO_LARGE,
    BoundedTaskStore,
)

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from ..program import Program

__all__ = [
    "A2A_PATH",
    "AUTHENTICATE_TIMEOUT",
    "CARD_PATH",
    "MAX_PRINCIPALS",
    "MAX_REQUEST_BODY",
    "PARKED_TASK_TIMEOUT",
    "PRINCIPALS_AT_CAPACITY",
    "Authenticate",
    "a2a_app",
    "host_allowed",
    "origin_allowed",
]

_logger = logging.getLogger("agentfx.a2a")

A2A_PATH = "/a2a"
"""Where the JSON-RPC endpoint is served (A2A 1.0 and 0.3 methods alike)."""

CARD_PATH = "/.well-known/agent-card.json"
"""Where the agent card is served."""

MAX_REQUEST_BODY = 4 * 1024 * 1024
"""Bytes a request body may carry; a larger one is answered 413 unread."""

AUTHENTICATE_TIMEOUT = 10.0
"""Seconds ``authenticate`` may take before the request is answered 503.

A synchronous hook runs in a worker thread, so it is bounded too and never
holds up the event loop; past the deadline its request is answered and the
thread is left to finish on its own. At most :data:`_AUTHENTICATE_THREADS`
such threads run at once (those left behind included): past that a request
is answered 503 at once, so a hook that hangs cannot pile up threads.
"""

_AUTHENTICATE_THREADS = 40
"""Synchronous ``authenticate`` calls running at once at most, in worker threads (as many as anyio's default limiter)."""

PARKED_TASK_TIMEOUT = 30 * 60.0
"""Seconds a task waiting in ``input-required`` keeps its running machinery; an answer after that still works.

The SDK keeps a producer and a consumer running for every task it has not
finished; one nobody answers would otherwise hold them until shutdown. After
this long they are released, and an answer recreates them from the task store.
"""


MAX_PRINCIPALS = 1000
"""Principals served at once at most; past it an idle one is released, else the request is refused.

A principal is held while a request of it is in flight or a task of it is
live in the task store (``submitted``, ``working``, ``input-required``,
``auth-required``): a task waiting for an answer keeps it for
:data:`PARKED_TASK_TIMEOUT` at most (since it last asked), so callers that
leave their confirmations unanswered cannot keep every new one out. One
that is idle is released, least recently seen first, when a new principal
needs its room; its tasks then answer ``TaskNotFoundError``, as if evicted
(an unanswered one included). When every one is held, a new
principal's request is refused with the SDK's ``UnsupportedOperationError``
(:data:`PRINCIPALS_AT_CAPACITY`) and nothing runs for it.
"""

PRINCIPALS_AT_CAPACITY = "The agent is busy: too many callers have tasks in progress. Try again later"
"""The message of the ``UnsupportedOperationError`` refusing a new principal when :data:`MAX_PRINCIPALS` are held."""

NOT_FINITE = (
    "Invalid params: a number in the request is not finite (past the range of a double, as 1e400 is, "
    "or not a number): a message cannot carry it"
)
"""The message of the ``InvalidParamsError`` (``-32602``) refusing a message whose request holds a non-finite number.

JSON allows ``1e400``, which parses as an infinite double (and Python's
parser takes ``NaN`` and ``Infinity``); a protobuf ``Value`` (a data part,
metadata) holds one but has no JSON for it, so neither the answer nor any
later read of the task it would be kept in could be sent. Such a message
(``SendMessage``, ``SendStreamingMessage``, 0.3's ``message/send`` and
``message/stream``) is refused before anything is admitted, stored or
dispatched.
"""


# Where the guard leaves the authenticated principal's tenant (or the refusal
# of one) for the call-context builder, which raises the SDK's error so the
# SDK answers it in the request's protocol version, with its id.
_SCOPE_KEY = "agentfx.a2a.tenant"
_PRINCIPAL_KEY = "agentfx.a2a.principal"
_REFUSED = "agentfx.a2a.refused"

# The refusals agentfx words itself: the endpoint passes them as they are.
_OWN_WORDS = frozenset({AT_CAPACITY, TOO_LARGE, OWNER_AT_CAPACITY, PRINCIPALS_AT_CAPACITY, NOT_WAITING, NOT_FINITE})

_LIVE = (
    TaskState.TASK_STATE_SUBMITTED,
    TaskState.TASK_STATE_WORKING,
    TaskState.TASK_STATE_INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
)
_PARKED = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})

P = TypeVar("P", default=Any)

Authenticate = Callable[[Request], "P | None | Awaitable[P | None]"]
"""``authenticate(request)``: the principal of an HTTP request, or ``None`` to refuse it (401). May be async.

``Authenticate[P]`` proves principals of type ``P``: :func:`a2a_app` then takes
an ``App`` whose principal type is ``P``, or a ``runtime_for(principal: P)``.
"""


def _matches(value: str, patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        if value == pattern:
            return True
        if pattern.endswith(":*") and value.startswith(pattern[:-1]) and value[len(pattern) - 1 :].isdigit():
            return True
    return False


def origin_allowed(origin: str | None, allowed: Iterable[str]) -> bool:
    """Whether a request's ``Origin`` may reach the endpoint; the MCP HTTP server's rule.

    No ``Origin`` (a non-browser client) is allowed. With nothing listed, the
    loopback origins are, on any port; a non-empty list is exactly the
    allowed set. A pattern is an origin, exact, or ``scheme://host:*``.

    >>> origin_allowed(None, ()), origin_allowed("http://localhost:5173", ())
    (True, True)
    >>> origin_allowed("https://evil.example", ()), origin_allowed("https://app.example", ["https://app.example"])
    (False, True)
    """
    return not origin or _matches(origin, tuple(allowed) or LOOPBACK_ORIGINS)


def host_allowed(host: str | None, allowed: Iterable[str]) -> bool:
    """Whether a request's ``Host`` header names this server; the MCP HTTP server's rule, against DNS rebinding.

    With nothing listed, loopback names are allowed on any port; a non-empty
    list is exactly the allowed set. A pattern is a host, exact
    (``agent.example``, ``agent.example:8443``), or ``name:*`` for any port.
    A request without ``Host`` is refused.

    >>> host_allowed("127.0.0.1:8000", ()), host_allowed("[::1]:8000", ()), host_allowed("evil.example", ())
    (True, True, False)
    >>> host_allowed("agent.example:443", ["agent.example:*"]), host_allowed("localhost:80", ["agent.example"])
    (True, False)
    """
    return host is not None and _matches(host, tuple(allowed) or LOOPBACK_HOSTS)


def _refuse(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    # JSON-RPC's shape, so a client that reads only errors still reads this.
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


class _Owner(User):
    """The SDK's user for an authenticated principal: its name is the task store's owner scope."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


@dataclass(eq=False)
class _Tenant:
    """One principal served: the opaque owner name its tasks are stored under, and its runtime once made."""

    principal: object
    owner: str
    users: int = 0  # requests of it in flight
    runtime: AgentRuntime[Any, Any] | None = None


class _Principals:
    """The principals served, at most ``bound``; an idle one is released when a new one needs its room.

    Idle: no request of it in flight and no live task of it in ``tasks``, a
    task waiting for input counting only until it has waited ``parked``
    seconds (a :class:`BoundedTaskStore` says, for every owner at once; any
    other store is asked through the ``TaskStore`` interface, by the time
    of each task's status).
    """

    def __init__(self, bound: int, tasks: TaskStore, parked: float) -> None:
        self._bound = bound
        self._tasks = tasks
        self._parked = parked
        self._tenants: OrderedDict[Hashable, _Tenant] = OrderedDict()  # least recently seen first
        self._admitting = anyio.Lock()

    def __len__(self) -> int:
        return len(self._tenants)

    def held(self, principal: object) -> _Tenant | None:
        """The principal's tenant, if it is held."""
        return self._tenants.get(cast("Hashable", principal))

    async def acquire(self, principal: object) -> _Tenant | None:
        """The principal's tenant, with one use taken (give it back with :meth:`release`); ``None`` if no room.

        Raises:
            TypeError: The principal is not hashable.
        """
        key = cast("Hashable", principal)
        tenant = self._tenants.get(key)
        if tenant is None and len(self._tenants) >= self._bound:
            # One new principal at a time looks for room, so two cannot both
            # take the one idle slot.
            async with self._admitting:
                tenant = self._tenants.get(key)
                if tenant is None and len(self._tenants) >= self._bound and not await self._release_an_idle():
                    return None
        if tenant is None:
            # Registered before any await, so the bound holds and concurrent
            # requests of one principal share it.
            tenant = self._tenants[key] = _Tenant(principal, uuid.uuid4().hex)
        tenant.users += 1
        self._tenants.move_to_end(key)
        return tenant

    def release(self, tenant: _Tenant) -> None:
        tenant.users -= 1

    async def _release_an_idle(self) -> bool:
        live = self._tasks.live_owners(self._parked) if isinstance(self._tasks, BoundedTaskStore) else None
        for key, tenant in list(self._tenants.items()):
            if tenant.users:
                continue
            held = tenant.owner in live if live is not None else await self._live(tenant)
            if held:
                continue
            # Asking the store suspends: the principal may have come back meanwhile.
            if tenant.users == 0 and self._tenants.get(key) is tenant:
                del self._tenants[key]
                return True
        return False

    async def _live(self, tenant: _Tenant) -> bool:
        context = ServerCallContext(user=_Owner(tenant.owner), state={PRINCIPAL_STATE_KEY: tenant.principal})
        # Any other store is asked through the SDK's interface: a page of one
        # per live state (each answer copies the task it finds); a task
        # waiting for input only if its status is more recent than ``parked``.
        asked_since = Timestamp()
        asked_since.FromNanoseconds(time.time_ns() - int(self._parked * 1e9))
        for state in _LIVE:
            request = ListTasksRequest(status=state, page_size=1)
            if state in _PARKED:
                request.status_timestamp_after.CopyFrom(asked_since)
            page = await self._tasks.list(request, context)
            if page.tasks:
                return True
        return False


class _ContextBuilder(ServerCallContextBuilder):
    """The SDK's call context, with the principal the guard authenticated (and its owner scope)."""

    def __init__(self) -> None:
        self._default = DefaultServerCallContextBuilder()

    def build(self, request: Request) -> ServerCallContext:
        if request.scope.get(_REFUSED):
            raise UnsupportedOperationError(message=PRINCIPALS_AT_CAPACITY)
        context = self._default.build(request)
        exchange = request.scope.get(EXCHANGE_KEY)
        if isinstance(exchange, Exchange):
            exchange.context = context
            context.state[EXCHANGE_KEY] = exchange
        tenant: _Tenant | None = request.scope.get(_SCOPE_KEY)
        if tenant is not None:
            # Tasks are the tenant's (principals equal to each other share
            # them); the principal is the request's, as authenticate proved it.
            context.user = _Owner(tenant.owner)
            context.state[PRINCIPAL_STATE_KEY] = request.scope.get(_PRINCIPAL_KEY, tenant.principal)
        return context


class _TaskContext(SimpleRequestContextBuilder):
    """A follow-up that names only its task continues in the task's context; every message is admitted first.

    The SDK would give a follow-up a fresh context id, which a task it
    recreated from the store (after :data:`PARKED_TASK_TIMEOUT`) then refuses
    to be updated in. A message takes its room in a :class:`BoundedTaskStore`
    here (a new task's, or what a follow-up adds to its task's history, as
    the request's encoded size), where the SDK builds its context: the last
    step before it runs the executor, and after it answered a follow-up to a
    task it does not hold ``TaskNotFoundError``. So a full store, or an owner
    at its bound, refuses it (a typed JSON-RPC error) with nothing dispatched;
    a follow-up the SDK then refuses gives its room back (:class:`_Handler`).
    """

    def __init__(self, tasks: TaskStore) -> None:
        super().__init__()
        self._tasks = tasks

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if task_id and not context_id:
            stored = await self._tasks.get(task_id, context)
            if stored is not None:
                context_id = stored.context_id
        built = await super().build(context, params, task_id, context_id, task)
        if built.task_id and isinstance(self._tasks, BoundedTaskStore):
            size = 0 if params is None else params.ByteSize()
            if task_id:
                await self._tasks.admit_follow_up(task_id, context, size)
            else:
                await self._tasks.admit(built.task_id, context, size)
        return built


class _Handler(DefaultRequestHandler):
    """The SDK's request handler, taking one answer at a time per task, and only to a task waiting for one.

    The SDK queues every message sent to a task and runs them one by one,
    each with the task as it is by then; a message answering a task that
    is not waiting for input is refused here instead, before it is admitted
    or queued: a finished task with the SDK's own terminal-state refusal,
    one whose call is running (or that another answer is being handled
    for) with :data:`NOT_WAITING`. Whatever room a follow-up was admitted
    to the store with is given back once its request ends, unless a save
    counted the task since (a follow-up the SDK refused after admission).
    Every method the 0.3 binding hands params to marks its request's
    :class:`~._answers.Exchange` as reached first. ``ListTasks`` is refused
    as unsupported: a page of whole tasks, histories and artifacts and
    all, would be a reply bounded only by the store.
    """

    def __init__(self, *, tasks: TaskStore, **options: Any) -> None:
        super().__init__(task_store=tasks, **options)
        self._tasks = tasks
        self._answering: set[str] = set()

    @asynccontextmanager
    async def _follow_up(self, params: SendMessageRequest, context: ServerCallContext) -> AsyncGenerator[None]:
        _reach(context)
        exchange = context.state.get(EXCHANGE_KEY)
        if isinstance(exchange, Exchange) and not exchange.envelope.finite:
            # Before anything is admitted or kept: the SDK could not answer with the task holding it.
            raise InvalidParamsError(message=NOT_FINITE)
        task_id = params.message.task_id
        if not task_id:
            yield
            return
        stored = await self._tasks.get(task_id, context)
        if stored is None:
            # Not this caller's task: the SDK answers TaskNotFoundError.
            yield
            return
        refusal = terminal_refusal(stored)
        if refusal is not None:
            raise refusal
        if stored.status.state != TaskState.TASK_STATE_INPUT_REQUIRED or task_id in self._answering:
            raise UnsupportedOperationError(message=NOT_WAITING)
        # Taken before any await: a concurrent answer finds it taken.
        self._answering.add(task_id)
        try:
            yield
        finally:
            self._answering.discard(task_id)
            if isinstance(self._tasks, BoundedTaskStore):
                await self._tasks.release_follow_up(task_id, context, params.ByteSize())

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        # The SDK's decorators hide the signatures from the type checker.
        base: Any = super()
        send = cast("Callable[[SendMessageRequest, ServerCallContext], Awaitable[Message | Task]]", base.on_message_send)
        async with self._follow_up(params, context):
            return await send(params, context)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        base: Any = super()
        stream = cast("Callable[[SendMessageRequest, ServerCallContext], AsyncGenerator[Event]]", base.on_message_send_stream)
        async with self._follow_up(params, context), aclosing(stream(params, context)) as events:
            async for event in events:
                yield event


    # The 0.3 binding converts a method's params before handing them over
    # here: marking each request reached lets only what failed before that
    # (the conversion) be answered as the client's mistake.

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        _reach(context)
        base: Any = super()
        return await base.on_get_task(params, context)

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        # A page of whole tasks is a reply without bound: listing is not offered.
        _reach(context)
        raise UnsupportedOperationError

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        _reach(context)
        base: Any = super()
        return await base.on_cancel_task(params, context)

    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest, context: ServerCallContext) -> AsyncGenerator[Event]:
        _reach(context)
        base: Any = super()
        stream = cast("Callable[[SubscribeToTaskRequest, ServerCallContext], AsyncGenerator[Event]]", base.on_subscribe_to_task)
        async with aclosing(stream(params, context)) as events:
            async for event in events:
                yield event

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        _reach(context)
        base: Any = super()
        return await base.on_create_task_push_notification_config(params, context)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        _reach(context)
        base: Any = super()
        return await base.on_get_task_push_notification_config(params, context)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        _reach(context)
        base: Any = super()
        return await base.on_list_task_push_notification_configs(params, context)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        _reach(context)
        base: Any = super()
        await base.on_delete_task_push_notification_config(params, context)

    async def on_get_extended_agent_card(self, params: GetExtendedAgentCardRequest, context: ServerCallContext) -> AgentCard:
        _reach(context)
        base: Any = super()
        return await base.on_get_extended_agent_card(params, context)


def _reach(context: ServerCallContext) -> None:
    """Mark the request ``context`` is for as handed to the handler: what fails from here is not its params' reading."""
    exchange = context.state.get(EXCHANGE_KEY)
    if isinstance(exchange, Exchange):
        exchange.reached = True


_ANSWER_GRACE = 1.0
"""Seconds stopping waits, once the running calls are aborted, for the requests carrying their answers to finish."""


class _InFlight:
    """The HTTP requests being answered, so stopping can let the aborted calls' answers out first."""

    def __init__(self) -> None:
        self.count = 0
        self._idle: anyio.Event | None = None

    @contextmanager
    def one(self) -> Generator[None]:
        self.count += 1
        try:
            yield
        finally:
            self.count -= 1
            if self.count == 0 and self._idle is not None:
                self._idle.set()
                self._idle = None

    async def idle(self) -> None:
        while self.count:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()


class _Guard:
    """Host, Origin, body size and authentication, before the SDK sees a request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_origins: tuple[str, ...],
        allowed_hosts: tuple[str, ...],
        authenticate: Authenticate[Any] | None,
        principals: _Principals,
        requests: _InFlight,
    ) -> None:
        self._app = app
        self._requests = requests
        self._allowed_origins = allowed_origins
        self._allowed_hosts = allowed_hosts
        self._authenticate = authenticate
        self._principals = principals
        # Synchronous hooks running in threads, those past their deadline included.
        self._hook_threads = 0
        self._hook_lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        with self._requests.one():
            await self._guarded(scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        if not host_allowed(headers.get("host"), self._allowed_hosts):
            await _refuse(421, "Misdirected Request: Host not allowed")(scope, receive, send)
            return
        if not origin_allowed(headers.get("origin"), self._allowed_origins):
            await _refuse(403, "Forbidden: Origin not allowed")(scope, receive, send)
            return
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_REQUEST_BODY):
            await _refuse(413, "Request body too large")(scope, receive, send)
            return
        body = b""
        if scope["method"] == "POST":
            read = await _read_bounded(receive)
            if read is None:
                await _refuse(413, "Request body too large")(scope, receive, send)
                return
            body = read
        # What the SDK reads: the body again, for a POST.
        downstream = replay_body(body, receive) if scope["method"] == "POST" else receive
        if self._authenticate is None or _route_path(scope) == CARD_PATH:
            await self._answered(scope, downstream, send, body)
            return
        # The card is public, as A2A has it; every call is authenticated on
        # its own. The hook may read the body: it gets its own replay.
        admitted = await self._tenant(Request(scope, replay_body(body, receive)))
        if isinstance(admitted, JSONResponse):
            await admitted(scope, receive, send)
            return
        tenant, principal = admitted
        # No room is the SDK's to answer, in the request's protocol and with
        # its id: the context builder raises its error. The principal is this
        # request's own, which the tenant's (the first equal one) may not be.
        scope = {**scope, _REFUSED: True} if tenant is None else {**scope, _SCOPE_KEY: tenant, _PRINCIPAL_KEY: principal}
        try:
            await self._answered(scope, downstream, send, body)
        finally:
            if tenant is not None:
                self._principals.release(tenant)

    async def _answered(self, scope: Scope, receive: Receive, send: Send, body: bytes) -> None:
        """The SDK's answer to a JSON-RPC request, its errors in the endpoint's words (:mod:`._answers`)."""
        if scope["method"] != "POST" or _route_path(scope) != A2A_PATH:
            await self._app(scope, receive, send)
            return
        envelope = read_envelope(body)
        if isinstance(envelope, JSONResponse):
            await envelope(scope, receive, send)
            return
        exchange = Exchange(envelope)
        await self._app({**scope, EXCHANGE_KEY: exchange}, receive, Answers(send, exchange, _OWN_WORDS))

    async def _in_thread(self, authenticate: Authenticate[Any], request: Request) -> tuple[object] | None:
        """``authenticate(request)`` in a worker thread, abandoned if cancelled; ``None`` if too many are running."""
        with self._hook_lock:
            if self._hook_threads >= _AUTHENTICATE_THREADS:
                return None
            self._hook_threads += 1
        # The thread gives its count back when the hook returns; if it never
        # started (cancelled while waiting for a worker), the caller does.
        state = {"started": False, "abandoned": False}

        def call() -> tuple[object]:
            with self._hook_lock:
                if state["abandoned"]:
                    return (None,)
                state["started"] = True
            try:
                return (authenticate(request),)
            finally:
                with self._hook_lock:
                    self._hook_threads -= 1

        try:
            return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        finally:
            with self._hook_lock:
                if not state["started"]:
                    state["abandoned"] = True
                    self._hook_threads -= 1

    async def _tenant(self, request: Request) -> tuple[_Tenant | None, object] | JSONResponse:
        """The request's tenant (``None`` if there is no room) and its principal, or the answer refusing it."""
        authenticate = cast("Authenticate[Any]", self._authenticate)
        outcome: list[object] = []
        try:
            # The deadline is told apart from the hook's own TimeoutError (a
            # socket timeout is one): only the deadline is a 503.
            with anyio.move_on_after(AUTHENTICATE_TIMEOUT):
                if inspect.iscoroutinefunction(authenticate):
                    principal: object = authenticate(request)
                else:
                    called = await self._in_thread(authenticate, request)
                    if called is None:
                        _logger.error("%d authenticate calls are still running; refusing a request", _AUTHENTICATE_THREADS)
                        return _refuse(503, "Service Unavailable: authentication timed out")
                    (principal,) = called
                if inspect.isawaitable(principal):
                    principal = await cast("Awaitable[object]", principal)
                outcome.append(principal)
        except Exception:
            _logger.exception("authenticate raised")
            return _refuse(500, "Internal error")
        if not outcome:
            _logger.error("authenticate took longer than %ss", AUTHENTICATE_TIMEOUT)
            return _refuse(503, "Service Unavailable: authentication timed out")
        principal = outcome[0]
        if principal is None:
            return _refuse(401, "Unauthorized", {"WWW-Authenticate": "Bearer"})
        try:
            tenant = await self._principals.acquire(principal)
        except TypeError:
            _logger.exception("authenticate returned an unhashable principal")
            return _refuse(500, "Internal error")
        if tenant is None:
            _logger.warning("refusing a request: %d principals are already being served", len(self._principals))
        return tenant, principal


def _withhold_sdk_logs() -> None:
    # Some SDK modules make their logger only when they first log
    # (``logging.getLogger(__name__)`` inside a function: the request
    # handler's validation failures, which a client triggers at will), after
    # the filter was installed: each imported module's logger is made here
    # first, so it is there to be given the filter.
    for name in [name for name in sys.modules if name.startswith("a2a.") and not name.startswith("a2a.client")]:
        logging.getLogger(name)
    # The SDK's client logs only what a server sent it: left as it is.
    withhold("a2a", client="a2a.client")


def _route_path(scope: Scope) -> str:
    """The path the app's routes match, as Starlette's router reads it.

    Mounted under a prefix, or served with a ``root_path``, ``scope["path"]``
    still carries the prefix; the routes see the path without it.
    """
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        if path == root:
            return ""
        if path[len(root)] == "/":
            return path[len(root) :]
    return path


async def _read_bounded(receive: Receive) -> bytes | None:
    """The whole request body, or ``None`` once it passes :data:`MAX_REQUEST_BODY`.

    The SDK reads every body whole before parsing it, so reading it here
    first costs nothing, and a body sent without Content-Length is bounded too.
    """
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body)  # the client left; the app sees it when it reads
        body += message.get("body", b"")
        if len(body) > MAX_REQUEST_BODY:
            return None
        if not message.get("more_body", False):
            return bytes(body)


class _AppRuntimes:
    """``runtime_for(principal)`` over an App's one running program, one runtime per principal held.

    A principal's runtime lives on its tenant in ``principals``, and goes
    when the tenant is released. Principals equal to each other share it,
    and each call is given its own request's principal
    (:func:`._executor.dispatching`), not the first one seen.
    """

    def __init__(self, app: App[Any, Any, Any], principals: _Principals) -> None:
        self.app = app
        self.program: Program[Any, Any] | None = None
        self._anonymous: AgentRuntime[Any, Any] | None = None
        self._principals = principals

    def __call__(self, principal: object) -> AgentRuntime[Any, Any]:
        program = self.program
        if program is None:
            raise RuntimeError("the A2A app's program is not running: serve it with its ASGI lifespan")
        if principal is None:
            if self._anonymous is None:
                self._anonymous = self.app.bind(program)
            return self._anonymous
        tenant = self._principals.held(principal)
        if tenant is not None and tenant.runtime is not None:
            return tenant.runtime
        # Shared by the principals equal to this one, so read per invocation:
        # each call's own principal, as the executor dispatches it (this one
        # only outside a dispatch). A resolver of its own, so a principal
        # that is callable is not taken for one.
        runtime = self.app.bind(program, principal=lambda _invocation: dispatching(principal))
        if tenant is not None:
            tenant.runtime = runtime
        return runtime


@overload
def a2a_app(
    target: App[Any, Any, Any] | AgentRuntime[Any, Any] | RuntimeFor[None],
    card: AgentCard,
    *,
    task_store: TaskStore | None = None,
    max_tasks: int | None = None,
    max_task_bytes: int | None = None,
    max_live_tasks_per_owner: int | None = None,
    authenticate: None = None,
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] = (),
) -> Starlette: ...
# A bound runtime with ``authenticate`` matches no overload (and is a ContractError at run
# time): its principal is its host's, whatever ``authenticate`` proves.
@overload
def a2a_app(
    target: App[Any, Any, P] | RuntimeFor[P],
    card: AgentCard,
    *,
    task_store: TaskStore | None = None,
    max_tasks: int | None = None,
    max_task_bytes: int | None = None,
    max_live_tasks_per_owner: int | None = None,
    authenticate: Authenticate[P],
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] = (),
) -> Starlette: ...
def a2a_app(
    target: App[Any, Any, Any] | AgentRuntime[Any, Any] | RuntimeFor[Any],
    card: AgentCard,
    *,
    task_store: TaskStore | None = None,
    max_tasks: int | None = None,
    max_task_bytes: int | None = None,
    max_live_tasks_per_owner: int | None = None,
    authenticate: Authenticate[Any] | None = None,
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] = (),
) -> Starlette:
    """A Starlette app serving an A2A agent: the card and the JSON-RPC endpoint.

    The card is served at ``/.well-known/agent-card.json`` (with the SDK's
    0.3 fields merged in), JSON-RPC at ``/a2a`` for A2A 1.0 (``SendMessage``,
    ``GetTask``, ``CancelTask``, ``SendStreamingMessage``, ...) and, on the
    same endpoint, 0.3 (``message/send``, ``tasks/get``, ``tasks/cancel``, ...).
    Each task is one capability call, run by :class:`AgentfxExecutor`.

    Args:
        target: What calls are dispatched on:

            - an :class:`agentfx.App`: its program starts and stops with the
              app's ASGI lifespan, and each principal gets a runtime bound to
              it (the App's own principal without ``authenticate``);
            - a bound runtime, used as it is (its host resolves the
              principal; ``authenticate`` is then refused);
            - ``runtime_for(principal)``: the runtime for each call's
              principal (``None`` without ``authenticate``).
        card: The agent card, usually :func:`agentfx.a2a.agent_card` with the
            URL this app is reached at plus ``/a2a``.
        task_store: Where tasks are kept. By default a
            :class:`~agentfx.a2a.BoundedTaskStore` of ``max_tasks`` tasks and
            ``max_task_bytes`` bytes (tasks' encoded size), in memory: it
            evicts the tasks that finished longest ago first, then tasks
            left waiting for input longer than :data:`PARKED_TASK_TIMEOUT`,
            and never a task that is working or waiting less; a message
            that would need such a task's room (a new task, or a follow-up
            growing its task's history past the byte budget) is refused
            with the SDK's ``UnsupportedOperationError`` and nothing is
            dispatched. ``GetTask`` on an evicted task answers
            ``TaskNotFoundError``. Any other ``TaskStore`` keeps what it is given.
        max_tasks: How many tasks the default store keeps, live and
            finished together (:data:`~agentfx.a2a.MAX_TASKS` if ``None``).
        max_task_bytes: How many bytes the default store's tasks may take,
            each counted as its protobuf encoded size
            (:data:`~agentfx.a2a.MAX_TASK_BYTES`, 256 MiB, if ``None``).
        max_live_tasks_per_owner: How many tasks one principal may have in
            progress (working or waiting for input) in the default store
            (:data:`~agentfx.a2a.MAX_LIVE_TASKS_PER_OWNER`, 1000, if
            ``None``); a new task past it is refused with the SDK's
            ``UnsupportedOperationError`` and nothing is dispatched, while
            other principals are served. Without ``authenticate`` every
            caller is one owner: this then bounds the server's tasks in
            progress.
        authenticate: ``authenticate(request)`` (sync or async, bounded by
            :data:`AUTHENTICATE_TIMEOUT`) returns the principal of a JSON-RPC
            request, or ``None`` to refuse it with 401. Principals must be
            hashable; equal principals own the same tasks. The card is
            served to everyone. At most :data:`MAX_PRINCIPALS` principals
            are held at once (see there): a new one past it takes the room
            of an idle one, or is refused with the SDK's
            ``UnsupportedOperationError`` (:data:`PRINCIPALS_AT_CAPACITY`).
        allowed_origins: The ``Origin`` headers allowed, exact or
            ``scheme://host:*``; empty (the default) allows loopback origins
            only. A request without ``Origin`` is never refused for it.
        allowed_hosts: The ``Host`` headers served, exact or ``name:*`` for
            any port; empty (the default) serves only ``127.0.0.1``,
            ``localhost`` and ``[::1]`` on any port, against DNS rebinding.
            Others get 421.

    Raises:
        ContractError: ``authenticate`` with a bound runtime, whose principal
            is fixed by its host and could not be the authenticated one;
            ``max_tasks``, ``max_task_bytes`` or ``max_live_tasks_per_owner``
            with a ``task_store`` (bound that store itself), or below 1.

    A follow-up to a task not waiting for input (its call running, another
    answer to it being handled, or finished) is refused with the SDK's
    ``UnsupportedOperationError`` and dispatches nothing. Every JSON-RPC
    error is answered with its id and code in the endpoint's own fixed
    words, nothing of the SDK's decoder, validator or exception text in it.
    Every POST body is bounded by :data:`MAX_REQUEST_BODY` (413 past it);
    a task left waiting for confirmation releases the SDK's running
    machinery after :data:`PARKED_TASK_TIMEOUT`, and can still be answered.
    When the lifespan ends, every task still running is aborted through its
    invocation's signal (audited ``AgentCancelledError``, answered ``canceled``)
    before an App's program stops.
    The default task store keeps at most ``max_tasks`` tasks and
    ``max_task_bytes`` bytes, as above.

    Serve it with any ASGI server, with its lifespan on, bound to loopback
    unless you mean otherwise: ``uvicorn.run(a2a_app(app, card),
    host="127.0.0.1", port=8000, timeout_graceful_shutdown=5)``. uvicorn
    ends the lifespan, which aborts the tasks still running, only once every
    connection has closed, and a stream or a blocking call stays open until
    its task ends: without ``timeout_graceful_shutdown`` it would wait for
    them. (``agentfx serve --transport a2a`` runs the lifespan around a server
    with its own off, so every open request is answered as it stops.)
    """
    # Before the SDK's pieces are made: the task store's logs from its first line.
    _withhold_sdk_logs()
    if authenticate is not None and isinstance(target, AgentRuntime):
        raise ContractError(
            "a2a_app(authenticate=...) needs an App or runtime_for(principal): "
            "a bound runtime's principal is fixed by its host"
        )
    bounds = {
        "max_tasks": max_tasks,
        "max_task_bytes": max_task_bytes,
        "max_live_tasks_per_owner": max_live_tasks_per_owner,
    }
    for name, bound in bounds.items():
        if task_store is not None and bound is not None:
            raise ContractError(
                f"a2a_app({name}=...) bounds the default task store; "
                "with task_store=..., bound that store itself (e.g. BoundedTaskStore(max_tasks, max_bytes=...))"
            )
    tasks = (
        task_store
        if task_store is not None
        else BoundedTaskStore(
            MAX_TASKS if max_tasks is None else max_tasks,
            max_bytes=MAX_TASK_BYTES if max_task_bytes is None else max_task_bytes,
            max_live_per_owner=MAX_LIVE_TASKS_PER_OWNER if max_live_tasks_per_owner is None else max_live_tasks_per_owner,
            waiting_timeout=PARKED_TASK_TIMEOUT,
        )
    )
    principals = _Principals(MAX_PRINCIPALS, tasks, PARKED_TASK_TIMEOUT)
    app_runtimes = _AppRuntimes(cast("App[Any, Any, Any]", target), principals) if isinstance(target, App) else None
    runtime: AgentRuntime[Any, Any] | RuntimeFor[Any] = (
        app_runtimes if app_runtimes is not None else cast("AgentRuntime[Any, Any] | RuntimeFor[Any]", target)
    )
    executor = AgentfxExecutor(runtime)
    handler = _Handler(
        agent_executor=executor,
        tasks=tasks,
        agent_card=card,
        request_context_builder=_TaskContext(tasks),
        interrupted_task_timeout=PARKED_TASK_TIMEOUT,
    )
    requests = _InFlight()
    _withhold_sdk_logs()

    @asynccontextmanager
    async def serving() -> AsyncGenerator[None]:
        try:
            yield
        finally:
            # Calls still running are aborted through their signals while the
            # program still runs, so each is audited and its task left
            # canceled, rather than torn down unrecorded by the SDK's close;
            # which also drops answers not yet read, so the requests carrying
            # them are let finish first (boundedly: a stream may stay open).
            with anyio.CancelScope(shield=True):
                await executor.abort_running()
                with anyio.move_on_after(_ANSWER_GRACE):
                    await requests.idle()

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncGenerator[None]:
        # Again at the start of serving: an SDK module imported since the app
        # was built (a task store of the SDK's, say) brings loggers of its own.
        _withhold_sdk_logs()
        try:
            if app_runtimes is None:
                async with serving():
                    yield
                return
            async with app_runtimes.app.program() as program:
                app_runtimes.program = program
                try:
                    async with serving():
                        yield
                finally:
                    app_runtimes.program = None
        finally:
            with anyio.CancelScope(shield=True):
                await handler.aclose()

    return Starlette(
        routes=[
            *create_agent_card_routes(card, card_url=CARD_PATH),
            *create_jsonrpc_routes(
                handler, A2A_PATH, context_builder=_ContextBuilder(), enable_v0_3_compat=True
            ),
        ],
        middleware=[
            Middleware(
                _Guard,
                allowed_origins=tuple(allowed_origins),
                allowed_hosts=tuple(allowed_hosts),
                authenticate=authenticate,
                principals=principals,
                requests=requests,
            ),
        ],
        lifespan=lifespan,
    )
