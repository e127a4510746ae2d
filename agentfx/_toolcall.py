"""What the agent-framework adapters share: the install hint, reading arguments, one call through the runtime, tool metadata.

``agentfx.anthropic``, ``agentfx.openai_agents``, ``agentfx.pydantic_ai`` and
``agentfx.langchain`` each translate a :class:`~agentfx.tools.ToolView` and a
:class:`~agentfx.tools.ToolReply` into their framework's types. The steps that
are the same in all of them live here once: naming the extra when the
framework is not installed, reading arguments the framework hands over as JSON
text (:func:`json_arguments`), running one call so that it never raises (a
defect is logged on the adapter's own logger and answered with
:func:`~agentfx.tools.defect_reply`), the invocation id that keeps the
framework's call id visible, which capabilities a framework that asks per
tool may offer (:func:`offered`) and which tools a whole list shows
(:func:`offered_views`, MCP's ``tools/list`` too), the checks on an entry
point's arguments, and the metadata a framework keeps beside a tool.

Every framework call is answered through :func:`run_call`, so the one check
the runtime cannot make lives there too: a value JSON text cannot hold. The
frameworks read the model's JSON with decoders that keep a ``"\\ud800"``
escape as a lone surrogate (``json.loads``), which is a valid Python ``str``
but not Unicode text, and ``NaN`` or ``Infinity`` as a float: strict decoding
takes either, the Message reaches update and poisons the Model (nothing that
encodes it works again, or a number becomes ``null``). :func:`run_call`
refuses such a payload as invalid input before anything is dispatched. The
check is here, not in the pipeline, because only these paths read JSON with
such decoders: the in-process ``messages.dispatch`` takes the application's
own values, and its cost is unchanged; MCP's parsers and A2A's refuse both
before agentfx sees the call. The
refusal still goes through the runtime, so it comes in the pipeline's order
and is audited like any other.

Private and core-side: it imports no framework and no adapter, and
deliberately knows nothing of any framework's exceptions or result types;
which exception a refusal becomes, and where the reply's data goes, stays
with each adapter.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn, cast

import msgspec

from .contract import available_in
from .errors import AgentInvalidInputError, ContractError, echo, is_failure, kind_of
from .invocation import Invocation, new_invocation_id
from .runtime import AgentRuntime
from .schema import InvalidPayload, field_label
from .tools import ToolReply, ToolView, defect_reply, reply, tool_views

if TYPE_CHECKING:
    from .contract import Capability
    from .errors import DispatchError

__all__ = [
    "UNREADABLE",
    "UnreadableInput",
    "call_invocation_id",
    "check_confirm",
    "check_runtime",
    "json_arguments",
    "missing_framework",
    "not_json",
    "offered",
    "run_call",
    "tool_metadata",
]


class UnreadableInput:
    """Stands in for arguments a framework handed over as text that is not JSON.

    The runtime refuses it at decoding like any input that is not an object
    (``the input must be an object``), audited as usual. It is not text, so
    the model's raw text never reaches the runtime, an audit sink or a log:
    it may hold exactly the secret a ``redact`` key was meant to hide.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNREADABLE"


UNREADABLE = UnreadableInput()
"""The one :class:`UnreadableInput`."""


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e400: a number JSON cannot hold
        raise ValueError("not a finite number")
    return number


def _no_constant(text: str) -> object:
    raise ValueError(f"{text} is not JSON")


