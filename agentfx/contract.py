"""Declaring a contract: which Messages agents may send, and under what rules.

This module owns the declaration API (:func:`variant`, :func:`action`,
:func:`expose`, :func:`resource`, :func:`projection`, :func:`define`, and
:class:`Declarations`, the same methods with the Model and principal types
bound) and every check that can run at definition time, so a mistake raises
:class:`~agentfx.ContractError` where it was written rather than at the first
call. It deliberately knows nothing of dispatch, hosts or transports: a
:class:`Definition` is plain data, and binding one to a host is
:mod:`agentfx.runtime`'s (the typed ``for_model`` builder, which offers both,
lives above both in :mod:`agentfx.builder`).
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import UnionType
from typing import Any, Generic, Protocol, TypeVar, cast, overload

import msgspec

from .completion import Completion, Source, StateCompletion, asynchronous, truth
from .confirm import Confirm
from .errors import ContractError, Refusal, kind_of
from .hints import Hints
from .invocation import Invocation
from .naming import check_name, default_name, message_tag
from .schema import InputCodec, json_schema, project

__all__ = [
    "Action",
    "AuthorizationRequest",
    "Capability",
    "Declarations",
    "Definition",
    "Exposable",
    "Exposed",
    "InvocationContext",
    "Projection",
    "Resource",
    "Variant",
    "action",
    "define",
    "expose",
    "projection",
    "resource",
    "variant",
]

M = TypeVar("M")
P = TypeVar("P")
Msg = TypeVar("Msg")
I = TypeVar("I")
R = TypeVar("R")
V = TypeVar("V")

AnyCompletion = Completion[Any, Any] | StateCompletion[Any, Any, Any]


class _MessageClass(Protocol[Msg]):
    """A class whose instances are ``Msg``, matched exactly rather than covariantly.

    Every class has ``__subclasses__``, and its ``list`` return is invariant, so a
    parameter typed ``_MessageClass[Msg]`` fixes ``Msg`` to the class passed. With
    ``type[Msg]`` a ``to_message`` returning another Message would silently widen
    ``Msg`` to a union of both classes instead of being a type error.
    """

    def __subclasses__(self) -> list[type[Msg]]: ...


class InvocationContext(msgspec.Struct, Generic[M, P], frozen=True):
    """What ``to_message`` sees: the invocation's one Model snapshot, its principal and invocation."""

    model: M
    principal: P
    invocation: Invocation


class AuthorizationRequest(msgspec.Struct, Generic[P, I, M], frozen=True):
    """What ``authorize`` sees: the principal, the decoded input, the snapshot and the transport."""

    principal: P
    input: I
    model: M
    transport: str


AuthorizeResult = bool | Refusal | Confirm
Authorize = Callable[[AuthorizationRequest[P, I, M]], AuthorizeResult | Awaitable[AuthorizeResult]]


class Exposable(Generic[M, P]):
    """What :func:`expose` takes: a declaration for Model ``M`` and principal ``P``.

    :class:`Variant` is the one kind. ``expose`` is variadic, so its parameter
    cannot name each variant's Message and input types; typed as
    ``Variant[M, P, Any, Any]`` it would hand that ``Any`` to every lambda of a
    ``variant(...)`` written inside the call. This base names only what all
    variants of one contract share, so each ``variant(...)`` is inferred on its
    own, inside ``expose`` exactly as outside.
    """

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Variant(Exposable[M, P], Generic[M, P, Msg, I]):
    """One Message declared for exposure, before :func:`expose` checks it against its union."""

    message: type[Msg]
    description: str
    name: str | None = None
    available: Callable[[M], bool] | None = None
    input: type[I] | None = None
    to_message: Callable[[I, InvocationContext[M, P]], Msg] | None = None
    authorize: Authorize[P, I, M] | None = None
    completion: AnyCompletion | None = None
    title: str | None = None
    hints: Hints | None = None
    may_confirm: bool = False

    @property
    def input_type(self) -> type[Any]:
        """What the agent's payload decodes to: ``input``, or the Message class itself for a direct variant."""
        return self.input if self.input is not None else self.message


@dataclass(frozen=True, slots=True, init=False)
class Action(Generic[I, Msg]):
    """An action the application already declared for its UI, exposable with :func:`action`.

    ``to_message(input, ctx)`` has a variant's signature; ``message`` is the
    Message class it makes, and a ``to_message`` typed to make another class is
    a type error.

    >>> import msgspec
    >>> class AddedToCart(msgspec.Struct, tag=True):
    ...     sku: str
    >>> class AddToCartInput(msgspec.Struct):
    ...     sku: str
    >>> add = Action("add_to_cart", "Add an item", AddToCartInput,
    ...              lambda i, ctx: AddedToCart(sku=i.sku), message=AddedToCart)
    >>> add.message is AddedToCart
    True
    """

    name: str
    description: str
    input: type[I]
    to_message: Callable[[I, InvocationContext[Any, Any]], Msg]
    message: type[Msg]

    def __init__(
        self,
        name: str,
        description: str,
        input: type[I],
        to_message: Callable[[I, InvocationContext[Any, Any]], Msg],
        message: _MessageClass[Msg],
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "input", input)
        object.__setattr__(self, "to_message", to_message)
        object.__setattr__(self, "message", message)


@dataclass(frozen=True, slots=True, eq=False)
class Capability(Generic[M, P]):
    """One exposed capability, checked and ready to dispatch.

    ``input_type`` is what the agent's payload decodes to: the Message class
    itself for a direct variant, else the variant's ``input`` Struct.
    """

    name: str
    tag: str
    description: str
    message: type[Any]
    input_type: type[Any]
    direct: bool
    codec: InputCodec[Any]
    available: Callable[[M], bool] | None
    authorize: Authorize[P, Any, M] | None
    to_message: Callable[[Any, InvocationContext[M, P]], Any] | None
    completion: AnyCompletion | None
    title: str | None = None
    hints: Hints | None = None
    may_confirm: bool = False


def available_in(capability: Capability[M, Any], model: M) -> bool:
    """Whether ``capability`` may be offered in ``model``: no ``available``, or one that holds.

    Raises whatever the hook raises (a defect), and refuses an awaitable answer.
    """
    available = capability.available
    return available is None or truth(available(model), "available")


