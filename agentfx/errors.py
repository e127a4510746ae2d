"""Failure values and the few exceptions agentfx raises.

Failures an agent can cause are *values*: frozen msgspec Structs tagged by
class name under ``_tag``, so ``msgspec.json.encode(error)`` is the wire form
and ``msgspec.json.decode(data, type=DispatchError)`` restores the exact class
in another process. Their messages are written for the calling agent: they
name the capability and never restate decoder internals. Caller text they
repeat (an unknown name, a URI) passes through :func:`echo` first, so no
failure grows with what the caller sent and every one encodes.

Programmer mistakes are exceptions: :class:`ContractError` at definition or
bind time, :class:`AgentProjectionError` when a projection breaks its schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import msgspec

if TYPE_CHECKING:
    from typing_extensions import TypeIs

__all__ = [
    "AgentAuthorizationError",
    "AgentCancelledError",
    "AgentCapabilityUnavailableError",
    "AgentCompletionTimeoutError",
    "AgentConfirmationRequiredError",
    "AgentInvalidInputError",
    "AgentProjectionError",
    "AgentResourceError",
    "AgentUnknownCapabilityError",
    "ContractError",
    "DispatchError",
    "DispatchFailed",
    "ECHO_LIMIT",
    "Refusal",
    "echo",
    "encodable",
    "format_seconds",
    "is_failure",
    "shown",
]


class ContractError(ValueError):
    """A contract was declared or bound wrongly. Raised at definition or bind time."""


class AgentProjectionError(Exception):
    """A resource or context projection produced a value its schema rejects.

    This is an application bug, not a caller-facing failure; the message never
    contains the offending value.
    """


def format_seconds(seconds: float) -> str:
    """Render a duration the way agent-facing messages do.

    >>> format_seconds(10.0), format_seconds(0.05)
    ('10s', '0.05s')
    """
    return f"{seconds:g}s"


ECHO_LIMIT = 128
"""Characters of caller text (a name, a URI) a failure or an audit entry repeats, before ``…``."""


def echo(text: str) -> str:
    """Caller text as a failure value or an audit entry may repeat it: bounded and always encodable.

    Cut to its first :data:`ECHO_LIMIT` characters plus ``…``, so no answer
    grows with what the caller sent, and with every lone surrogate replaced by
    U+FFFD, so the value always encodes as UTF-8 JSON.

    >>> echo("todos"), len(echo("x" * 10_000)), echo("x" * 200)[-3:]
    ('todos', 129, 'xx…')
    >>> echo("bad " + chr(0xD800) + " name") == "bad \N{REPLACEMENT CHARACTER} name"
    True
    """
    return encodable(text[:ECHO_LIMIT] + "…" if len(text) > ECHO_LIMIT else text)


def encodable(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so it encodes as UTF-8; nothing else changes.

    >>> lone, pair = chr(0xD800), chr(0xD83D) + chr(0xDE00)
    >>> encodable("ok"), encodable(lone + "!") == "\N{REPLACEMENT CHARACTER}!", encodable(pair) == "\N{GRINNING FACE}"
    ('ok', True, True)
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Through UTF-16 with surrogatepass, a well-formed pair becomes its
        # character again and only a lone half is replaced.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def kind_of(value: object) -> str:
    """What a value is, as a definition-time message names it: its type, with its article.

    >>> kind_of(True), kind_of("10"), kind_of(object())
    ('a bool', 'a str', 'an object')
    """
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def shown(value: object) -> str:
    """A non-string name, as a failure names it: its ``repr``, bounded; its type when ``repr`` raises.

    >>> shown(42), shown(None)
    ('42', 'None')
    >>> class Odd:
    ...     def __repr__(self) -> str:
    ...         raise RuntimeError("no")
    >>> shown(Odd())
    '<Odd>'
    """
    try:
        text = repr(value)
    except Exception:
        try:
            text = f"<{type(value).__name__}>"
        except Exception:
            text = "<unprintable>"
    if not isinstance(cast(object, text), str):
        return "<unprintable>"
    return echo(text)


class _Failure(msgspec.Struct, frozen=True, tag_field="_tag", tag=True):
    """Common base: frozen, tagged by class name under ``_tag``."""


class AgentUnknownCapabilityError(_Failure, frozen=True):
    """No capability of that name or Message class is exposed."""

    capability: str
    message: str

    @classmethod
    def of(cls, capability: str) -> AgentUnknownCapabilityError:
        """The failure for a name nothing exposes; the name is repeated :func:`echo`-bounded.

        >>> error = AgentUnknownCapabilityError.of("x" * 4_000_000)
        >>> len(msgspec.json.encode(error)) < 400
        True
        """
        capability = echo(capability)
        return cls(capability=capability, message=f"No such capability: {capability}")


class AgentCapabilityUnavailableError(_Failure, frozen=True):
    """The capability exists, but not in the current Model."""

    capability: str
    tag: str
    message: str

    @classmethod
    def of(cls, capability: str, tag: str) -> AgentCapabilityUnavailableError:
        return cls(capability, tag, f'Capability "{capability}" is not available right now')


class AgentInvalidInputError(_Failure, frozen=True, dict=True):
    """The payload does not match the capability's input schema.

    ``path`` is the JSON path of the first problem in msgspec's notation
    (``$.title``, ``$.todos[0].title``, ``$`` for the root). ``problem`` says
    what to fix in one line of agentfx's own words, naming the field and the
    rule and never the value sent (``"quantity" must be at most 10``); it is
    ``""`` only in an error encoded before it existed. The decoder's own
    exception is kept on :attr:`cause` for the application; it is never encoded.

    >>> error = AgentInvalidInputError.of("create_todo", "RequestedCreateTodo", "$", problem='"title" is required')
    >>> error.message, error.problem
    ('Invalid input for "create_todo"', '"title" is required')
    """

    capability: str
    tag: str
    message: str
    path: str = "$"
    problem: str = ""

    @classmethod
    def of(
        cls, capability: str, tag: str, path: str, cause: BaseException | None = None, *, problem: str = ""
    ) -> AgentInvalidInputError:
        error = cls(capability, tag, f'Invalid input for "{capability}"', path, problem)
        if cause is not None:
            # Kept in the instance dict, which msgspec never encodes. Its traceback
            # is dropped: the frames it holds reach whoever holds this error, a
            # cycle that would keep them alive until the next full collection.
            vars(error)["cause"] = _without_tracebacks(cause)
        return error

    @property
    def cause(self) -> BaseException | None:
        """The decoder's exception, for the application's logs; ``None`` after a wire round trip."""
        return vars(self).get("cause")


class AgentAuthorizationError(_Failure, frozen=True):
    """The principal may not invoke this capability."""

    capability: str
    tag: str
    message: str

    @classmethod
    def of(cls, capability: str, tag: str, reason: str | None = None) -> AgentAuthorizationError:
        """The refusal the agent is told: ``reason``, unless it is absent or blank.

        >>> AgentAuthorizationError.of("delete_todo", "RequestedDeleteTodo", "  ").message
        'Not authorized to invoke "delete_todo"'
        """
        return cls(capability, tag, reason if reason and not reason.isspace() else f'Not authorized to invoke "{capability}"')

    @classmethod
    def declined(cls, capability: str, tag: str, prompt: str) -> AgentAuthorizationError:
        """The person asked to confirm said no.

        >>> AgentAuthorizationError.declined("delete_todo", "RequestedDeleteTodo", "Delete it?").message
        'Declined: Delete it?'
        """
        return cls(capability, tag, f"Declined: {prompt}")


class AgentConfirmationRequiredError(_Failure, frozen=True):
    """``authorize`` allows the call once a person confirms, and this invocation could not ask one.

    Nothing was sent. An adapter that can reach a person shows them
    ``prompt`` and, on approval, runs the call again with
    ``Invocation(confirmed=True)``.

    >>> AgentConfirmationRequiredError.of("delete_todo", "RequestedDeleteTodo", 'Delete "milk"?').message
    '"delete_todo" needs a person to confirm: Delete "milk"?'
    """

    capability: str
    tag: str
    prompt: str
    message: str

    @classmethod
    def of(cls, capability: str, tag: str, prompt: str) -> AgentConfirmationRequiredError:
        return cls(capability, tag, prompt, f'"{capability}" needs a person to confirm: {prompt}')


class AgentCancelledError(_Failure, frozen=True):
    """The invocation was cancelled through its signal.

    ``dispatched`` is true only when the Message is known to have reached update.
    """

    capability: str
    dispatched: bool
    message: str

    @classmethod
    def before_dispatch(cls, capability: str) -> AgentCancelledError:
        return cls(capability, False, f'Invocation of "{capability}" was cancelled before it was dispatched')

    @classmethod
    def while_waiting(cls, capability: str) -> AgentCancelledError:
        return cls(
            capability,
            True,
            f'"{capability}" was dispatched, and waiting for it to complete was cancelled. '
            "The Message still reached update.",
        )

    @classmethod
    def while_sending(cls, capability: str) -> AgentCancelledError:
        return cls(
            capability,
            False,
            f'Invocation of "{capability}" was cancelled while the host was still dispatching it. '
            "Whether the Message reached update is unknown.",
        )


class AgentCompletionTimeoutError(_Failure, frozen=True):
    """The completion wait reached its deadline. It undid nothing."""

    capability: str
    invocation: str
    message: str

    @classmethod
    def while_waiting(cls, capability: str, invocation: str, seconds: float) -> AgentCompletionTimeoutError:
        return cls(
            capability,
            invocation,
            f'"{capability}" was dispatched but did not complete within {format_seconds(seconds)}. '
            "The Message still reached update.",
        )

    @classmethod
    def while_sending(cls, capability: str, invocation: str, seconds: float) -> AgentCompletionTimeoutError:
        return cls(
            capability,
            invocation,
            f'The host was still dispatching "{capability}" after {format_seconds(seconds)}. '
            "Whether the Message reached update is unknown.",
        )


class AgentResourceError(_Failure, frozen=True):
    """A resource read named no such resource."""

    resource: str
    message: str

    @classmethod
    def of(cls, resource: str) -> AgentResourceError:
        """The failure for a resource name nothing declares; the name is repeated :func:`echo`-bounded."""
        resource = echo(resource)
        return cls(resource, f'Cannot read resource "{resource}": no such resource')


def is_failure(outcome: object) -> TypeIs[DispatchError]:
    """Whether ``outcome`` is a failure value (one isinstance check: they share a base class)."""
    return isinstance(outcome, _Failure)


DispatchError = (
    AgentUnknownCapabilityError
    | AgentCapabilityUnavailableError
    | AgentInvalidInputError
    | AgentAuthorizationError
    | AgentCancelledError
    | AgentCompletionTimeoutError
    | AgentConfirmationRequiredError
)
"""Every failure a dispatch can end in; decodes each class back from JSON."""


class Refusal(msgspec.Struct, frozen=True):
    """An authorization refusal with a reason the agent is told.

    A blank reason, or ``None`` (a reason looked up and not found), is no
    reason: the agent is told what ``False`` tells it, ``Not authorized to
    invoke "<capability>"``. A lone surrogate in ``reason`` is replaced by
    U+FFFD, so that the failure encodes as JSON.

    Raises:
        ContractError: ``reason`` is neither a string nor ``None``, so no
            failure could carry it to the agent and be decoded on the other side.

    >>> Refusal("Only the owner may delete a todo").reason
    'Only the owner may delete a todo'
    >>> Refusal(403)
    Traceback (most recent call last):
    ...
    agentfx.ContractError: Refusal takes its reason as a string the agent is told, got an int; return False to refuse without one
    """

    reason: str | None

    def __post_init__(self) -> None:
        # Built by application code at dispatch time, whatever its annotation says.
        reason = cast(object, self.reason)
        if reason is not None and not isinstance(reason, str):
            raise ContractError(
                f"Refusal takes its reason as a string the agent is told, got {kind_of(reason)}; "
                "return False to refuse without one"
            )
        if reason is not None:
            # Often built from the caller's input, which may hold a lone
            # surrogate: the failure made of the reason must encode.
            msgspec.structs.force_setattr(self, "reason", encodable(reason))


class DispatchFailed(Exception):
    """Raised by the raise-style ``call``; ``.error`` is the failure Struct."""

    def __init__(self, error: DispatchError) -> None:
        super().__init__(error.message)
        self.error: DispatchError = error

    def __reduce__(self) -> tuple[type[DispatchFailed], tuple[DispatchError]]:
        # The default would rebuild from ``args`` (the message), losing the failure value
        # whenever the exception crosses a process boundary.
        return (DispatchFailed, (self.error,))


def _without_tracebacks(exc: BaseException) -> BaseException:
    if exc.__cause__ is None and exc.__context__ is None:
        # The usual decoder exception, alone: no chain to walk.
        exc.__traceback__ = None
        return exc
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.__traceback__ = None
        link = link.__cause__ or link.__context__
    return exc
