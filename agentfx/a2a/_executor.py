"""The executor: one A2A task per capability call, its states mapped from the dispatch outcome.

This layer owns what a task means: how a message names a skill (a message in
the user's role, with one data part
``{"skill": <name>, "input": {...}}``, or the same object as JSON text in one
``application/json`` text part, whose numbers are exact), the invocation a task becomes (its id
is the task id, transport ``"a2a"``, a signal that ``CancelTask`` aborts), and
the mapping of an outcome to a task state, as DESIGN §13 fixes it:

========================================  ===================================
outcome                                   task state
========================================  ===================================
dispatched, or completed                  ``completed``, the reply data as an artifact
a declared failure Message, a timeout     ``failed``
a refusal, a malformed message            ``rejected``, the failure as a data part
cancelled (``CancelTask``)                ``canceled``
a person must confirm                     ``input-required``; ``{"confirm": true}`` on the
                                          same task dispatches it again, confirmed
an answer that is not yes or no           ``input-required`` again, at most
                                          :data:`MAX_CONFIRM_REASKS` times; then ``rejected``
a hook or the host raised                 ``failed``, ``Capability "<c>" failed unexpectedly``
a message to a task not waiting for       nothing dispatched; a finished task is refused
input (another answer settled it first)   with the SDK's terminal-state error
========================================  ===================================

What the agent reads (the text, the data) comes from :mod:`agentfx.tools`,
like every other adapter's; this module adds only A2A's spelling. It
deliberately knows nothing of HTTP, authentication or the card: the principal
arrives in the SDK's call context, put there by :mod:`._app`.

The SDK runs executors on asyncio only (its task machinery is ``asyncio.Task``
and ``asyncio.Lock``), so this one does too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import msgspec
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState, TaskStatus
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf import json_format, struct_pb2

# ``TypeVar(default=...)`` (PEP 696) is in ``typing`` from Python 3.13 only.
from typing_extensions import TypeVar

from .._approval import Approval, asked_again
from ..errors import AgentCancelledError, AgentCompletionTimeoutError, AgentConfirmationRequiredError
from ..invocation import AbortController, Invocation
from ..pipeline import DispatchResult
from ..runtime import AgentRuntime
from ..tools import ToolReply, defect_reply, reply
from ._store import FINISHED

__all__ = [
    "MAX_CONFIRM_REASKS",
    "NOT_WAITING",
    "PRINCIPAL_STATE_KEY",
    "TRANSPORT",
    "AgentfxExecutor",
    "RuntimeFor",
    "dispatching",
    "terminal_refusal",
]

_logger = logging.getLogger("agentfx.a2a")

TRANSPORT = "a2a"
"""The audit transport of every call made over A2A."""

PRINCIPAL_STATE_KEY = "agentfx.principal"
"""Where :func:`~agentfx.a2a.a2a_app` puts the authenticated principal in the SDK's ``ServerCallContext.state``."""

CANCEL_GRACE = 5.0
"""Seconds ``CancelTask`` waits for an aborted call to settle before the SDK stops it outright."""

STOPPING = "the server is stopping"
"""The abort reason :meth:`AgentfxExecutor.abort_running` gives by default."""

P = TypeVar("P", default=Any)

RuntimeFor = Callable[[P], "AgentRuntime[Any, Any]"]
"""``runtime_for(principal)``: the runtime a call by ``principal`` is dispatched on (cheap: called per task).

``RuntimeFor[P]`` takes the principals ``authenticate`` returns (``None`` without it).
"""

MALFORMED_TAG = "MalformedMessage"
"""The ``_tag`` of the data part that rejects a message which names no skill call."""

MAX_CONFIRM_REASKS = 3
"""How many answers a task waiting for confirmation asks again after; the next that would ask again rejects it.

An answer asks again when it is malformed, or when it is a yes the call's
prompt no longer matches (the Model changed what it would do). Each answer
is kept in the task's history (the SDK keeps every message, up
to the request body's bound each), so this bounds a task's history to
``2 * MAX_CONFIRM_REASKS + 3`` messages: the call, then each prompt with the
answer it got; the rejection is the task's status. The answers are counted
from the messages the task holds, so no field a client chooses (a role, a
message id) keeps one out of the count.
"""