@dataclass(frozen=True, slots=True, eq=False)
class Exposed(Generic[M, P]):
    """The result of :func:`expose`: the union and its exposed capabilities, in declaration order."""

    union: object
    capabilities: tuple[Capability[M, P], ...]


@dataclass(frozen=True, slots=True, eq=False)
class Resource(Generic[M]):
    """A named read-only projection of the Model."""

    name: str
    description: str
    schema: object
    read: Callable[[M], object]

    def encode(self, model: M) -> object:
        """``read(model)`` encoded through ``schema`` into builtins.

        Raises:
            AgentProjectionError: The value does not match the schema.
        """
        return project(self.schema, self.read(model), f'The resource "{self.name}" projection does not match its declared schema')

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of ``schema``, as declared.

        Agents are shown it as served (:func:`agentfx.resources`): its
        numbers also admit ``null``, which is how JSON carries a float that
        is not finite.
        """
        return json_schema(self.schema)


@dataclass(frozen=True, slots=True, eq=False)
class Projection(Generic[M]):
    """The context projected for agents."""

    schema: object
    read: Callable[[M], object]

    def encode(self, model: M) -> object:
        """``read(model)`` encoded through ``schema`` into builtins.

        Raises:
            AgentProjectionError: The value does not match the schema.
        """
        return project(self.schema, self.read(model), "The context projection does not match its declared schema")

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of ``schema``, as declared.

        Agents are shown it as served (:func:`agentfx.context_schema`): its
        numbers also admit ``null``, which is how JSON carries a float that
        is not finite.
        """
        return json_schema(self.schema)


@dataclass(frozen=True, slots=True, eq=False)
class Definition(Generic[M, P]):
    """A whole contract: capabilities, resources and the context projection. Plain data."""

    union: object
    capabilities: tuple[Capability[M, P], ...]
    resources: tuple[Resource[M], ...] = ()
    context: Projection[M] | None = None


_WRITE_DEFINE = "write define(expose(Message, variant(...), ...))"


def check_definition(where: str, definition: object) -> Definition[Any, Any]:
    """``definition`` if it is a :class:`Definition`, else the :class:`ContractError` ``where`` raises.

    Whatever takes a contract checks it where it is given, so a forgotten
    ``define(...)`` is named there rather than failing on a missing attribute
    at the first listing or call.

    Args:
        where: What took it, as the message names it (``bind()``).
        definition: What it was given as ``definition``.

    >>> import msgspec
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> check_definition("bind()", expose(Ping, variant(Ping, "Ping")))
    Traceback (most recent call last):
    ...
    agentfx.ContractError: bind() takes the result of define(...) as "definition", got the result of expose(...); write define(expose(Message, variant(...), ...))
    """
    if isinstance(definition, Definition):
        return cast("Definition[Any, Any]", definition)
    inner: object = getattr(definition, "definition", None)
    if isinstance(inner, Definition):
        # An agentfx.App (duck-typed: the app layer sits above this one) holds its contract.
        kind = type(definition).__name__
        raise ContractError(
            f'{where} takes the result of define(...) as "definition", got an {kind}; pass its contract, app.definition'
        )
    # An Exposed's repr lists every capability's hooks; what it is says more.
    got = "the result of expose(...)" if isinstance(definition, Exposed) else repr(definition)
    raise ContractError(f'{where} takes the result of define(...) as "definition", got {got}; {_WRITE_DEFINE}')


def _union_members(union: object) -> tuple[type[Any], ...]:
    # ``type Message = A | B`` (a TypeAliasType) names its union, or its one
    # class, lazily: unwrapped first, so an alias of a class is that class.
    # Bounded: two aliases may name each other.
    for _ in range(32):
        if not (hasattr(union, "__value__") and hasattr(union, "__type_params__")):
            break
        union = cast(object, getattr(union, "__value__"))
    members: tuple[object, ...]
    if isinstance(union, type):
        members = (union,)
    elif typing.get_origin(union) is typing.Union or isinstance(union, UnionType):
        members = typing.get_args(union)
    else:
        raise ContractError(f"expose() needs a Message class or a union of Message classes, got {union!r}")
    if len(members) == 1:
        # One class needs no tags; a direct variant of a class that is not a
        # Struct is refused with its capability, as an input msgspec cannot decode.
        return cast("tuple[type[Any], ...]", members)
    for member in members:
        if not (isinstance(member, type) and issubclass(member, msgspec.Struct)):
            what = "None" if member is None or member is type(None) else _type_name(cast(object, member))
            raise ContractError(
                f"expose() needs a Message class or a union of Message classes, and {what} in {_type_name(union)} "
                "is not a Message: a Message is a msgspec.Struct class"
            )
    structs = cast("tuple[type[msgspec.Struct], ...]", members)
    _check_decodable(structs)
    return structs


def _type_name(t: object) -> str:
    """``AddedItem``, ``int``, ``AddedItem | int``: a type as its author wrote it, without module paths."""
    if isinstance(t, type):
        return t.__qualname__
    return re.sub(r"\b(?:[A-Za-z_][A-Za-z0-9_]*\.)+(?=[A-Za-z_])", "", repr(t))