def json_arguments(text: str | bytes | bytearray) -> object:
    """The model's JSON arguments text as builtins, or :data:`UNREADABLE` when it is not JSON.

    Empty (or blank) arguments are no arguments, as the OpenAI Agents SDK's own
    tools read them. ``NaN``, ``Infinity``, a trailing comma and the like are
    not JSON, nor is text nested too deeply to read. A ``"\\ud800"`` escape is (RFC 8259's grammar allows it) and is
    kept as the lone surrogate it names, so that :func:`run_call` refuses it
    as invalid Unicode, in the same words on every framework.

    >>> json_arguments('{"title": "Buy milk"}'), json_arguments("  "), json_arguments('{"n": NaN}')
    ({'title': 'Buy milk'}, {}, UNREADABLE)
    >>> json_arguments('{"title": "Buy milk"}'.encode("utf-16"))
    UNREADABLE
    """
    if not text.strip():
        return {}
    try:
        decoded: object = msgspec.json.decode(text)
    except RecursionError:
        # Nested deeper than any decoder here reads; it must not escape the tool.
        return UNREADABLE
    except (msgspec.DecodeError, UnicodeEncodeError):
        # msgspec refuses a lone surrogate, escaped or (in a str) raw, with the
        # rest; the standard decoder keeps it, and refuses everything else
        # that is not JSON (bytes that are not UTF-8 included).
        try:
            # Bytes are read as UTF-8 only: the standard decoder would also
            # take UTF-16 or UTF-32 (it guesses), which msgspec, rightly, refused.
            # An encoded lone surrogate passes, as it would there, for the check.
            readable = bytes(text).decode("utf-8", "surrogatepass") if isinstance(text, (bytes, bytearray)) else text
            return json.loads(readable, parse_float=_finite, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            # UnicodeDecodeError is a ValueError.
            return UNREADABLE
    return decoded


_SURROGATE = re.compile("[\ud800-\udfff]")

# Where a value sits: (where its container sits, its key or index in it); a key that is not a string is ``None``.
_At = tuple["_At | None", "str | int | None"]


def _path(at: _At | None) -> str:
    steps: list[str] = []
    while at is not None:
        at, step = at
        # msgspec's notation: ``.field``, ``[0]``, and ``[...]`` under a key that is not a string.
        steps.append(f".{step}" if isinstance(step, str) else "[...]" if step is None else f"[{step}]")
    return "$" + "".join(reversed(steps))


def _label(path: str) -> str:
    # As agentfx.schema names a field (never the root here: the payload is an object).
    return echo(field_label(path) or "")


def not_json(payload: object) -> InvalidPayload | None:
    """The first value of ``payload`` (at any depth) that JSON text cannot hold, as a problem.

    Such a value is a string (key or value) holding a lone surrogate, or a
    number that is not finite (``NaN``, ``Infinity``): a framework's decoder
    may keep either (``json.loads`` does), though neither is JSON, and strict
    decoding would take them into the Message.

    ``None`` when every string is Unicode text and every number finite, and
    for a payload that is not a ``dict``: the runtime refuses that anyway
    (``the input must be an object``), the problem to fix first. The path is
    in msgspec's notation and the problem in :mod:`agentfx.schema`'s words: it
    names the field, never the value sent, and both are bounded like every echo.

    >>> not_json({"title": "Buy milk"}) is None
    True
    >>> invalid = not_json({"todos": [{"title": "Buy \\ud800 milk"}]})
    >>> invalid.path, invalid.problem
    ('$.todos[0].title', '"todos[0].title" must be valid Unicode')
    >>> not_json({"\\udc00": 1}).problem
    "the input's field names must be valid Unicode"
    >>> not_json({"readings": [1.5, float("nan")]}).problem
    '"readings[1]" must be a finite number'
    """
    if not isinstance(payload, dict):
        return None
    try:
        # The common case, at C speed: what encodes as JSON holds no lone
        # surrogate, and without a null no number that is not finite (msgspec
        # writes NaN and the infinities as null).
        if b"null" not in msgspec.json.encode(payload):
            return None
    except Exception:  # a lone surrogate, or a value JSON cannot hold: look
        pass
    # Depth first in document order (each key before its value), without
    # recursion: a payload may be nested as deep as its decoder allowed. A
    # container met again (a cycle) is not walked twice.
    stack: list[tuple[object, _At | None, bool]] = [(payload, None, False)]
    seen: set[int] = set()
    while stack:
        value, at, is_key = stack.pop()
        if isinstance(value, float) and not is_key:
            if math.isfinite(value):
                continue
            path = _path(at)
            return InvalidPayload(echo(path), None, f'"{_label(path)}" must be a finite number')
        if isinstance(value, str):
            if _SURROGATE.search(value) is None:
                continue
            path = _path(at)
            if not is_key:
                return InvalidPayload(echo(path), None, f'"{_label(path)}" must be valid Unicode')
            if at is None:
                return InvalidPayload("$", None, "the input's field names must be valid Unicode")
            return InvalidPayload(echo(path), None, f'the field names of "{_label(path)}" must be valid Unicode')
        if not isinstance(value, dict | list | tuple) or id(cast("object", value)) in seen:
            continue
        seen.add(id(cast("object", value)))
        if isinstance(value, dict):
            for key, item in reversed(list(cast("dict[object, object]", value).items())):
                stack.append((item, (at, key if isinstance(key, str) else None), False))
                stack.append((key, at, True))
        else:
            entries = list(cast("list[object] | tuple[object, ...]", value))
            stack.extend((entries[index], (at, index), False) for index in range(len(entries) - 1, -1, -1))
    # Nothing but a value JSON cannot hold otherwise (or a real null): the runtime's decoding says what is wrong with it.
    return None


def missing_framework(
    missing: ImportError, *, adapter: str, needs: str, extra: str, packages: frozenset[str]
) -> NoReturn:
    """Raise what an adapter's failed framework import should: the install hint, or the error itself.

    Call it from the ``except ImportError`` around the adapter's framework
    imports. Only a framework that is absent gets the hint; one that is
    installed but broken keeps its own error, which says more than a hint would.

    Args:
        missing: The error the framework import raised.
        adapter: The adapter's module, as the hint names it.
        needs: What to install, in words (``"the Anthropic SDK"``).
        extra: The agentfx extra that installs it.
        packages: The top-level packages whose absence means "not installed".

    >>> missing_framework(ModuleNotFoundError("no", name="anthropic.types"), adapter="agentfx.anthropic",
    ...                   needs="the Anthropic SDK", extra="anthropic", packages=frozenset({"anthropic"}))
    Traceback (most recent call last):
    ImportError: agentfx.anthropic needs the Anthropic SDK, an optional dependency. Install it with: pip install 'agentfx[anthropic]'
    """
    if not isinstance(missing, ModuleNotFoundError) or (missing.name or "").partition(".")[0] not in packages:
        raise missing
    raise ImportError(
        f"{adapter} needs {needs}, an optional dependency. Install it with: pip install 'agentfx[{extra}]'"
    ) from missing


def call_invocation_id(call_id: object) -> str:
    """A fresh invocation id per call, with the framework's call id (when it has one) kept visible.

    A model may reuse a call id (a resumed, approved call does), so the id is
    always fresh; the call id after the slash matches the audit with the
    conversation. The call id is the model's (or the framework's) text, so it
    is kept as every echo is (:func:`~agentfx.errors.echo`): cut to its first
    128 characters, a lone surrogate replaced. The invocation id reaches the
    audit, ``to_message`` and the Messages it builds; it must always encode.
    A call id that is not text (``None``, or a stored block's odd value) is no
    call id.

    >>> call_invocation_id("toolu_1").endswith("/toolu_1"), "/" in call_invocation_id(None)
    (True, False)
    >>> len(call_invocation_id("x" * 10_000)) < 200
    True
    >>> call_invocation_id("toolu_" + chr(0xD800)).endswith("/toolu_\N{REPLACEMENT CHARACTER}")
    True
    """
    fresh = new_invocation_id()
    return f"{fresh}/{echo(call_id)}" if isinstance(call_id, str) else fresh


def check_runtime(runtime: object, where: str) -> None:
    """Raise :class:`~agentfx.ContractError` unless ``runtime`` is a bound runtime.

    A framework builds its tools long before the first call: a ``Definition``
    (or anything else) passed by mistake must be named where it was passed,
    not fail inside the framework's run.

    >>> check_runtime(None, "function_tools(runtime)")
    Traceback (most recent call last):
    agentfx.ContractError: function_tools(runtime) needs a bound agentfx.AgentRuntime, got a NoneType: pass agentfx.bind(definition, host=...), or app.bind(program) for an agentfx.App
    """
    if not isinstance(runtime, AgentRuntime):
        raise ContractError(
            f"{where} needs a bound agentfx.AgentRuntime, got {kind_of(runtime)}: "
            "pass agentfx.bind(definition, host=...), or app.bind(program) for an agentfx.App"
        )


def check_confirm(confirm: object, where: str) -> None:
    """Raise :class:`~agentfx.ContractError` unless ``confirm`` is ``None`` or callable.

    Otherwise every call that asks a person would fail (a defect) long after
    the tools were built.

    >>> check_confirm(True, "structured_tools")
    Traceback (most recent call last):
    agentfx.ContractError: structured_tools(confirm=True): confirm is an async function taking a ConfirmationRequest and answering a bool, or None
    """
    if confirm is not None and not callable(confirm):
        raise ContractError(
            f"{where}(confirm={confirm!r}): confirm is an async function taking a ConfirmationRequest "
            "and answering a bool, or None"
        )


def offered(
    runtime: AgentRuntime[Any, Any], capabilities: Sequence[Capability[Any, Any]], logger: logging.Logger
) -> list[bool]:
    """Whether each of ``capabilities`` is available in the current Model (read once); never raises.

    The same decision as ``runtime.messages.available()`` (a capability
    without ``available`` is always offered), for only the capabilities a
    framework asks about. A hook that raises, or a Model that cannot be read,
    is logged on ``logger`` with its traceback and the capability not offered:
    the framework would otherwise end its run with the exception, or show its
    text to the model. A call that still reaches the runtime is answered as a
    defect there.

    >>> import msgspec, agentfx
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> class Pong(msgspec.Struct, tag=True):
    ...     pass
    >>> runtime = agentfx.bind(
    ...     agentfx.define(agentfx.expose(
    ...         Ping | Pong, agentfx.variant(Ping, "Ping"), agentfx.variant(Pong, "Pong", available=lambda m: 1 / 0)
    ...     )),
    ...     host=agentfx.Host(model=lambda: None, dispatch=lambda message: None),
    ... )
    >>> offered(runtime, runtime.definition.capabilities, logging.getLogger("doctest"))
    [True, False]
    """
    try:
        model = runtime.host.model()
    except Exception:
        logger.exception("reading the Model failed; no capability is offered")
        return [False] * len(capabilities)
    answers: list[bool] = []
    for capability in capabilities:
        try:
            answers.append(available_in(capability, model))
        except Exception:
            logger.exception("the availability of capability %r could not be read; it is not offered", capability.name)
            answers.append(False)
    return answers


def offered_views(runtime: AgentRuntime[Any, Any], logger: logging.Logger) -> list[ToolView]:
    """The tools to list: each capability :func:`offered` decides is available, in declaration order; never raises.

    What a whole-list adapter shows (MCP's ``tools/list``, Anthropic's
    ``tool_params``, LangChain's ``structured_tools``): a hook that raises
    hides its own tool, not every other.
    """
    shown = offered(runtime, runtime.definition.capabilities, logger)
    views = tool_views(runtime, available_only=False)
    return [view for view, show in zip(views, shown, strict=True) if show]


async def run_call(
    runtime: AgentRuntime[Any, Any], name: str, payload: object, invocation: Invocation, logger: logging.Logger
) -> tuple[ToolReply, DispatchError | None]:
    """Dispatch one call and answer it; never raises an ``Exception``.

    Every framework either aborts its run or shows the model an exception's
    text when a tool raises, so a defect (a hook or the host raised) is logged
    on ``logger`` and answered with :func:`~agentfx.tools.defect_reply`.

    A payload with a lone surrogate or a number that is not finite (:func:`not_json`) is refused as invalid
    input naming the field: the runtime is handed :data:`UNREADABLE` instead,
    so the refusal keeps the pipeline's order (an unknown or unavailable
    capability is answered as such) and its audit entry, and nothing is sent.

    Returns:
        The reply, and the failure value when the runtime refused the call
        (``None`` for a dispatch that reached update, and for a defect).

    >>> import anyio, logging, msgspec, agentfx
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> runtime = agentfx.bind(
    ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app"))),
    ...     host=agentfx.Host(model=lambda: None, dispatch=lambda message: None),
    ... )
    >>> answer, failure = anyio.run(run_call, runtime, "ping", {}, agentfx.Invocation(), logging.getLogger("x"))
    >>> answer.text, failure
    ('Dispatched Ping', None)
    """
    try:
        invalid = not_json(payload)
        if invalid is None:
            outcome = await runtime.messages.attempt(name, payload, invocation)
        else:
            outcome = await runtime.messages.attempt(name, UNREADABLE, invocation)
            if isinstance(outcome, AgentInvalidInputError):
                # Refused at decoding, as every stand-in is: say what is wrong with the payload itself.
                outcome = AgentInvalidInputError.of(
                    outcome.capability, outcome.tag, invalid.path, problem=invalid.problem
                )
        return reply(outcome), outcome if is_failure(outcome) else None
    except Exception:
        logger.exception("capability %r failed unexpectedly", name)
        return defect_reply(name), None


def tool_metadata(view: ToolView) -> dict[str, Any]:
    """What a framework keeps beside a tool and never sends a model: the output schema, title and hints.

    >>> from agentfx.hints import Hints
    >>> view = ToolView("ping", "Ping", "Ping the app", {}, {"type": "object"}, Hints(read_only=True))
    >>> tool_metadata(view)
    {'output_schema': {'type': 'object'}, 'title': 'Ping', 'hints': {'read_only': True}}
    """
    metadata: dict[str, Any] = {"output_schema": view.output_schema}
    if view.title is not None:
        metadata["title"] = view.title
    if view.hints is not None:
        # Only what the capability said: ``None`` is unsaid, not "no".
        metadata["hints"] = {k: v for k, v in msgspec.structs.asdict(view.hints).items() if v is not None}
    return metadata