NOT_WAITING = "The task is not waiting for an answer: only a task in input-required takes one, and only one at a time"
"""The message of the ``UnsupportedOperationError`` refusing a follow-up to a task that is not waiting for input.

Its call is still running, or another answer to it is being handled: the
follow-up dispatches nothing and changes nothing.
"""


_DISPATCHING: ContextVar[tuple[object] | None] = ContextVar("agentfx_a2a_dispatching", default=None)
"""The principal of the request whose call the executor is dispatching, while it does."""


def dispatching(default: object) -> object:
    """The principal of the request whose call is being dispatched here, or ``default`` outside a dispatch.

    A runtime shared by equal principals (one per owner of tasks) resolves
    each invocation's principal with this, so ``authorize`` sees the one
    its own request authenticated (the scopes of the token it presented),
    not the first equal one.
    """
    current = _DISPATCHING.get()
    return default if current is None else current[0]


def terminal_refusal(task: Task) -> UnsupportedOperationError | None:
    """The SDK's own refusal of a message to ``task`` if it has finished, in the SDK's words; else ``None``."""
    if task.status.state not in FINISHED:
        return None
    return UnsupportedOperationError(message=f"Task {task.id} is in terminal state: {TaskState.Name(task.status.state)}")


_CALL_SHAPE = 'A message to this agent carries one data part {"skill": <skill id>, "input": {...}}'
_CALL_ROLE = (
    'A message to this agent is sent with role ROLE_USER ("user" in A2A 0.3) '
    'and carries one data part {"skill": <skill id>, "input": {...}}'
)
_CONFIRM_SHAPE = 'This task waits for a person\'s answer: reply on it with one data part {"confirm": true} or {"confirm": false}'
_JSON = "application/json"
"""The media type of a text part holding exact JSON: a call or an answer read from one, every reply's copy."""
_EXACT_INTEGERS = (
    "A data part carries numbers as doubles, exact only below 2**53: send a larger integer "
    "in a call as JSON text, in one text part of media type application/json"
)
"""Added to the text refusing the input of a call in a data part with a whole number past 2**53."""
_GAVE_UP = (
    f"No valid answer after {MAX_CONFIRM_REASKS + 1} tries: the call was not made. "
    "Start a new task to try again"
)


_ASKED_TOO_OFTEN = (
    f"Asked to confirm {MAX_CONFIRM_REASKS + 1} times, the prompt changing each time: the call was not made. "
    "Start a new task to try again"
)
"""The rejection of a task whose every answer found a new prompt to ask, once it has taken :data:`MAX_CONFIRM_REASKS` answers."""


@dataclass(eq=False)
class _Running:
    controller: AbortController = field(default_factory=AbortController)
    done: anyio.Event = field(default_factory=anyio.Event)


class _Malformed(Exception):
    """A message that is not the call this agent takes; its text is for the client."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


_EXACT = 2**53
"""Past this magnitude a double is not one integer's: 2**53 + 1 arrives as 2**53, 1e300 as no integer sent."""


def _integral(value: object) -> object:
    # google.protobuf.Value keeps every number as a double, so a JSON 3 arrives
    # as 3.0; strict decoding would refuse it for an int field. A whole float
    # the client can only have sent as that integer becomes an int again (an
    # int is accepted where a float is declared); a larger one stays a float,
    # refused for an int field rather than dispatched as an integer nobody sent.
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT:
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in cast("dict[str, object]", value).items()}
    if isinstance(value, list):
        return [_integral(v) for v in cast("list[object]", value)]
    return value


def _past_exact(value: object) -> bool:
    """Whether ``value``, read from a data part, holds a whole number past 2**53 (left a float by :func:`_integral`)."""
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, dict):
        return any(_past_exact(v) for v in cast("dict[str, object]", value).values())
    if isinstance(value, list):
        return any(_past_exact(v) for v in cast("list[object]", value))
    return False


def _carries_doubles(message: Message | None) -> bool:
    """Whether ``message`` is a call in a data part, whose numbers are doubles."""
    return message is not None and len(message.parts) == 1 and message.parts[0].WhichOneof("content") == "data"