def _check_decodable(members: tuple[type[msgspec.Struct], ...]) -> None:
    """Refuse a Message union msgspec cannot decode, naming the classes and the fix.

    A union of several Structs decodes only if each is tagged, by one tag
    field, with tags of its own; otherwise a Message sent to another process
    (``agentfx.redis``) could never be read back, and the manifest would
    advertise tags the JSON never carries. msgspec builds the decoder of the
    union itself without looking into the fields, so this is cheap.

    >>> import msgspec
    >>> class Added(msgspec.Struct):
    ...     name: str
    >>> class Removed(msgspec.Struct):
    ...     name: str
    >>> _check_decodable((Added, Removed))
    Traceback (most recent call last):
    ...
    agentfx.ContractError: Cannot expose the Message union Added | Removed: Added and Removed are not tagged, and msgspec decodes a union of Structs only by their tags. Declare every Message of a union with tag=True: class Added(msgspec.Struct, tag=True)
    """
    if len(members) < 2:
        return
    try:
        msgspec.json.Decoder(typing.Union[members])  # a union built at run time: only Union[...] can
    except TypeError as exc:
        why = str(exc)
    else:
        return
    union = " | ".join(m.__qualname__ for m in members)
    where = f"Cannot expose the Message union {union}"
    untagged = [m.__qualname__ for m in members if m.__struct_config__.tag is None]
    if untagged:
        are = f"{untagged[0]} is" if len(untagged) == 1 else f"{_and(untagged)} are"
        raise ContractError(
            f"{where}: {are} not tagged, and msgspec decodes a union of Structs only by their tags. "
            f"Declare every Message of a union with tag=True: class {untagged[0]}(msgspec.Struct, tag=True)"
        )
    fields: dict[str, list[str]] = {}
    tags: dict[object, list[str]] = {}
    for m in members:
        fields.setdefault(m.__struct_config__.tag_field or "type", []).append(m.__qualname__)
        tags.setdefault(m.__struct_config__.tag, []).append(m.__qualname__)
    if len(fields) > 1:
        said = "; ".join(f'{_and(names)} by "{field}"' for field, names in fields.items())
        raise ContractError(f"{where}: its Messages are tagged by different tag fields ({said}). Use one tag_field for them all")
    for tag, names in tags.items():
        if len(names) > 1:
            raise ContractError(f"{where}: {_and(names)} share the tag {tag!r}. Give each Message its own tag")
    raise ContractError(f"{where}: msgspec cannot decode it ({why})")


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _check_completion(
    name: str, completion: AnyCompletion | None, members: frozenset[type[Any]], message: type[Any]
) -> None:
    """Refuse a malformed completion of the capability ``name``, which dispatches ``message``.

    Args:
        name: The capability's name, as the refusals name it.
        completion: What the variant declared, unchecked (untyped callers can pass anything).
        members: The classes of the Message union.
        message: The capability's own Message class.

    Raises:
        ContractError: The completion is malformed; the message says how.
    """
    where = f'Cannot expose "{name}"'
    if completion is None:
        return
    if isinstance(completion, StateCompletion):
        state = completion
        check_hook(where, "predicate", state.predicate, ("value", "request"), synchronous=True)
        if state.projection is not None:
            check_hook(where, "projection", state.projection, ("the Model",), synchronous=True)
        if state.source is not None:
            if not isinstance(cast(object, state.source), Source):
                raise ContractError(f"{where}: its completion's source must be an agentfx.Source")
            check_hook(where, "Source.get", state.source.get, (), synchronous=True)
            check_hook(where, "Source.subscribe", state.source.subscribe, ("listener",), synchronous=True)
        return
    # The annotation promises a completion, but untyped callers can pass anything.
    if not isinstance(cast(object, completion), Completion):
        raise ContractError(
            f"{where}: its completion must be an agentfx.Completion(...) or agentfx.when(...), got {completion!r}"
        )
    if completion.correlate is not None:
        check_hook(where, "correlate", completion.correlate, ("request", "result", "call"), synchronous=True)
    if completion.correlate_key is not None:
        # ``Completion`` itself refused anything but a pair.
        request_key, result_key = completion.correlate_key
        check_hook(where, "correlate_key[0]", request_key, ("request", "call"), synchronous=True)
        check_hook(where, "correlate_key[1]", result_key, ("result",), synchronous=True)
    if not completion.success:
        raise ContractError(f'Cannot expose "{name}": its completion contract names no success Message')
    for cls in completion.success:
        if cls in completion.failure:
            raise ContractError(f'Cannot expose "{name}": "{message_tag(cls)}" is both a success and a failure Message')
    for cls in (*completion.success, *completion.failure):
        if cls not in members:
            raise ContractError(
                f'Cannot expose "{name}": its completion Message "{message_tag(cls)}" is not a variant of this Message union'
            )
    # The runtime observes every processed Message, the dispatched one included: a completion on
    # the capability's own Message would be met by the request itself, before anything answered it.
    # The class itself is enough: the only subclass ``to_message`` may make instead carries the
    # same tag, and a union refuses two members sharing one, so no completion can name it.
    for role, classes in (("success", completion.success), ("failure", completion.failure)):
        for cls in classes:
            if cls is message:
                raise ContractError(
                    f'Cannot expose "{name}": "{message_tag(cls)}" is both the Message it dispatches and a {role} Message'
                )


def _check_schema(schema: object, what: str) -> None:
    try:
        json_schema(schema)
    except (TypeError, ValueError, NameError) as exc:
        raise ContractError(f"{what}: its schema cannot be described ({exc})") from None


_COUNTS = ("no arguments", "one argument", "two arguments", "three arguments")


def check_hook(where: str, role: str, hook: object, takes: tuple[str, ...], *, synchronous: bool = False) -> None:
    """Refuse a hook that cannot be called as it will be: ``hook(*takes)``, positionally.

    Checked once, where the contract is written, so a wrong hook is a
    :class:`ContractError` naming it rather than a ``TypeError`` at the first
    call (or, listed with others, a failure of calls to other capabilities).
    A signature that cannot be read (some builtins) or takes ``*args`` passes.

    >>> check_hook('Cannot expose "A"', "available", lambda: True, ("the Model",))
    Traceback (most recent call last):
    ...
    agentfx.ContractError: Cannot expose "A": "available" must take one argument (the Model); it takes no arguments
    """
    wanted = _COUNTS[len(takes)] + (f" ({', '.join(takes)})" if takes else "")
    if not callable(hook):
        raise ContractError(f'{where}: "{role}" must be a function taking {wanted}; it is {kind_of(hook)}')
    why = asynchronous(hook) if synchronous else None
    if why is not None:
        raise ContractError(f'{where}: "{role}" must answer synchronously; {why}')
    try:
        # What will be called, not what a functools.wraps decorator wraps:
        # the wrapper may take other arguments than the function it calls.
        signature = inspect.signature(hook, follow_wrapped=False)
    except (TypeError, ValueError):
        return  # Nothing to read (some builtins and C callables): calling it will tell.
    try:
        signature.bind(*takes)
    except TypeError:
        raise ContractError(f'{where}: "{role}" must take {wanted}; it takes {_parameters(signature)}') from None


def _parameters(signature: inspect.Signature) -> str:
    """``(model, principal)``: the parameter names alone, as the caller wrote them."""
    return bare_signature(signature) if signature.parameters else "no arguments"


def bare_signature(signature: inspect.Signature) -> str:
    """``(a, b, *rest)``: the parameter names alone, since defaults and annotations can be long.

    >>> import inspect
    >>> bare_signature(inspect.signature(lambda model, *, limit=3: None))
    '(model, *, limit)'
    """
    bare = [
        parameter.replace(default=parameter.empty, annotation=parameter.empty)
        for parameter in signature.parameters.values()
    ]
    return str(signature.replace(parameters=bare, return_annotation=signature.empty))


def _capability(v: Variant[Any, Any, Any, Any], members: frozenset[type[Any]]) -> Capability[Any, Any]:
    cls = v.message
    # The annotation promises a class, but untyped callers can pass anything.
    if not isinstance(cast(object, cls), type):
        raise ContractError(f"Cannot expose {cls!r}: it is not a Message class")
    tag = message_tag(cls)
    if cls not in members:
        raise ContractError(f'Cannot expose "{tag}": it is not a variant of this Message union')
    if v.input is not None and v.to_message is None:
        raise ContractError(f'Cannot expose "{tag}": "input" was provided without "to_message"')
    if v.to_message is not None and v.input is None:
        raise ContractError(f'Cannot expose "{tag}": "to_message" was provided without "input"')
    name = check_name(tag, v.name if v.name is not None else default_name(tag))
    _check_description(f'Cannot expose "{tag}"', v.description, "what the capability does")
    input_type = v.input_type
    if not (isinstance(cast(object, input_type), type) and issubclass(input_type, msgspec.Struct)):
        raise ContractError(f'Cannot expose "{tag}": its input must be a msgspec Struct type')
    try:
        codec: InputCodec[Any] = InputCodec(input_type)
    except TypeError as exc:
        raise ContractError(f'Cannot expose "{tag}": {exc}') from None
    where = f'Cannot expose "{tag}"'
    if v.available is not None:
        check_hook(where, "available", v.available, ("the Model",), synchronous=True)
    if v.to_message is not None:
        check_hook(where, "to_message", v.to_message, ("the input", "an InvocationContext"), synchronous=True)
    if v.authorize is not None:
        check_hook(where, "authorize", v.authorize, ("an AuthorizationRequest",))
    _check_completion(name, v.completion, members, cls)
    title, hints = _check_presentation(tag, v.title, v.hints)
    if v.may_confirm and v.authorize is None:
        raise ContractError(f'Cannot expose "{tag}": "may_confirm" was declared without "authorize", which asks for it')
    return Capability(
        name=name,
        tag=tag,
        description=v.description,
        message=cls,
        input_type=input_type,
        direct=v.input is None,
        codec=codec,
        available=v.available,
        authorize=v.authorize,
        to_message=v.to_message,
        completion=v.completion,
        title=title,
        hints=hints,
        may_confirm=v.may_confirm,
    )


def _check_description(where: str, description: object, says: str) -> None:
    """Refuse a blank description: it is all an agent is told about a tool or a resource.

    >>> _check_description('Cannot expose "A"', " ", "what the capability does")
    Traceback (most recent call last):
    ...
    agentfx.ContractError: Cannot expose "A": its description must be a non-empty string telling the agent what the capability does
    """
    if not (isinstance(description, str) and description.strip()):
        raise ContractError(f"{where}: its description must be a non-empty string telling the agent {says}")
    _check_encodable(where, "description", description)


def _check_encodable(where: str, what: str, text: str) -> None:
    """Refuse text holding a surrogate code point: no manifest, tool list or document could carry it.

    >>> _check_encodable('Cannot expose "A"', "title", "Caf\\udce9")
    Traceback (most recent call last):
    ...
    agentfx.ContractError: Cannot expose "A": its title holds a surrogate code point (U+DCE9 at index 3), which no JSON or UTF-8 text can carry; was it read from bytes that are not UTF-8?
    """
    at = next((i for i, char in enumerate(text) if "\ud800" <= char <= "\udfff"), None)
    if at is not None:
        raise ContractError(
            f"{where}: its {what} holds a surrogate code point (U+{ord(text[at]):04X} at index {at}), "
            "which no JSON or UTF-8 text can carry; was it read from bytes that are not UTF-8?"
        )


def _check_resource_name(name: object) -> str:
    """Refuse a resource name a client cannot address: it is listed as ``app://<name>``.

    >>> _check_resource_name("todo list")
    Traceback (most recent call last):
    ...
    agentfx.ContractError: Cannot define the resource "todo list": it is not a valid resource name. Use 1-128 characters of [a-zA-Z0-9_-].
    """
    if not isinstance(name, str):
        raise ContractError(f"A resource's name must be a string, got {name!r}")
    # The capability-name rule, reworded for a resource.
    try:
        check_name(name, name)
    except ContractError:
        raise ContractError(
            f'Cannot define the resource "{name}": it is not a valid resource name. '
            "Use 1-128 characters of [a-zA-Z0-9_-]."
        ) from None
    return name


def _check_presentation(tag: str, title: object, hints: object) -> tuple[str | None, Hints | None]:
    """The title and hints as a capability keeps them: a blank title is a mistake, unsaid hints are none."""
    if title is not None and not (isinstance(title, str) and title.strip()):
        raise ContractError(f'Cannot expose "{tag}": its title must be a non-empty string')
    if title is not None:
        _check_encodable(f'Cannot expose "{tag}"', "title", title)
    if hints is not None and not isinstance(hints, Hints):
        raise ContractError(f'Cannot expose "{tag}": its hints must be an agentfx.Hints')
    if hints is not None and not hints.said():
        hints = None
    return title, hints