def _data_object(message: Message | None, shape: str) -> dict[str, object]:
    """The one part of ``message`` as a JSON object, or :class:`_Malformed`.

    The part is a data part, whose numbers arrive as doubles (a whole one
    below 2**53 is an integer again), or a text part of media type ``application/json``
    holding the same object as JSON text, whose numbers are read exactly: an
    integer past 2**53, which a double would round, arrives as sent.
    """
    if message is None or len(message.parts) != 1:
        raise _Malformed(shape)
    part = message.parts[0]
    content = part.WhichOneof("content")
    if content == "data":
        # A Value encodes to any JSON value, whatever the stub says; a whole number is an integer again.
        try:
            value = _integral(cast(object, json_format.MessageToDict(part.data)))
        except ValueError:
            # A number that is not finite (a JSON 1e400) has no JSON: not a call anyone can make.
            raise _Malformed(shape) from None
    elif content == "text" and part.media_type.split(";", 1)[0].strip().lower() == _JSON:
        try:
            # msgspec refuses a lone surrogate, as the protobuf parser does for a data part.
            value = cast(object, msgspec.json.decode(part.text))
        except (msgspec.DecodeError, RecursionError):
            raise _Malformed(shape) from None
    else:
        raise _Malformed(shape)
    if not isinstance(value, dict):
        raise _Malformed(shape)
    return cast("dict[str, object]", value)


def _from_user(message: Message | None, text: str) -> None:
    """Raises :class:`_Malformed` with ``text`` unless ``message`` is the user's.

    A client speaks as the user (``ROLE_USER``; 0.3's ``"user"`` is converted
    to it): a message in the agent's role is not one this agent takes, as
    a call or as an answer.
    """
    if message is not None and message.role != Role.ROLE_USER:
        raise _Malformed(text)


def _call(message: Message | None) -> tuple[str, object]:
    """The skill and the input a message names."""
    _from_user(message, _CALL_ROLE)
    data = _data_object(message, _CALL_SHAPE)
    skill = data.get("skill")
    # A skill id is a string: anything else is not a call at all (nothing to
    # name in the refusal, nothing to audit), not a call to an unknown skill.
    if not isinstance(skill, str) or not set(data) <= {"skill", "input"}:
        raise _Malformed(_CALL_SHAPE)
    # An absent input is the payload-free call; the pipeline decides what any
    # other input means, and says so in its own words.
    return skill, data.get("input", {})


def _answer(message: Message | None) -> bool:
    """A person's answer to a confirmation: ``{"confirm": true | false}``."""
    _from_user(message, _CONFIRM_SHAPE)
    data = _data_object(message, _CONFIRM_SHAPE)
    answer = data.get("confirm")
    if set(data) != {"confirm"} or not isinstance(answer, bool):
        raise _Malformed(_CONFIRM_SHAPE)
    return answer


def _asked(task: Task) -> AgentConfirmationRequiredError | None:
    """What the task's status asked the person, as the refusal that asked it; ``None`` if it cannot be read.

    Read from the exact JSON text part the server wrote beside the data part
    (see :func:`_data_parts`), never from anything a client sent. A store
    that keeps tasks in the 0.3 shape drops every part's media type, so a
    text part without one is read too, and at last the data part itself
    (its numbers are doubles, which the refusal's strings do not mind).
    """
    if not task.status.HasField("message"):
        return None
    parts = task.status.message.parts
    texts = [part.text for part in parts if part.WhichOneof("content") == "text" and part.media_type in (_JSON, "")]
    for text in texts:
        try:
            return msgspec.json.decode(text, type=AgentConfirmationRequiredError)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
    for part in parts:
        if part.WhichOneof("content") != "data":
            continue
        try:
            return msgspec.convert(json_format.MessageToDict(part.data), AgentConfirmationRequiredError)
        except (msgspec.ValidationError, TypeError, ValueError):
            continue
    return None


def _first_user_message(task: Task) -> Message | None:
    return next((m for m in task.history if m.role == Role.ROLE_USER), None)


def _answers_before(task: Task) -> int:
    """How many answers ``task`` has taken since its call: the prompts the server gave it, less the first.

    Each answer the server takes is followed by a prompt of its own (the
    task's status message, moved into the history by the next one), in the
    agent's role, with an id the server made. So the count reads only what
    the server said: an answer whose message id the SDK finds in the history
    already (and so does not keep) counts all the same, through its prompt.
    A message in the agent's role that a client sent is counted too, which
    can only end the asking sooner. A store that hands the task over with
    the answer already added (the status prompt moved into the history)
    gives the same count.
    """
    prompts = sum(1 for m in task.history if m.role == Role.ROLE_AGENT)
    prompts += 1 if task.status.HasField("message") else 0
    return max(prompts - 1, 0)