class Declarations(Generic[M, P]):
    """The declaration methods with the Model and principal types bound, so inline lambdas are checked.

    :func:`~agentfx.for_model` builds an :class:`~agentfx.AgentBuilder`, which
    is these methods plus ``bind``. The module-level :func:`variant`,
    :func:`expose`, ... are the same methods with ``Any`` Model and principal.
    """

    __slots__ = ()

    @overload
    def variant(
        self,
        message: _MessageClass[Msg],
        description: str,
        *,
        name: str | None = None,
        available: Callable[[M], bool] | None = None,
        input: None = None,
        to_message: None = None,
        authorize: Authorize[P, Msg, M] | None = None,
        completion: Completion[Msg, R, Msg] | StateCompletion[M, V, Msg] | None = None,
        title: str | None = None,
        hints: Hints | None = None,
        may_confirm: bool = False,
    ) -> Variant[M, P, Msg, Msg]: ...

    @overload
    def variant(
        self,
        message: _MessageClass[Msg],
        description: str,
        *,
        name: str | None = None,
        available: Callable[[M], bool] | None = None,
        input: type[I],
        to_message: Callable[[I, InvocationContext[M, P]], Msg],
        authorize: Authorize[P, I, M] | None = None,
        completion: Completion[I, R, Msg] | StateCompletion[M, V, I] | None = None,
        title: str | None = None,
        hints: Hints | None = None,
        may_confirm: bool = False,
    ) -> Variant[M, P, Msg, I]: ...

    @overload
    def variant(
        self,
        message: type[Msg],
        description: str,
        *,
        name: str | None = None,
        available: Callable[[M], bool] | None = None,
        input: None = None,
        to_message: None = None,
        authorize: Authorize[P, Msg, M] | None = None,
        completion: Completion[Msg, R, Msg] | StateCompletion[M, V, Msg] | None = None,
        title: str | None = None,
        hints: Hints | None = None,
        may_confirm: bool = False,
    ) -> Variant[M, P, Msg, Msg]: ...

    def variant(
        self,
        message: Any,
        description: str,
        *,
        name: str | None = None,
        available: Callable[[M], bool] | None = None,
        input: type[Any] | None = None,
        to_message: Callable[[Any, InvocationContext[M, P]], Any] | None = None,
        authorize: Authorize[P, Any, M] | None = None,
        completion: AnyCompletion | None = None,
        title: str | None = None,
        hints: Hints | None = None,
        may_confirm: bool = False,
    ) -> Variant[M, P, Any, Any]:
        """Declare one Message for exposure.

        A **direct** variant (no ``input``) takes the Message's own fields as the
        agent's payload, decoded strictly. A **mapped** variant decodes ``input``
        and builds the Message with ``to_message(input, ctx)``; ``input`` and
        ``to_message`` come together (a type error, and a ``ContractError`` at
        :func:`expose`, otherwise). Through :func:`~agentfx.for_model` every hook
        is checked against the Model and principal types; the module-level
        function leaves both ``Any``.

        Nothing is checked here: :func:`expose` checks the variant against its
        Message union, its name and its completion.

        Args:
            message: The Message class (a member of the union given to :func:`expose`).
            description: What the capability does, for the agent.
            name: The protocol-facing name; defaults to the snake-cased tag.
            available: ``available(model) -> bool``: does the capability exist in
                this Model? Runs before decoding; must answer synchronously.
            input: The external input Struct of a mapped variant.
            to_message: ``to_message(input, ctx) -> Message`` of a mapped variant;
                ``ctx`` is an :class:`InvocationContext` holding the invocation's one
                Model snapshot, its principal and the invocation.
            authorize: ``authorize(req) -> bool | Refusal | Confirm`` (or an
                awaitable of one), ``req`` an :class:`AuthorizationRequest` whose
                ``input`` is the decoded input (the Message itself for a direct
                variant); :class:`~agentfx.Confirm` allows the call once a person
                confirms.
            completion: A :class:`~agentfx.Completion` (``correlate(request, result,
                call)`` sees the decoded input, a success or failure Message, and
                ``call.message``, the dispatched Message) or :func:`~agentfx.when`
                (``predicate(value, request)``).
            title: A short human-readable name for clients to display.
            hints: What the capability says about its effect (an :class:`~agentfx.Hints`).
            may_confirm: Declares that ``authorize`` may answer
                :class:`~agentfx.Confirm`, for documents and adapters that must
                know before the call (``mayConfirm`` in the manifest). An
                undeclared ``Confirm`` still works.

        Returns:
            A :class:`Variant`, to pass to :func:`expose`.

        >>> import msgspec
        >>> class Ping(msgspec.Struct, tag=True):
        ...     pass
        >>> variant(Ping, "Ping the app").description
        'Ping the app'
        >>> class Renamed(msgspec.Struct, tag=True):
        ...     title: str
        >>> class RenameInput(msgspec.Struct):
        ...     new_title: str
        >>> rename = variant(Renamed, "Rename", input=RenameInput, to_message=lambda i, ctx: Renamed(title=i.new_title))
        >>> rename.to_message(RenameInput(new_title="Milk"), None)
        Renamed(title='Milk')
        """
        return Variant(
            message, description, name, available, input, to_message, authorize, completion, title, hints,
            may_confirm=may_confirm,
        )

    def action(
        self,
        action: Action[I, Msg],
        *,
        available: Callable[[M], bool] | None = None,
        authorize: Authorize[P, I, M] | None = None,
        title: str | None = None,
        hints: Hints | None = None,
        may_confirm: bool = False,
    ) -> Variant[M, P, Msg, I]:
        """Expose an :class:`Action` the application already declared, under that action's name.

        The action's ``input`` and ``to_message`` make it a mapped variant; its
        ``message`` must be a member of the union given to :func:`expose`, and a
        ``to_message`` that makes another Message is refused at dispatch.

        Args:
            action: The application's :class:`Action`.
            available: ``available(model) -> bool``, as for :func:`variant`.
            authorize: ``authorize(req) -> bool | Refusal | Confirm`` (or an
                awaitable of one), ``req.input`` being the action's decoded input.
            title: A short human-readable name, as for :func:`variant`.
            hints: What the capability says about its effect, as for :func:`variant`.
            may_confirm: Declares that ``authorize`` may answer ``Confirm``, as for :func:`variant`.

        Returns:
            A :class:`Variant`, to pass to :func:`expose`.

        Raises:
            ContractError: ``action`` is not an :class:`Action`.

        >>> import msgspec
        >>> class AddedToCart(msgspec.Struct, tag=True):
        ...     sku: str
        >>> class AddToCartInput(msgspec.Struct):
        ...     sku: str
        >>> add = Action("add_to_cart", "Add an item", AddToCartInput,
        ...              lambda i, ctx: AddedToCart(sku=i.sku), message=AddedToCart)
        >>> [c.name for c in expose(AddedToCart, action(add)).capabilities]
        ['add_to_cart']
        """
        # The annotation promises an Action, but untyped callers can pass anything.
        if not isinstance(cast(object, action), Action):
            hint = (
                f'; to expose a Message class, write variant({action.__name__}, "...")'
                if isinstance(action, type)
                else ""
            )
            raise ContractError(
                f"action() takes an agentfx.Action(name, description, input, to_message, message=...), "
                f"got {action!r}{hint}"
            )
        return Variant(
            action.message,
            action.description,
            action.name,
            available,
            action.input,
            action.to_message,
            authorize,
            title=title,
            hints=hints,
            may_confirm=may_confirm,
        )

    def expose(self, union: object, *variants: Exposable[M, P]) -> Exposed[M, P]:
        """Check variants against their Message union; every definition-time check runs here.

        Each variant's hooks keep the types :func:`variant` inferred for them:
        ``variants`` are :class:`Exposable` for the Model and principal only, so a
        ``variant(...)`` written inside the call is checked exactly as outside it.

        Args:
            union: The application's Message union (``A | B``, ``typing.Union``
                or a ``type`` alias of one), or a single Message class.
            variants: The capabilities, in the order agents will see them.

        Returns:
            An :class:`Exposed`, to pass to :func:`define`.

        Raises:
            ContractError: Something not made by :func:`variant` or :func:`action`,
                a class outside the union, an invalid or duplicate name, a Message
                class exposed twice, ``input`` without ``to_message`` (or the
                reverse), a non-Struct input, or a malformed completion.

        >>> import msgspec
        >>> class Ping(msgspec.Struct, tag=True):
        ...     pass
        >>> [c.name for c in expose(Ping, variant(Ping, "Ping")).capabilities]
        ['ping']
        """
        members = frozenset(_union_members(union))
        capabilities: list[Capability[M, P]] = []
        names: set[str] = set()
        # A capability can be named by its Message class, so each class is exposed once.
        classes: dict[type[Any], str] = {}
        for v in variants:
            # The annotation promises variants, but untyped callers can pass anything.
            if not isinstance(cast(object, v), Variant):
                raise ContractError(f"expose() takes variants made by variant() or action(), got {v!r}")
            capability = _capability(cast("Variant[Any, Any, Any, Any]", v), members)
            if capability.name in names:
                raise ContractError(f'Duplicate exposed capability name "{capability.name}"')
            if capability.message in classes:
                raise ContractError(
                    f'Cannot expose "{capability.tag}": it is already exposed as "{classes[capability.message]}"'
                )
            names.add(capability.name)
            classes[capability.message] = capability.name
            capabilities.append(capability)
        return Exposed(union, tuple(capabilities))

    def resource(self, name: str, description: str, *, schema: object, read: Callable[[M], object]) -> Resource[M]:
        """A named read-only projection of the Model, encoded through ``schema``.

        Reading encodes ``read(model)`` through ``schema`` with msgspec (undeclared
        fields dropped); a value that violates the schema is an application bug
        and raises :class:`~agentfx.AgentProjectionError` when read.

        Args:
            name: The resource's name (MCP lists it as ``app://<name>``).
            description: What it holds, for the agent.
            schema: A type msgspec can encode and describe (a Struct, ``list[Todo]``, ...).
            read: ``read(model) -> value``.

        Returns:
            A :class:`Resource`, to pass to :func:`define`.

        Raises:
            ContractError: msgspec cannot describe ``schema``.

        >>> import msgspec
        >>> class Model(msgspec.Struct):
        ...     todos: list[str] = []
        >>> todos = resource("todos", "The todos", schema=list[str], read=lambda m: m.todos)
        >>> todos.encode(Model(todos=["milk"]))
        ['milk']
        """
        _check_resource_name(name)
        _check_description(f'Cannot define the resource "{name}"', description, "what it holds")
        _check_schema(schema, f'Cannot define the resource "{name}"')
        check_hook(f'Cannot define the resource "{name}"', "read", read, ("the Model",), synchronous=True)
        return Resource(name, description, schema, read)

    def projection(self, schema: object, read: Callable[[M], object]) -> Projection[M]:
        """The context projected for agents, encoded through ``schema``.

        The same rules as :func:`resource`: ``read(model)`` is encoded through
        ``schema``, and a value that violates it raises
        :class:`~agentfx.AgentProjectionError` when read.

        Args:
            schema: A type msgspec can encode and describe.
            read: ``read(model) -> value``.

        Returns:
            A :class:`Projection`, to pass to :func:`define` as ``context``.

        Raises:
            ContractError: msgspec cannot describe ``schema``.

        >>> import msgspec
        >>> class Model(msgspec.Struct):
        ...     count: int = 0
        >>> projection(int, lambda m: m.count).encode(Model(count=2))
        2
        """
        _check_schema(schema, "Cannot define the context projection")
        check_hook("Cannot define the context projection", "read", read, ("the Model",), synchronous=True)
        return Projection(schema, read)

    def define(
        self,
        messages: Exposed[M, P],
        resources: Iterable[Resource[M]] = (),
        context: Projection[M] | None = None,
    ) -> Definition[M, P]:
        """Assemble a contract: the exposed capabilities, resources and context projection.

        The result is plain data: it can be listed and documented
        (:func:`~agentfx.to_manifest`) without a host, and bound to one with
        :func:`~agentfx.bind`. The resource list is copied, so later changes to the
        caller's list do not change the contract.

        Args:
            messages: The capabilities, from :func:`expose`.
            resources: The resources, from :func:`resource`.
            context: The context projection, from :func:`projection`.

        Returns:
            A :class:`Definition`.

        Raises:
            ContractError: ``messages`` is not from :func:`expose`, a resource
                is not from :func:`resource`, ``context`` is not from
                :func:`projection`, or two resources share a name.

        >>> import msgspec
        >>> class Ping(msgspec.Struct, tag=True):
        ...     pass
        >>> contract = define(expose(Ping, variant(Ping, "Ping")), [resource("pings", "Pings", schema=int, read=lambda m: 0)])
        >>> [c.name for c in contract.capabilities], [r.name for r in contract.resources]
        (['ping'], ['pings'])
        """
        # The annotations promise these, but untyped callers can pass anything.
        if not isinstance(cast(object, messages), Exposed):
            raise ContractError(
                f'define() takes the result of expose(...) as "messages", got {messages!r}; {_WRITE_DEFINE}'
            )
        if isinstance(cast(object, resources), Resource | str | bytes) or not isinstance(
            cast(object, resources), Iterable
        ):
            raise ContractError(f'define() takes "resources" as a list of resource(...), got {resources!r}')
        copied = tuple(resources)
        for r in cast("tuple[object, ...]", copied):
            if not isinstance(r, Resource):
                raise ContractError(f'define() takes "resources" as a list of resource(...), and one is {r!r}')
        if context is not None and not isinstance(cast(object, context), Projection):
            raise ContractError(f'define() takes "context" as the result of projection(...), got {context!r}')
        names: set[str] = set()
        for r in copied:
            if r.name in names:
                raise ContractError(f'Duplicate agent resource name "{r.name}"')
            names.add(r.name)
        return Definition(messages.union, messages.capabilities, copied, context)


# The module-level twins are real functions rather than bound methods of an untyped
# builder, so they are fully typed for checkers and show their own name and docs.
_untyped: Declarations[Any, Any] = Declarations()


@overload
def variant(
    message: _MessageClass[Msg],
    description: str,
    *,
    name: str | None = None,
    available: Callable[[Any], bool] | None = None,
    input: None = None,
    to_message: None = None,
    authorize: Authorize[Any, Msg, Any] | None = None,
    completion: Completion[Msg, R, Msg] | StateCompletion[Any, V, Msg] | None = None,
    title: str | None = None,
    hints: Hints | None = None,
    may_confirm: bool = False,
) -> Variant[Any, Any, Msg, Msg]: ...
@overload
def variant(
    message: _MessageClass[Msg],
    description: str,
    *,
    name: str | None = None,
    available: Callable[[Any], bool] | None = None,
    input: type[I],
    to_message: Callable[[I, InvocationContext[Any, Any]], Msg],
    authorize: Authorize[Any, I, Any] | None = None,
    completion: Completion[I, R, Msg] | StateCompletion[Any, V, I] | None = None,
    title: str | None = None,
    hints: Hints | None = None,
    may_confirm: bool = False,
) -> Variant[Any, Any, Msg, I]: ...
@overload
def variant(
    message: type[Msg],
    description: str,
    *,
    name: str | None = None,
    available: Callable[[Any], bool] | None = None,
    input: None = None,
    to_message: None = None,
    authorize: Authorize[Any, Msg, Any] | None = None,
    completion: Completion[Msg, R, Msg] | StateCompletion[Any, V, Msg] | None = None,
    title: str | None = None,
    hints: Hints | None = None,
    may_confirm: bool = False,
) -> Variant[Any, Any, Msg, Msg]: ...
def variant(
    message: Any,
    description: str,
    *,
    name: str | None = None,
    available: Callable[[Any], bool] | None = None,
    input: type[Any] | None = None,
    to_message: Callable[[Any, InvocationContext[Any, Any]], Any] | None = None,
    authorize: Authorize[Any, Any, Any] | None = None,
    completion: AnyCompletion | None = None,
    title: str | None = None,
    hints: Hints | None = None,
    may_confirm: bool = False,
) -> Variant[Any, Any, Any, Any]:
    """Declare one Message for exposure.

    A **direct** variant (no ``input``) takes the Message's own fields as the
    agent's payload, decoded strictly. A **mapped** variant decodes ``input``
    and builds the Message with ``to_message(input, ctx)``; ``input`` and
    ``to_message`` come together (a type error, and a ``ContractError`` at
    :func:`expose`, otherwise). Through :func:`~agentfx.for_model` every hook
    is checked against the Model and principal types; the module-level
    function leaves both ``Any``.

    Nothing is checked here: :func:`expose` checks the variant against its
    Message union, its name and its completion.

    Args:
        message: The Message class (a member of the union given to :func:`expose`).
        description: What the capability does, for the agent.
        name: The protocol-facing name; defaults to the snake-cased tag.
        available: ``available(model) -> bool``: does the capability exist in
            this Model? Runs before decoding; must answer synchronously.
        input: The external input Struct of a mapped variant.
        to_message: ``to_message(input, ctx) -> Message`` of a mapped variant;
            ``ctx`` is an :class:`InvocationContext` holding the invocation's one
            Model snapshot, its principal and the invocation.
        authorize: ``authorize(req) -> bool | Refusal | Confirm`` (or an
            awaitable of one), ``req`` an :class:`AuthorizationRequest` whose
            ``input`` is the decoded input (the Message itself for a direct
            variant); :class:`~agentfx.Confirm` allows the call once a person
            confirms.
        completion: A :class:`~agentfx.Completion` (``correlate(request, result,
            call)`` sees the decoded input, a success or failure Message, and
            ``call.message``, the dispatched Message) or :func:`~agentfx.when`
            (``predicate(value, request)``).
        title: A short human-readable name for clients to display.
        hints: What the capability says about its effect (an :class:`~agentfx.Hints`).
        may_confirm: Declares that ``authorize`` may answer
            :class:`~agentfx.Confirm`, for documents and adapters that must
            know before the call (``mayConfirm`` in the manifest). An
            undeclared ``Confirm`` still works.

    Returns:
        A :class:`Variant`, to pass to :func:`expose`.

    >>> import msgspec
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> variant(Ping, "Ping the app").description
    'Ping the app'
    >>> class Renamed(msgspec.Struct, tag=True):
    ...     title: str
    >>> class RenameInput(msgspec.Struct):
    ...     new_title: str
    >>> rename = variant(Renamed, "Rename", input=RenameInput, to_message=lambda i, ctx: Renamed(title=i.new_title))
    >>> rename.to_message(RenameInput(new_title="Milk"), None)
    Renamed(title='Milk')
    """
    return Variant(
        message, description, name, available, input, to_message, authorize, completion, title, hints,
        may_confirm=may_confirm,
    )