def _data_parts(data: dict[str, Any]) -> list[Part]:
    """``data`` as a data part, then as a text part holding its exact compact JSON.

    A data part is a ``google.protobuf.Value``, which holds every number as a
    double: ``7`` goes out as ``7.0`` and an integer past 2**53 is rounded.
    The text part (media type ``application/json``) is the same value
    exactly, as :func:`agentfx.tools.reply` gives it to every adapter (MCP's
    structured content); the data part stays for clients that read one.
    """
    return [
        Part(data=json_format.ParseDict(data, struct_pb2.Value()), media_type=_JSON),
        Part(text=msgspec.json.encode(data).decode(), media_type=_JSON),
    ]


def _text_part(text: str) -> Part:
    return Part(text=text, media_type="text/plain")


class AgentfxExecutor(AgentExecutor):
    """An A2A ``AgentExecutor`` that dispatches each task as one capability call.

    Args:
        runtime: The bound runtime every call is dispatched on, or
            ``runtime_for(principal)`` giving the runtime for the principal
            the request authenticated as (``None`` when nothing
            authenticated it). :func:`~agentfx.a2a.a2a_app` builds the
            latter for an :class:`~agentfx.App`.

    A task starts with a message in the user's role (``ROLE_USER``, 0.3's
    ``"user"``) carrying one data part
    ``{"skill": <capability name>, "input": {...}}`` (``input`` may be left
    out for a capability without payload); one in the agent's role is the
    malformed message, as a call and as an answer. A data part's numbers are
    doubles: a whole one below 2**53 is the integer it was sent as, a larger
    one stays a double (an integer field refuses it, the refusal's text
    saying to send the call as JSON text in an ``application/json`` text
    part, whose numbers are read exactly). The invocation's id is the task
    id and its transport ``"a2a"``. Every outcome leaves the task in the
    state the module docstring lists, with a status message whose text part
    is the reply text (:func:`agentfx.tools.reply`) and, for anything but
    a success, whose data part is the encoded failure; a dispatch's reply
    data is the task's one artifact. Every data part is followed by a text
    part (media type ``application/json``) holding the same value as exact
    JSON: the data part carries numbers as doubles. Nothing raised by a hook or the host
    reaches the client: it is logged here, and the task fails with
    ``Capability "<c>" failed unexpectedly``.

    A task waiting in ``input-required`` for confirmation is answered on the
    same task with ``{"confirm": true}`` (the call is dispatched again,
    ``confirmed=True``, re-reading the Model and re-running every check) or
    ``{"confirm": false}`` (refused: ``Declined: <prompt>``). The answer is
    the client's word, not proof that a person saw the prompt. Any other
    answer asks again, in the same words, :data:`MAX_CONFIRM_REASKS` times
    at most; the answer after that rejects the task (``No valid answer
    after <n> tries: ...``, a ``MalformedMessage`` data part) with nothing
    dispatched and nothing audited, so a task's history stays bounded. A yes
    whose prompt changed meanwhile asks again too, about the call as it
    would now be; once the task has taken :data:`MAX_CONFIRM_REASKS`
    answers, such an answer rejects it (``Asked to confirm <n> times...``,
    the ``AgentConfirmationRequiredError`` as data) with nothing dispatched.

    Only an answer that finds its task in ``input-required`` is taken: the
    SDK queues every message sent to a task and hands each over with the
    task as it is by then, so of several answers sent at once only the
    first can dispatch; one that finds the task finished is refused with
    the SDK's own terminal-state ``UnsupportedOperationError``, and one that
    finds it otherwise changes nothing. (:func:`~agentfx.a2a.a2a_app`
    refuses such follow-ups before they are queued.)
    """

    def __init__(self, runtime: AgentRuntime[Any, Any] | RuntimeFor[Any]) -> None:
        self._runtime = runtime
        self._running: dict[str, _Running] = {}

    def _runtime_for(self, context: RequestContext) -> tuple[AgentRuntime[Any, Any], tuple[object] | None]:
        """The runtime to dispatch on and, for ``runtime_for``, the principal of this request it was made for."""
        runtime = self._runtime
        if isinstance(runtime, AgentRuntime):
            return cast("AgentRuntime[Any, Any]", runtime), None
        # This request's own principal (a follow-up's, not its task's first
        # request's), whichever equal principal the task was started by.
        principal = context.call_context.state.get(PRINCIPAL_STATE_KEY)
        return runtime(principal), (principal,)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run the call a message starts (or answers) and leave its task in the state its outcome maps to."""
        current = context.current_task
        task_id = context.task_id or ""
        # A follow-up that names only the task is given a fresh context id by
        # the SDK; the task keeps the one it started with.
        context_id = current.context_id if current is not None else context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        if current is None:
            # The SDK refuses a status update for a task it has not been given.
            first = Task(id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
            if context.message is not None:
                first.history.append(context.message)
            await event_queue.enqueue_event(first)
        if current is not None and current.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            # The SDK queues every message to a task and hands each over with
            # the task as it is by then: an answer that arrives after another
            # one settled the task is not an answer to anything. It dispatches
            # nothing; only the one answer that found the task waiting does.
            refusal = terminal_refusal(current)
            if refusal is not None:
                # Raised, the SDK answers it and leaves the finished task as it is.
                raise refusal
            # Raising would fail a task whose call is its own business:
            # write nothing, and the request is answered with the task as it is.
            _logger.warning("a follow-up to task %s found it %s: nothing was dispatched", task_id[:64], TaskState.Name(current.status.state))
            return
        try:
            if current is None:
                call = context.message
                skill, payload = _call(call)
                confirmation: bool | None = None
                asked: AgentConfirmationRequiredError | None = None
            else:
                confirmation = _answer(context.message)
                call = _first_user_message(current)
                skill, payload = _call(call)
                asked = _asked(current)
        except _Malformed as exc:
            # A task given at all is waiting for an answer: any other was turned away above.
            waiting = current is not None
            if current is not None and _answers_before(current) < MAX_CONFIRM_REASKS:
                # A slip in the answer does not lose the call: ask again, in
                # the same words (the prompt, and what to send).
                await updater.requires_input(updater.new_agent_message(list(current.status.message.parts)))
                return
            # Each answer stays in the task's history: past the cap, the task
            # ends rather than grow with every slip.
            text = _GAVE_UP if waiting else exc.text
            data = {"_tag": MALFORMED_TAG, "message": text}
            await updater.reject(updater.new_agent_message([_text_part(text), *_data_parts(data)]))
            return
        running = _Running()
        self._running[task_id] = running
        try:
            await updater.start_work()
            answer = await self._dispatch(context, task_id, skill, payload, running, confirmation, asked)
            if (
                current is not None
                and answer[0] == TaskState.TASK_STATE_INPUT_REQUIRED
                and _answers_before(current) >= MAX_CONFIRM_REASKS
            ):
                # Asked again (the prompt changed, so the yes no longer
                # covered it): past the cap the task ends, as after a slip,
                # rather than grow with every answer.
                answer = (TaskState.TASK_STATE_REJECTED, msgspec.structs.replace(answer[1], text=_ASKED_TOO_OFTEN), False)
            if _carries_doubles(call):
                answer = _steered(answer, payload)
            await self._settle(updater, answer)
        finally:
            self._running.pop(task_id, None)
            running.done.set()

    async def _dispatch(
        self,
        context: RequestContext,
        task_id: str,
        skill: str,
        payload: object,
        running: _Running,
        confirmation: bool | None,
        asked: AgentConfirmationRequiredError | None = None,
    ) -> tuple[TaskState, ToolReply, bool]:
        """The task state, the reply, and whether the reply data is an artifact.

        An answer re-runs the call on the Model as it is now, and covers only
        the prompt it answered: a call whose prompt changed meanwhile (or
        whose shown prompt the store lost) asks again, in the new words. A
        "no" never lets the call through, even when it would no longer ask.
        """
        invocation = Invocation(id=task_id, transport=TRANSPORT, signal=running.controller.signal)
        approval: Approval | None = None
        declined: str | None = None
        if confirmation is not None:
            # The answer covers the prompt the task showed, and nothing else:
            # a call that asks something else now is asked again, in the new
            # words; one whose shown prompt cannot be read is asked again too.
            shown = None if asked is None else asked.prompt
            approval = Approval(shown, answer=confirmation)
            invocation = msgspec.structs.replace(invocation, confirm=approval)
            if confirmation is False:
                # A "no" is refused whatever the call would do now, even if it would no longer ask.
                declined = _UNREAD_PROMPT if shown is None else shown
        try:
            runtime, caller = self._runtime_for(context)
            calling = _DISPATCHING.set(caller)
            try:
                outcome = await runtime.messages.attempt(skill, payload, invocation, declined=declined)
            finally:
                _DISPATCHING.reset(calling)
        except Exception:
            # A hook, the host or runtime_for raised: the application's bug,
            # for its log; the client learns only that the call failed.
            _logger.exception("capability %r failed unexpectedly", skill[:128])
            return TaskState.TASK_STATE_FAILED, defect_reply(skill[:128]), False
        if approval is not None:
            # Not the call the person approved: ask about the one it would now be.
            outcome = asked_again(approval.changed, outcome)
        answer = reply(outcome)
        if isinstance(outcome, DispatchResult):
            failed = outcome.completion is not None and outcome.completion.status == "failed"
            state = TaskState.TASK_STATE_FAILED if failed else TaskState.TASK_STATE_COMPLETED
            return state, answer, True
        if isinstance(outcome, AgentCancelledError):
            return TaskState.TASK_STATE_CANCELED, answer, False
        if isinstance(outcome, AgentCompletionTimeoutError):
            return TaskState.TASK_STATE_FAILED, answer, False
        if isinstance(outcome, AgentConfirmationRequiredError):
            return TaskState.TASK_STATE_INPUT_REQUIRED, answer, False
        return TaskState.TASK_STATE_REJECTED, answer, False

    async def _settle(self, updater: TaskUpdater, answer: tuple[TaskState, ToolReply, bool]) -> None:
        state, tool_reply, artifact = answer
        if artifact:
            await updater.add_artifact(_data_parts(tool_reply.data), artifact_id="result", name="result", last_chunk=True)
            message = updater.new_agent_message([_text_part(tool_reply.text)])
        else:
            text = tool_reply.text
            if state == TaskState.TASK_STATE_INPUT_REQUIRED:
                text = f"{text}\n{_CONFIRM_SHAPE}"
            message = updater.new_agent_message([_text_part(text), *_data_parts(tool_reply.data)])
        await updater.update_status(state, message)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Abort the task's running call, and wait (briefly) for it to settle as ``canceled``.

        A task parked in ``input-required`` runs nothing: it is settled
        ``canceled`` here, on its still open event queue, so that its
        subscribers see the end. The SDK would write that state too, but only
        once the queue is closed, which ends their streams without it.
        """
        task_id = context.task_id or ""
        running = self._running.get(task_id)
        if running is None:
            current = context.current_task
            if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                await TaskUpdater(event_queue, task_id, current.context_id).cancel()
            return
        running.controller.abort("cancelled by the A2A client")
        # The call settles as cancelled and execute writes the state; the SDK
        # tears the producer down right after this returns, so wait for that write.
        with anyio.move_on_after(CANCEL_GRACE):
            await running.done.wait()


    async def abort_running(self, reason: str = STOPPING) -> None:
        """Abort every call still running, through its signal, and wait (briefly) for each to settle.

        For a server that stops: each call is audited as the pipeline decides
        (``AgentCancelledError`` once aborted) and its task left ``canceled``,
        instead of being torn down unrecorded. Tasks started afterwards are
        not affected; a server stops accepting them first.
        """
        running = list(self._running.values())
        for each in running:
            each.controller.abort(reason)
        with anyio.move_on_after(CANCEL_GRACE):
            for each in running:
                await each.done.wait()


def _steered(answer: tuple[TaskState, ToolReply, bool], payload: object) -> tuple[TaskState, ToolReply, bool]:
    """``answer``, its text saying how to send an integer past 2**53 when it refuses, for want of an integer, an input holding one.

    Such a number, sent in a data part, is a double no integer field takes;
    the client learns the form that carries it exactly.
    """
    state, tool_reply, artifact = answer
    data = tool_reply.data
    # Only a refusal for want of an integer: the same number in a float field
    # is taken, and a refusal for something else has nothing to do with it.
    if data.get("_tag") != "AgentInvalidInputError" or "must be an integer" not in str(data.get("problem", "")):
        return answer
    if not _past_exact(payload):
        return answer
    return state, msgspec.structs.replace(tool_reply, text=f"{tool_reply.text}\n{_EXACT_INTEGERS}"), artifact


_UNREAD_PROMPT = "what this task asked"
"""Stands in for the prompt a "no" answered when the task's status no longer says it."""