def action(
    action: Action[I, Msg],
    *,
    available: Callable[[Any], bool] | None = None,
    authorize: Authorize[Any, I, Any] | None = None,
    title: str | None = None,
    hints: Hints | None = None,
    may_confirm: bool = False,
) -> Variant[Any, Any, Msg, I]:
    """Expose an :class:`Action` the application already declared, under that action's name.

    The action's ``input`` and ``to_message`` make it a mapped variant; its
    ``message`` must be a member of the union given to :func:`expose`, and a
    ``to_message`` that makes another Message is refused at dispatch.

    Args:
        action: The application's :class:`Action`.
        available: ``available(model) -> bool``, as for :func:`variant`.
        authorize: ``authorize(req) -> bool | Refusal | Confirm`` (or an
            awaitable of one), ``req.input`` being the action's decoded input.
        title: A short human-readable name, as for :func:`variant`.
        hints: What the capability says about its effect, as for :func:`variant`.
        may_confirm: Declares that ``authorize`` may answer ``Confirm``, as for :func:`variant`.

    Returns:
        A :class:`Variant`, to pass to :func:`expose`.

    Raises:
        ContractError: ``action`` is not an :class:`Action`.

    >>> import msgspec
    >>> class AddedToCart(msgspec.Struct, tag=True):
    ...     sku: str
    >>> class AddToCartInput(msgspec.Struct):
    ...     sku: str
    >>> add = Action("add_to_cart", "Add an item", AddToCartInput,
    ...              lambda i, ctx: AddedToCart(sku=i.sku), message=AddedToCart)
    >>> [c.name for c in expose(AddedToCart, action(add)).capabilities]
    ['add_to_cart']
    """
    return _untyped.action(
        action, available=available, authorize=authorize, title=title, hints=hints, may_confirm=may_confirm
    )


def expose(union: object, *variants: Exposable[Any, Any]) -> Exposed[Any, Any]:
    """Check variants against their Message union; every definition-time check runs here.

    Each variant's hooks keep the types :func:`variant` inferred for them:
    ``variants`` are :class:`Exposable` for the Model and principal only, so a
    ``variant(...)`` written inside the call is checked exactly as outside it.

    Args:
        union: The application's Message union (``A | B``, ``typing.Union``
            or a ``type`` alias of one), or a single Message class.
        variants: The capabilities, in the order agents will see them.

    Returns:
        An :class:`Exposed`, to pass to :func:`define`.

    Raises:
        ContractError: Something not made by :func:`variant` or :func:`action`,
            a class outside the union, an invalid or duplicate name, a Message
            class exposed twice, ``input`` without ``to_message`` (or the
            reverse), a non-Struct input, or a malformed completion.

    >>> import msgspec
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> [c.name for c in expose(Ping, variant(Ping, "Ping")).capabilities]
    ['ping']
    """
    return _untyped.expose(union, *variants)


def resource(name: str, description: str, *, schema: object, read: Callable[[Any], object]) -> Resource[Any]:
    """A named read-only projection of the Model, encoded through ``schema``.

    Reading encodes ``read(model)`` through ``schema`` with msgspec (undeclared
    fields dropped); a value that violates the schema is an application bug
    and raises :class:`~agentfx.AgentProjectionError` when read.

    Args:
        name: The resource's name (MCP lists it as ``app://<name>``).
        description: What it holds, for the agent.
        schema: A type msgspec can encode and describe (a Struct, ``list[Todo]``, ...).
        read: ``read(model) -> value``.

    Returns:
        A :class:`Resource`, to pass to :func:`define`.

    Raises:
        ContractError: msgspec cannot describe ``schema``.

    >>> import msgspec
    >>> class Model(msgspec.Struct):
    ...     todos: list[str] = []
    >>> todos = resource("todos", "The todos", schema=list[str], read=lambda m: m.todos)
    >>> todos.encode(Model(todos=["milk"]))
    ['milk']
    """
    return _untyped.resource(name, description, schema=schema, read=read)


def projection(schema: object, read: Callable[[Any], object]) -> Projection[Any]:
    """The context projected for agents, encoded through ``schema``.

    The same rules as :func:`resource`: ``read(model)`` is encoded through
    ``schema``, and a value that violates it raises
    :class:`~agentfx.AgentProjectionError` when read.

    Args:
        schema: A type msgspec can encode and describe.
        read: ``read(model) -> value``.

    Returns:
        A :class:`Projection`, to pass to :func:`define` as ``context``.

    Raises:
        ContractError: msgspec cannot describe ``schema``.

    >>> import msgspec
    >>> class Model(msgspec.Struct):
    ...     count: int = 0
    >>> projection(int, lambda m: m.count).encode(Model(count=2))
    2
    """
    return _untyped.projection(schema, read)


def define(
    messages: Exposed[Any, Any],
    resources: Iterable[Resource[Any]] = (),
    context: Projection[Any] | None = None,
) -> Definition[Any, Any]:
    """Assemble a contract: the exposed capabilities, resources and context projection.

    The result is plain data: it can be listed and documented
    (:func:`~agentfx.to_manifest`) without a host, and bound to one with
    :func:`~agentfx.bind`. The resource list is copied, so later changes to the
    caller's list do not change the contract.

    Args:
        messages: The capabilities, from :func:`expose`.
        resources: The resources, from :func:`resource`.
        context: The context projection, from :func:`projection`.

    Returns:
        A :class:`Definition`.

    Raises:
        ContractError: ``messages`` is not from :func:`expose`, a resource
            is not from :func:`resource`, ``context`` is not from
            :func:`projection`, or two resources share a name.

    >>> import msgspec
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> contract = define(expose(Ping, variant(Ping, "Ping")), [resource("pings", "Pings", schema=int, read=lambda m: 0)])
    >>> [c.name for c in contract.capabilities], [r.name for r in contract.resources]
    (['ping'], ['pings'])
    """
    return _untyped.define(messages, resources, context)
