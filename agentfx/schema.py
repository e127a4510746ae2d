"""msgspec types as JSON Schema, strict input codecs, and schema projections.

This layer owns the three places where a msgspec type meets the outside
world: the JSON Schema a type advertises (:func:`json_schema`), the strict
decoder of agent payloads that honours exactly the schema it advertises
(:class:`InputCodec`), and the encoding of application values through a
declared schema (:func:`project`).

An input schema is closed: every object says ``additionalProperties: false``
and decoding rejects what the schema does not declare. msgspec only does that
for Structs declared with ``forbid_unknown_fields``, so the codec derives a
*strict mirror* of the input type: the same fields, names, types and defaults,
with every nested record closed and the root's own tag removed. The schema is
generated from the mirror; decoding still produces the application's own type.
Where msgspec takes more than that schema admits (a ``Decimal`` sent as a
number, a nested tagged record sent without its tag), a second, decoding
mirror refuses it after the application's type has decoded.

It deliberately knows nothing of capabilities, Messages or failures: a bad
payload is an :class:`InvalidPayload` with a JSON path, and turning that into
an agent-facing error is the caller's business.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import decimal
import enum
import functools
import itertools
import math
import reprlib
import types
import typing
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Annotated, Any, Generic, Literal, NotRequired, Required, TypeVar, Union, cast

import msgspec
import msgspec.inspect

from agentfx._patterns import ecma_pattern
from agentfx.errors import AgentProjectionError, echo

__all__ = ["InputCodec", "InvalidPayload", "json_schema", "json_schema_components", "project"]

T = TypeVar("T")

_REF_PREFIX = "#/$defs/"


# msgspec ends a located error with " - at `$.path`"; a bad mapping key reads
# " - at `key` in `$.path`". Anything else happened at the root.

NOT_VALID = "the input is not valid"
"""The problem of a payload refused for a reason agentfx has no words for."""


class InvalidPayload(Exception):
    """A payload the input codec rejects.

    Attributes:
        path: JSON path of the first problem in msgspec's notation (``$`` for
            the root, ``$.title``, ``$.todos[0].title``).
        cause: msgspec's own exception, or ``None`` when the codec found the
            problem itself (wrong root type, undeclared top-level field).
        problem: What to fix, in one line of agentfx's own words: names the
            field and the rule it breaks, never the value sent and never the
            decoder's text (``"title" is required``).

    :meth:`InputCodec.attempt` answers a mistake it has refused before with
    the same instance (its ``cause`` carries no traceback): read it, and
    raise only a copy, as :meth:`InputCodec.decode` does.
    """

    __slots__ = ("cause", "path", "problem")

    def __init__(self, path: str, cause: BaseException | None = None, problem: str = NOT_VALID) -> None:
        # The message is formatted only when asked for, and the base class is
        # not called (its ``__new__`` already keeps the arguments, which is all
        # a copy or a pickle needs): the pipeline returns this value on every
        # refused payload and rarely prints it.
        self.path = path
        self.cause = cause
        self.problem = problem

    def __str__(self) -> str:
        return f"Invalid payload at {self.path}"


def json_schema(tp: object) -> dict[str, Any]:
    """The JSON Schema msgspec emits for ``tp``, with the root inlined.

    A Struct root becomes ``{"type": "object", ...}`` rather than a bare
    ``$ref``; nested definitions stay under ``$defs`` (omitted when empty).

    >>> import msgspec
    >>> class Point(msgspec.Struct):
    ...     x: int
    >>> json_schema(Point)
    {'title': 'Point', 'type': 'object', 'properties': {'x': {'type': 'integer'}}, 'required': ['x']}
    >>> json_schema(list[int])
    {'type': 'array', 'items': {'type': 'integer'}}

    Raises:
        TypeError: when msgspec cannot describe ``tp``.
    """
    return _inline_root(msgspec.json.schema(tp), tp)


def json_schema_components(types: tuple[object, ...]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One reference per type and the shared definitions they point into, for embedding.

    ``refs[i]`` describes ``types[i]`` (a ``$ref`` into ``#/$defs`` for a
    record); ``defs`` is what the embedding schema puts under its root's
    ``$defs``. JSON types only, set defaults ordered, as :func:`json_schema`.

    >>> import msgspec
    >>> class Done(msgspec.Struct, tag=True):
    ...     id: str
    >>> refs, defs = json_schema_components((Done,))
    >>> refs, list(defs)
    ([{'$ref': '#/$defs/Done'}], ['Done'])

    Raises:
        TypeError: when msgspec cannot describe one of ``types``.
    """
    refs, defs = msgspec.json.schema_components(types, ref_template=_REF_PREFIX + "{name}")
    raw = _without_sets({"refs": refs, "$defs": defs}, types)
    out = msgspec.json.decode(msgspec.json.encode(raw), type=dict[str, Any])
    _sort_set_defaults(out)
    return cast("list[dict[str, Any]]", out["refs"]), cast("dict[str, Any]", out["$defs"])


class InputCodec(Generic[T]):
    """Strict decoder and closed JSON Schema for a Struct-typed input.

    The schema is the Struct's own minus its tag field, with
    ``additionalProperties: false`` on every object. :meth:`decode` accepts
    exactly what the schema describes: a ``dict`` payload, no undeclared keys at
    any depth (the Struct's tag key included), no lax coercion.

    >>> import msgspec
    >>> class RequestedCreateTodo(msgspec.Struct, tag=True):
    ...     title: str
    >>> codec = InputCodec(RequestedCreateTodo)
    >>> codec.schema["properties"], codec.schema["additionalProperties"]
    ({'title': {'type': 'string'}}, False)
    >>> codec.decode({"title": "Buy milk"})
    RequestedCreateTodo(title='Buy milk')
    >>> try:
    ...     codec.decode({"title": 3})
    ... except InvalidPayload as error:
    ...     print(error.path)
    $.title

    Attributes:
        type: The Struct type payloads decode into.
        schema: The closed JSON Schema advertised for it. Do not mutate it.
        decode: ``decode(payload) -> T``; raises :class:`InvalidPayload` with
            the JSON path of the first problem.
        attempt: ``attempt(payload) -> T | InvalidPayload``: the same decoding,
            returning the problem instead of raising it (the same instance
            for a mistake it has met before).
        remembers: ``remembers(invalid) -> bool``: whether ``attempt``
            hands out that very refusal for every repeat of its mistake.

    Raises:
        TypeError: when ``tp`` is not a msgspec Struct class that encodes as an
            object, or msgspec cannot describe one of its fields.
    """

    __slots__ = ("attempt", "decode", "remembers", "schema", "type")

    type: type[T]
    schema: dict[str, Any]
    decode: Callable[[object], T]
    """Decode a JSON-like payload into :attr:`type`; raises :class:`InvalidPayload`."""
    attempt: Callable[[object], T | InvalidPayload]
    """Decode like :attr:`decode`, returning the :class:`InvalidPayload` instead of raising it."""
    remembers: Callable[[InvalidPayload], bool]
    """Whether :attr:`attempt` hands out this very refusal again for every repeat of its mistake."""

    def __init__(self, tp: type[T]) -> None:
        if not _is_struct_class(tp):
            raise TypeError(f"{tp!r} is not a msgspec Struct class")
        struct = cast("type[msgspec.Struct]", tp)
        config = struct.__struct_config__
        if config.array_like:
            raise TypeError(f"{struct.__name__} is array_like; an input must encode as an object")
        try:
            fields = msgspec.structs.fields(struct)
            # Only a tagged root differs from the mirror the type gets when nested.
            mirror = _mirror(struct, root=config.tag is not None)
            schema = _inline_root(msgspec.json.schema(mirror), mirror)
            # A second, validating pass is needed only where msgspec would
            # accept what the schema refuses: an undeclared key below the
            # root (checked first), or a value only the decoding mirror
            # refuses (checked after the application's own type, whose
            # refusals say more: "a decimal number", not "a string").
            strict: object = None
            after: object = None
            if _needs_decoding_mirror(struct):
                after = _mirror(struct, root=config.tag is not None, decoding=True)
            elif _has_open_record(struct):
                strict = mirror
        except NameError as exc:
            raise TypeError(f"{struct.__name__} has an annotation that cannot be resolved: {exc}") from exc
        except ValueError as exc:
            # msgspec's refusal of a constraint it cannot apply (an integer bound past int64):
            # a TypeError here, so expose says which Message, instead of msgspec's bare text.
            raise TypeError(f"msgspec cannot take the type of {struct.__name__}: {exc}") from exc
        self.type = tp
        if fields:
            self.schema = schema
            self.schema["title"] = struct.__name__
        else:
            self.schema = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
        allowed = frozenset(field.encode_name for field in fields)
        # Every undeclared top-level key is refused here, before msgspec, so
        # the problem can name it exactly (the tag key included: it is not an
        # input field), whatever the Struct's own configuration.
        fits: Callable[[Any], bool] = allowed.issuperset
        self.attempt, self.decode, self.remembers = _decoder(
            tp,
            fits,
            strict,
            allowed,
            self.schema,
            str_keys=_has_non_str_keys(struct),
            after=after,
            repeated=_repeated_items_check(struct),
        )

    def __repr__(self) -> str:
        return f"InputCodec({self.type.__qualname__})"


_REMEMBERED_MAX = 256
"""Refusals one codec remembers, by msgspec's text."""

_REMEMBERED_TEXT_MAX = 200
"""The longest refusal text remembered."""


def _decoder(
    tp: type[T],
    fits: Callable[[Any], bool],
    strict: object,
    allowed: frozenset[str],
    schema: dict[str, Any],
    *,
    str_keys: bool = True,
    after: object = None,
    repeated: _Check | None = None,
) -> tuple[Callable[[object], T | InvalidPayload], Callable[[object], T], Callable[[InvalidPayload], bool]]:
    # Closures over locals: decoding sits on the dispatch path, where every
    # attribute lookup shows next to a single msgspec.convert. ``str_keys``:
    # JSON object keys are always strings, so ``dict[int, X]`` must accept "1";
    # it is passed only to a type with such a mapping, as any keyword argument
    # costs msgspec.convert more than converting a small Struct does.
    # ``attempt`` returns the problem instead of raising it: the pipeline refuses
    # far more often than it crashes, and a raise costs as much as the decode.
    convert = msgspec.convert
    if str_keys:
        convert = functools.partial(msgspec.convert, str_keys=True)
    validation_error = msgspec.ValidationError
    # Wording a refusal walks the schema; the same msgspec text always gets the
    # same words, and agents repeat their mistakes. So the refusal of a text is
    # built once and handed out again: bounded, and only for short texts, as a
    # text may quote what was sent (an enum value).
    remembered: dict[str, InvalidPayload] = {}

    def refused(exc: msgspec.ValidationError) -> InvalidPayload:
        text = str(exc)
        invalid = InvalidPayload(_error_path(text), exc, _problem(text, schema))
        if len(remembered) < _REMEMBERED_MAX and len(text) <= _REMEMBERED_TEXT_MAX:
            # A kept exception must not keep this call's frames, nor the payload they hold.
            exc.__traceback__ = None
            remembered[text] = invalid
        return invalid

    def attempt(payload: object) -> T | InvalidPayload:
        if type(payload) is not dict:
            return InvalidPayload("$", None, _NOT_AN_OBJECT)
        if not fits(payload):
            return InvalidPayload("$", None, _undeclared_key(cast("dict[object, object]", payload), allowed))
        try:
            if strict is not None:
                convert(payload, strict)
            return convert(payload, tp)
        except validation_error as exc:
            # Looked up here, not in ``refused``: a refusal is as common as a success.
            invalid = remembered.get(str(exc))
            return refused(exc) if invalid is None else invalid
        except RecursionError as exc:
            return InvalidPayload("$", exc, _TOO_DEEP)

    plain = attempt

    def attempt_checked(payload: object) -> T | InvalidPayload:
        # The plain decoding, then what only some types need: the common path above stays as short as it is.
        decoded = plain(payload)
        if type(decoded) is InvalidPayload:
            return decoded
        try:
            if after is not None:
                convert(payload, after)
            where = None if repeated is None else repeated(payload, decoded, "$")
        except validation_error as exc:
            invalid = remembered.get(str(exc))
            return refused(exc) if invalid is None else invalid
        except RecursionError as exc:
            return InvalidPayload("$", exc, _TOO_DEEP)
        if where is not None:
            return InvalidPayload(where, None, _repeated_problem(where))
        return decoded

    if after is not None or repeated is not None:
        attempt = attempt_checked

    def decode(payload: object) -> T:
        decoded = attempt(payload)
        if isinstance(decoded, InvalidPayload):
            # A copy: the refusal handed out may be a remembered one, and raising
            # it would give every later holder this call's traceback.
            raise InvalidPayload(decoded.path, decoded.cause, decoded.problem) from decoded.cause
        return decoded

    def remembers(invalid: InvalidPayload) -> bool:
        cause = invalid.cause
        return cause is not None and remembered.get(str(cause)) is invalid

    return attempt, decode, remembers


# --- problems: what to fix, in agentfx's own words ---------------------------------
#
# msgspec reports a refusal as English text ("Expected `int`, got `str` - at
# `$.quantity`"). Agents are told something else: one line naming the field and
# the rule, never the value sent (msgspec quotes an enum value it refused) and
# never msgspec's wording, which may change between releases. So the text is
# read here, once, on the refusal path, and every form it can take is mapped;
# a form this table does not know reads as the generic NOT_VALID.

_NOT_AN_OBJECT = "the input must be an object"
_TOO_DEEP = "the input is nested too deeply"
_MAX_CHOICES = 10

_KINDS = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "a boolean",
    "null": "null",
    "array": "an array",
    "object": "an object",
    "bytes": "a base64-encoded string",
    "datetime": "an RFC 3339 date-time",
    "date": "an RFC 3339 date",
    "time": "an RFC 3339 time",
    "duration": "an ISO 8601 duration",
    "uuid": "a UUID",
    "decimal": "a decimal number",
}

_UNITS = {"str": ("character", "characters"), "array": ("item", "items"), "object": ("entry", "entries"), "bytes": ("byte", "bytes")}

_COMPARISONS = {">=": "at least", "<=": "at most", ">": "greater than", "<": "less than"}

_FORMATS = {
    "Invalid UUID": "a UUID",
    "Invalid RFC3339 encoded datetime": "an RFC 3339 date-time",
    "Invalid RFC3339 encoded date": "an RFC 3339 date",
    "Invalid RFC3339 encoded time": "an RFC 3339 time",
    "Invalid ISO8601 duration": "an ISO 8601 duration",
    # msgspec reads no weeks, months or years (P1W, P1M, P1Y), which the schema's "duration" format admits.
    "Only units 'D', 'H', 'M', and 'S' are supported when parsing ISO8601 durations": (
        "an ISO 8601 duration in days, hours, minutes and seconds (such as P7D or PT1H30M)"
    ),
    "Invalid base64 encoded string": "a base64-encoded string",
    "Invalid decimal string": "a decimal number",
    "Invalid epoch timestamp": "a valid timestamp",
    "Expected `datetime` with a timezone component": "a date-time with a timezone",
    "Expected `datetime` with no timezone component": "a date-time without a timezone",
    "Expected `time` with a timezone component": "a time with a timezone",
    "Expected `time` with no timezone component": "a time without a timezone",
}


def _echo(name: str) -> str:
    """A name the caller sent, bounded: its first 128 characters and an ellipsis, lone surrogates replaced."""
    return echo(name)


def _repeated_problem(location: str) -> str:
    label = field_label(location)
    return "the items of the input must be unique" if label is None else f'the items of "{label}" must be unique'


def _undeclared_key(payload: dict[object, object], allowed: frozenset[str]) -> str:
    for key in payload:
        if key not in allowed:
            if isinstance(key, str):
                return f'"{_echo(key)}" is not a field of this input'
            return "the input's field names must be strings"
    return NOT_VALID  # pragma: no cover - only called when a key is undeclared


def field_label(location: str) -> str | None:
    """``$.items[0].sku`` -> ``items[0].sku``; ``None`` for the root."""
    if location.startswith("$."):
        return location[2:]
    if location.startswith("$["):
        return location[1:]
    return None


def _join(location: str, name: str) -> str:
    label = field_label(location)
    return name if label is None else f"{label}.{name}"


def _kinds(expected: str) -> str | None:
    """msgspec's ``int | null`` as ``an integer or null``; ``None`` for a kind not in the table."""
    words = [_KINDS.get(kind.strip()) for kind in expected.split("|")]
    if not words or any(word is None for word in words):
        return None
    said = [word for word in words if word is not None]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " or " + said[-1]


def _count(number: str, unit: tuple[str, str]) -> str:
    return f"{number} {unit[0] if number == '1' else unit[1]}"


def _problem(text: str, schema: dict[str, Any]) -> str:
    """agentfx's wording of the msgspec refusal ``text`` of a payload for ``schema``.

    >>> from typing import Literal
    >>> class Order(msgspec.Struct):
    ...     title: str
    ...     priority: Literal["standard", "express"] = "standard"
    >>> schema = InputCodec(Order).schema
    >>> _problem("Object missing required field `title`", schema)
    '"title" is required'
    >>> _problem("Expected `int` <= 10 - at `$.quantity`", schema)
    '"quantity" must be at most 10'
    >>> _problem("Invalid enum value 'rush' - at `$.priority`", schema)
    '"priority" must be one of "express", "standard"'
    """
    location = "$"
    key = False
    at = text.rfind(" - at `")
    if at >= 0 and text.endswith("`"):
        location = text[at + 7 : -1]
        if location.startswith("key` in `"):
            location, key = location[9:], True
        text = text[:at]
    field = field_label(location)
    if key:
        return _key_problem(text, schema, location, "the input" if field is None else f'"{field}"')
    if text.startswith("Object missing required field `") and text.endswith("`"):
        return f'"{_join(location, text[31:-1])}" is required'
    if text.startswith("Object contains unknown field `") and text.endswith("`"):
        return f'"{_echo(_join(location, text[31:-1]))}" is not a field of this input'
    subject = "the input" if field is None else f'"{field}"'
    if text.startswith(("Invalid enum value", "Invalid value")):
        choices = _choices(schema, location)
        if choices is None:
            return f"{subject} is not one of the allowed values"
        return f"{subject} must be one of {choices}"
    format_word = _FORMATS.get(text)
    if format_word is not None:
        return f"{subject} must be {format_word}"
    if not text.startswith("Expected `"):
        return NOT_VALID if field is None else f"{subject} is not valid"
    close = text.find("`", 10)
    expected, rule = text[10:close], text[close + 1 :]
    if rule.startswith(", got `"):
        choices = _choices(schema, location)
        if choices is not None:
            return f"{subject} must be one of {choices}"
        kinds = _kinds(expected)
        return f"{subject} must be {kinds}" if kinds else f"{subject} is not valid"
    worded = _rule(subject, expected, rule, schema, location)
    if worded is not None:
        return worded
    comparison, _, number = rule.strip().partition(" ")
    bound = _COMPARISONS.get(comparison)
    if bound is not None and number:
        return f"{subject} must be {bound} {number}"
    return f"{subject} is not valid"


def _rule(subject: str, expected: str, rule: str, schema: dict[str, Any], location: str, *, keys: bool = False) -> str | None:
    """A length, pattern or multiple rule msgspec names after ``Expected `<expected>```, worded; else ``None``.

    ``schema`` and ``location`` (with ``keys``, the keys of the mapping
    there) are read only for a pattern, to name it as the schema does.
    """
    unit = _UNITS.get(expected)
    if rule.startswith((" of at least length ", " of at most length ")) and unit is not None:
        # A record sent as an array (an array_like Struct) short of its
        # required fields, or past all of its fields.
        number = rule.partition(" length ")[2].partition(",")[0]
        if number.isdigit():
            bound = "at least" if rule.startswith(" of at least ") else "at most"
            return f"{subject} must have {bound} {_count(number, unit)}"
        return None
    if rule.startswith(" of length "):
        if expected == "str" and _declares_uuid(schema, location, keys=keys):
            # The decoding mirror's length, not a declared one: a UUID sent as bare hex digits.
            return f"{subject} must be a UUID written with hyphens (8-4-4-4-12 hex digits)"
        comparison, _, number = rule[11:].partition(" ")
        bound = _COMPARISONS.get(comparison)
        exact = comparison.rstrip(",")
        low, to, high = rule[11:].partition(",")[0].partition(" to ")
        if to and low.isdigit() and high.isdigit() and unit is not None:
            # A NamedTuple with defaulted fields: "of length 1 to 2, got 3".
            return f"{subject} must have {low} to {_count(high, unit)}"
        if exact.isdigit() and unit is not None:
            # A fixed-length tuple: "of length 2, got 3" (the length sent is not repeated).
            return f"{subject} must have exactly {_count(exact, unit)}"
        if bound is not None and unit is not None and number.lstrip("-").isdigit():
            if expected == "str":
                return f"{subject} must be {bound} {_count(number, unit)} long"
            return f"{subject} must have {bound} {_count(number, unit)}"
        return None
    if rule.startswith(" matching regex "):
        matched = _literal(rule[16:])
        pattern = None if matched is None else _declared_pattern(matched, schema, location, keys=keys)
        return f"{subject} must match {pattern}" if pattern is not None else f"{subject} must match its declared pattern"
    if rule.startswith(" that's a multiple of "):
        return f"{subject} must be a multiple of {rule[22:]}"
    return None


def _key_problem(text: str, schema: dict[str, Any], location: str, owner: str) -> str:
    """The wording of a refused mapping key of the value at ``location``: its kind and the rule it broke.

    >>> schema = {"properties": {"tags": {"propertyNames": {"enum": ["a", "b"]}}}}
    >>> _key_problem("Invalid enum value 'c'", schema, "$.tags", '"tags"')
    'every key of "tags" must be one of "a", "b"'
    >>> schema = {"properties": {"tags": {"propertyNames": {"pattern": "^k"}}}}
    >>> _key_problem("Expected `str` matching regex '^k'", schema, "$.tags", '"tags"')
    'every key of "tags" must match ^k'
    """
    subject = f"every key of {owner}"
    if text.startswith(("Invalid enum value", "Invalid value")):
        choices = _choices(schema, location, keys=True)
        return f"a key of {owner} is not valid" if choices is None else f"{subject} must be one of {choices}"
    if not text.startswith("Expected `"):
        return f"a key of {owner} is not valid"
    close = text.find("`", 10)
    expected, rule = text[10:close], text[close + 1 :]
    kinds = _kinds(expected)
    if kinds is None:
        return f"a key of {owner} is not valid"
    worded = _rule(subject, expected, rule, schema, location, keys=True)
    if worded is not None:
        return worded
    # A key out of its bounds is an integer all the same: saying only
    # "an integer" would leave the agent nothing to correct.
    comparison, _, number = rule.strip().partition(" ")
    bound = _COMPARISONS.get(comparison)
    return f"{subject} must be {kinds} {bound} {number}" if bound is not None and number else f"{subject} must be {kinds}"


def _declared_pattern(matched: str, schema: dict[str, Any], location: str, *, keys: bool) -> str | None:
    r"""The pattern the schema declares at ``location`` that the decoder matched as ``matched``; else ``None``.

    The decoder matches a pattern as written (the application's own type)
    or as translated to ECMA-262's reading; two declared patterns may share
    a translation (``^\d$`` and ``^[\d]$``), so the one named is looked up
    where the value was refused, not from the translation.

    >>> schema = {"properties": {"code": {"type": "string", "pattern": "^[\\d]$"}}}
    >>> _declared_pattern("^(?a:[0-9])\\Z", schema, "$.code", keys=False)
    '^[\\d]$'
    """
    nodes = _nodes_at(schema, location)
    if keys:
        nodes = [cast("dict[str, Any]", names) for node in nodes for names in _key_names(schema, node) if isinstance(names, dict)]
    for node in _flatten(schema, nodes):
        declared = node.get("pattern")
        # Every declared pattern was translated when the codec was built: this one cannot be refused now.
        if isinstance(declared, str) and (declared == matched or ecma_pattern(declared) == matched):
            return declared
    return None


def _declares_uuid(schema: dict[str, Any], location: str, *, keys: bool) -> bool:
    """Whether the schema says the value (with ``keys``, each key of the mapping) at ``location`` is a UUID.

    >>> _declares_uuid({"properties": {"id": {"type": "string", "format": "uuid"}}}, "$.id", keys=False)
    True
    """
    nodes = _nodes_at(schema, location)
    if keys:
        nodes = [cast("dict[str, Any]", names) for node in nodes for names in _key_names(schema, node) if isinstance(names, dict)]
    return any(node.get("format") == "uuid" for node in _flatten(schema, nodes))


def _literal(text: str) -> str | None:
    # msgspec writes the pattern as a Python string literal (its repr).
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def _choices(schema: dict[str, Any], location: str, *, keys: bool = False) -> str | None:
    """The allowed values the schema declares at ``location`` (an enum, a Literal, a tag), rendered.

    With ``keys``, those of the keys of the mapping at ``location`` instead.
    """
    values: list[Any] = []
    nodes = _nodes_at(schema, location)
    if keys:
        nodes = [names for node in nodes for names in _key_names(schema, node)]
    for node in nodes:
        found = _enum_values(schema, node, 0)
        if found is None:
            return None
        values.extend(value for value in found if value not in values)
    if not values:
        return None
    shown = ", ".join(msgspec.json.encode(value).decode() for value in values[:_MAX_CHOICES])
    return shown + (", …" if len(values) > _MAX_CHOICES else "")


def _key_names(root: dict[str, Any], node: dict[str, Any], depth: int = 0) -> list[Any]:
    """The ``propertyNames`` of the mapping ``node`` describes, or of each mapping among its alternatives.

    An alternative that is no mapping with named keys (the null of an Optional) has none.
    """
    if depth > 8:
        return []
    mapping = _resolve(root, node)
    if "propertyNames" in mapping:
        return [mapping["propertyNames"]]
    alternatives = mapping.get("anyOf") or mapping.get("oneOf")
    if not isinstance(alternatives, list):
        return []
    return [
        names
        for alternative in cast("list[Any]", alternatives)
        if isinstance(alternative, dict)
        for names in _key_names(root, cast("dict[str, Any]", alternative), depth + 1)
    ]


def _enum_values(root: dict[str, Any], node: Any, depth: int) -> list[Any] | None:
    """Every value ``node`` admits when it admits only listed values (``null`` aside); else ``None``."""
    if depth > 8 or not isinstance(node, dict):
        return None
    mapping = _resolve(root, cast("dict[str, Any]", node))
    if "enum" in mapping:
        return list(cast("list[Any]", mapping["enum"]))
    if "const" in mapping:
        return [mapping["const"]]
    alternatives = mapping.get("anyOf") or mapping.get("oneOf")
    if isinstance(alternatives, list):
        values: list[Any] = []
        for alternative in cast("list[Any]", alternatives):
            if isinstance(alternative, dict) and cast("dict[str, Any]", alternative).get("type") == "null":
                continue
            found = _enum_values(root, alternative, depth + 1)
            if found is None:
                return None
            values.extend(found)
        return values
    return None


def _resolve(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    for _ in range(16):
        ref = node.get("$ref")
        if not (isinstance(ref, str) and ref.startswith(_REF_PREFIX)):
            break
        defs = cast("dict[str, Any]", root.get("$defs", {}))
        target = defs.get(ref[len(_REF_PREFIX) :])
        if not isinstance(target, dict):
            break
        node = cast("dict[str, Any]", target)
    return node


def _steps(location: str) -> list[str | int | None] | None:
    """``$.items[0].sku`` -> ``["items", 0, "sku"]``; a mapping value (``[...]``) is ``None``."""
    steps: list[str | int | None] = []
    rest = location[1:] if location.startswith("$") else None
    if rest is None:
        return None
    while rest:
        if rest.startswith("."):
            end = min((i for i in (rest.find(".", 1), rest.find("[", 1)) if i > 0), default=len(rest))
            steps.append(rest[1:end])
            rest = rest[end:]
        elif rest.startswith("["):
            end = rest.find("]")
            if end < 0:
                return None
            inside = rest[1:end]
            steps.append(int(inside) if inside.isdigit() else None)
            rest = rest[end + 1 :]
        else:
            return None
    return steps


def _nodes_at(schema: dict[str, Any], location: str) -> list[dict[str, Any]]:
    """The schema nodes that may describe the value at ``location`` (every union member that fits)."""
    steps = _steps(location)
    if steps is None:
        return []
    nodes: list[dict[str, Any]] = [schema]
    for step in steps:
        following: list[dict[str, Any]] = []
        for node in _flatten(schema, nodes):
            child: Any = None
            if isinstance(step, str):
                properties = node.get("properties")
                if isinstance(properties, dict):
                    child = cast("dict[str, Any]", properties).get(step)
            elif isinstance(step, int):
                prefix = node.get("prefixItems")
                if isinstance(prefix, list) and step < len(cast("list[Any]", prefix)):
                    child = cast("list[Any]", prefix)[step]
                else:
                    child = node.get("items")
            else:
                child = node.get("additionalProperties")
            if isinstance(child, dict):
                following.append(cast("dict[str, Any]", child))
        nodes = following
        if not nodes:
            return []
    return nodes


def _flatten(root: dict[str, Any], nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``nodes`` with references resolved and unions opened into their members."""
    out: list[dict[str, Any]] = []
    pending = list(nodes)
    while pending and len(out) < 64:
        node = _resolve(root, pending.pop(0))
        alternatives = node.get("anyOf") or node.get("oneOf")
        if isinstance(alternatives, list):
            pending.extend(cast("dict[str, Any]", a) for a in cast("list[Any]", alternatives) if isinstance(a, dict))
        else:
            out.append(node)
    return out


def project(schema: object, value: object, what: str) -> object:
    """Encode ``value`` through ``schema`` into JSON-ready builtins.

    Fields the schema does not declare are dropped. ``value`` may be a Struct,
    a dataclass or any object with the declared attributes, a ``dict``, or a
    tuple where the schema says list.

    >>> import msgspec
    >>> class Todo(msgspec.Struct):
    ...     title: str
    >>> class Stored(msgspec.Struct):
    ...     title: str
    ...     secret: str
    >>> project(list[Todo], (Stored("a", "s"),), "The todos projection is wrong")
    [{'title': 'a'}]

    Raises:
        AgentProjectionError: with the message ``what`` when ``value`` does not
            match ``schema``. Neither the message nor a chained exception
            carries the value.
    """
    try:
        converted = msgspec.convert(value, schema, from_attributes=True)
        if _declares_tuple(schema):
            # to_builtins keeps tuples; JSON has only arrays.
            return msgspec.json.decode(msgspec.json.encode(converted))
        return msgspec.to_builtins(converted, str_keys=True)
    except (msgspec.ValidationError, TypeError, ValueError, OverflowError, RecursionError):
        pass
    # Raised outside the handler so no context exception, whose text may quote
    # the value, rides along with it.
    raise AgentProjectionError(what) from None


def _declares_tuple(schema: object) -> bool:
    try:
        return _declares_tuple_cached(schema)
    except TypeError:  # an unhashable annotation
        return _has_tuple(schema)


@functools.lru_cache(maxsize=256)
def _declares_tuple_cached(schema: object) -> bool:
    return _has_tuple(schema)


def _has_tuple(schema: object) -> bool:
    return _any_type([schema], _is_tuple)


def _is_tuple(tp: Any) -> bool:
    origin: object = typing.get_origin(tp) or tp
    return isinstance(origin, type) and issubclass(origin, tuple)


def _error_path(text: str) -> str:
    # msgspec ends a located message with " - at `<path>`" (or " - at `key` in
    # `<path>`" for a dict key); string slicing, as this runs on every refusal.
    at = text.rfind(" - at `")
    if at < 0 or text[-1] != "`":
        return "$"
    path = text[at + 7 : -1]
    if path.startswith("key` in `"):
        path = path[9:]
    return path if path.startswith("$") else "$"


def _inline_root(raw: dict[str, Any], tp: object) -> dict[str, Any]:
    # A JSON round trip leaves only JSON types (a tuple default becomes a
    # list) and fresh containers the caller may own.
    schema = msgspec.json.decode(msgspec.json.encode(_without_sets(raw, (tp,))), type=dict[str, Any])
    _sort_set_defaults(schema)
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if not (isinstance(ref, str) and ref.startswith(_REF_PREFIX) and isinstance(defs, dict)):
        return schema
    defs = cast("dict[str, Any]", defs)
    name = ref[len(_REF_PREFIX) :]
    # A recursive root still refers to itself, so its definition stays, and
    # the root is a copy of it: the definition itself would then hold the
    # ``$defs`` that hold it, a cycle no encoder can write.
    root: dict[str, Any] = dict(defs[name]) if _mentions(defs, ref) else defs.pop(name)
    # Annotated roots carry their Meta beside the $ref; it describes the root.
    root.update((key, value) for key, value in schema.items() if key not in ("$ref", "$defs"))
    if defs:
        root["$defs"] = defs
    return root


_VALUES = ("default", "const", "examples")
"""The keywords whose contents are values of the schema beside them, not schemas."""


def _without_sets(raw: dict[str, Any], types: tuple[object, ...]) -> dict[str, Any]:
    """The raw schema msgspec made of ``types`` with every set in a value it carries a sorted list.

    Such a value is a default, a const, an example, or one of the
    application's own keywords (a ``Meta``'s ``extra_json_schema``).

    msgspec writes a set in hash order, which differs between processes, and
    where the schema says nothing of a value (an ``Any`` field's default, an
    example) nothing after encoding can tell that a list was a set. So sets
    are put in order while they are still sets: by each item's JSON
    encoding, an order that exists for items of mixed types too. An example
    reaches the raw schema as the object itself; a default arrives already
    turned into a list, so the defaults of the records inside ``types`` say
    which lists were sets, and what they become.
    """
    renderings: dict[tuple[str, bytes], Any] = {}
    seen: set[int] = set()
    pending = list(types)
    while pending:
        tp = pending.pop()
        if id(tp) in seen:
            continue
        seen.add(id(tp))
        record = _record(tp)
        for position, field in enumerate(record.fields if record is not None else ()):
            if field.default is msgspec.NODEFAULT:
                continue
            ordered = set_free(field.default)
            if ordered is not field.default:
                # In this process msgspec renders the set in this very order.
                as_written = msgspec.json.encode(msgspec.to_builtins(field.default, str_keys=True))
                name = f"#{position}" if record is not None and record.array_like else field.encode_name
                renderings[(name, as_written)] = ordered
        for meta in _metas(tp, record):
            # A set in the application's own keywords: msgspec lists it as this process iterates it.
            for key, value in (meta.extra_json_schema or {}).items():
                ordered = set_free(value)
                if ordered is not value:
                    renderings[(key, msgspec.json.encode(msgspec.to_builtins(value, str_keys=True)))] = ordered
        pending.extend(_components(tp))
    return cast("dict[str, Any]", _values_without_sets(raw, renderings, None))


def _metas(tp: Any, record: _Record | None) -> Iterator[msgspec.Meta]:
    """Every ``Meta`` annotating ``tp`` or, for a record, its fields' types (not inside the records below them)."""
    shapes = [field.type for field in record.fields] if record is not None else [tp]
    while shapes:
        shape = shapes.pop()
        if typing.get_origin(shape) is Annotated:
            inner, *metadata = typing.get_args(shape)
            yield from (meta for meta in metadata if isinstance(meta, msgspec.Meta))
            shapes.append(inner)
        elif _record(shape) is None:
            shapes.extend(arg for arg in typing.get_args(shape) if arg is not Ellipsis)


def _values_without_sets(node: Any, renderings: dict[tuple[str, bytes], Any], name: str | None) -> Any:
    """``node`` with sets in its values ordered; ``name``: the property (or ``#position``) ``node`` describes."""
    if isinstance(node, dict):
        mapping = cast("dict[str, Any]", node)
        out: dict[str, Any] = {}
        for key, value in mapping.items():
            if key == "examples" and isinstance(value, list):
                out[key] = [set_free(example) for example in cast("list[Any]", value)]
            elif key == "default" and name is not None and renderings:
                value = set_free(value)
                try:
                    written = msgspec.json.encode(value)
                except (TypeError, ValueError, OverflowError):
                    written = b""
                out[key] = renderings.get((name, written), value)
            elif key in _VALUES:
                out[key] = set_free(value)
            elif key == "properties" and isinstance(value, dict):
                properties = cast("dict[str, Any]", value)
                out[key] = {prop: _values_without_sets(shape, renderings, prop) for prop, shape in properties.items()}
            elif key == "prefixItems" and isinstance(value, list):
                shapes = cast("list[Any]", value)
                out[key] = [_values_without_sets(shape, renderings, f"#{i}") for i, shape in enumerate(shapes)]
            elif renderings and isinstance(value, list) and (ordered := _rendered(renderings, key, cast("list[Any]", value))) is not None:
                out[key] = ordered
            else:
                out[key] = _values_without_sets(value, renderings, None)
        return out
    if isinstance(node, list):
        return [_values_without_sets(item, renderings, None) for item in cast("list[Any]", node)]
    if isinstance(node, (set, frozenset)):
        # A set the application put in its own keywords (``extra_json_schema``), under any key.
        return set_free(node)
    return node


def _rendered(renderings: dict[tuple[str, bytes], Any], key: str, value: list[Any]) -> Any:
    """The ordered form of a set msgspec wrote as ``value`` under ``key``, or ``None``."""
    try:
        return renderings.get((key, msgspec.json.encode(value)))
    except (TypeError, ValueError):
        return None


def set_free(value: Any, depth: int = 0) -> Any:
    """``value`` with every set inside it a list in a stable order; ``value`` itself when it holds none."""
    if depth > 64:
        return value
    if isinstance(value, (set, frozenset)):
        items = [set_free(item, depth + 1) for item in cast("frozenset[Any]", value)]
        items.sort(key=_json_order)
        return items
    if isinstance(value, (list, tuple)):
        sequence = cast("list[Any] | tuple[Any, ...]", value)
        items = [set_free(item, depth + 1) for item in sequence]
        return sequence if all(new is old for new, old in zip(items, sequence, strict=True)) else items
    if isinstance(value, dict):
        mapping = cast("dict[Any, Any]", value)
        entries = {key: set_free(item, depth + 1) for key, item in mapping.items()}
        return mapping if all(entries[key] is item for key, item in mapping.items()) else entries
    if isinstance(value, msgspec.Struct) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        # Only the fields that hold a set are replaced in the record's own
        # encoding, which keeps its field names, tag and omitted defaults.
        record = _record(type(value))
        if record is None:
            return value
        changed = [(i, f, set_free(getattr(value, f.name), depth + 1)) for i, f in enumerate(record.fields)]
        changed = [(i, f, new) for i, f, new in changed if new is not getattr(value, f.name)]
        if not changed:
            return value
        encoded = cast("object", msgspec.to_builtins(value))
        offset = 1 if record.array_like and record.tag_field is not None else 0
        for i, f, new in changed:
            # A default the record omits (omit_defaults) stays omitted.
            if isinstance(encoded, list) and i + offset < len(cast("list[Any]", encoded)):
                cast("list[Any]", encoded)[i + offset] = new
            elif isinstance(encoded, dict) and f.encode_name in cast("dict[str, Any]", encoded):
                cast("dict[str, Any]", encoded)[f.encode_name] = new
        return cast("Any", encoded)
    return value


def _json_order(item: Any) -> bytes:
    try:
        return msgspec.json.encode(item)
    except (TypeError, ValueError, OverflowError):
        return repr(item).encode()


def _sort_set_defaults(node: object, defs: dict[str, Any] | None = None) -> None:
    # A set arrives in hash order, which differs between processes: put every
    # set inside every value a schema carries (a default, a const, each
    # example) in a stable order, so the schema (and every manifest) is
    # byte-identical across runs.
    if defs is None:
        root = cast("dict[str, Any]", node) if isinstance(node, dict) else {}
        defs = cast("dict[str, Any]", root.get("$defs", {}))
    if isinstance(node, dict):
        mapping = cast("dict[str, Any]", node)
        if "default" in mapping:
            mapping["default"] = _canonical(mapping["default"], mapping, defs, 0)
        if "const" in mapping:
            mapping["const"] = _canonical(mapping["const"], mapping, defs, 0)
        examples = mapping.get("examples")
        if isinstance(examples, list):
            mapping["examples"] = [_canonical(example, mapping, defs, 0) for example in cast("list[Any]", examples)]
        for key, value in mapping.items():
            if key not in _VALUES:
                _sort_set_defaults(value, defs)
    elif isinstance(node, list):
        for item in cast("list[Any]", node):
            _sort_set_defaults(item, defs)


def _canonical(value: Any, schema: Any, defs: dict[str, Any], depth: int) -> Any:
    """``value`` with every list its ``schema`` marks ``uniqueItems`` (a set) sorted."""
    if depth > 32 or not isinstance(schema, dict):
        return value
    node = cast("dict[str, Any]", schema)
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        return _canonical(value, defs.get(ref[len(_REF_PREFIX) :]), defs, depth + 1)
    for union in ("anyOf", "oneOf"):
        branches = node.get(union)
        if isinstance(branches, list):
            # The branch of the value's JSON kind describes it (an Optional's
            # array or object, not its null).
            branch = _branch_of(value, cast("list[Any]", branches), defs)
            return value if branch is None else _canonical(value, branch, defs, depth + 1)
    if isinstance(value, list):
        items = cast("list[Any]", value)
        prefix = node.get("prefixItems")
        if isinstance(prefix, list):
            shapes = cast("list[Any]", prefix)
            items = [_canonical(item, shapes[i] if i < len(shapes) else node.get("items"), defs, depth + 1) for i, item in enumerate(items)]
        else:
            items = [_canonical(item, node.get("items"), defs, depth + 1) for item in items]
        if node.get("uniqueItems") is True:
            items.sort(key=msgspec.json.encode)
        return items
    if isinstance(value, dict):
        fields = cast("dict[str, Any]", value)
        properties = node.get("properties")
        shapes = cast("dict[str, Any]", properties) if isinstance(properties, dict) else {}
        extra = node.get("additionalProperties")
        return {key: _canonical(item, shapes.get(key, extra), defs, depth + 1) for key, item in fields.items()}
    return value


def _branch_of(value: Any, branches: list[Any], defs: dict[str, Any]) -> Any:
    """The first of ``branches`` that describes a value of ``value``'s JSON kind (array or object), if one does."""
    kind = "array" if isinstance(value, list) else "object" if isinstance(value, dict) else None
    if kind is None:
        return None
    for branch in branches:
        shape: object = branch
        ref = cast("dict[str, Any]", shape).get("$ref") if isinstance(shape, dict) else None
        if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
            shape = defs.get(ref[len(_REF_PREFIX) :])
        if not isinstance(shape, dict):
            continue
        described = cast("dict[str, Any]", shape)
        said = described.get("type")
        if said == kind or (isinstance(said, list) and kind in said):
            return branch
        if kind == "array" and ("items" in described or "prefixItems" in described):
            return branch
        if kind == "object" and ("properties" in described or "additionalProperties" in described):
            return branch
    return None


def _mentions(node: object, ref: str) -> bool:
    if isinstance(node, dict):
        items = cast("dict[str, object]", node)
        return items.get("$ref") == ref or any(_mentions(value, ref) for value in items.values())
    if isinstance(node, list):
        return any(_mentions(value, ref) for value in cast("list[object]", node))
    return False


# --- records: the object-like types an input can nest -----------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    encode_name: str
    type: Any
    default: Any = msgspec.NODEFAULT
    default_factory: Any = msgspec.NODEFAULT


@dataclasses.dataclass(frozen=True, slots=True)
class _Record:
    name: str
    qualname: str
    module: str
    doc: str | None
    fields: tuple[_Field, ...]
    closed: bool
    array_like: bool = False
    tag_field: str | None = None
    tag: str | int | None = None


def _record(tp: Any) -> _Record | None:
    """Describe ``tp`` if it is a record msgspec decodes from an object or array."""
    obj: object = typing.get_origin(tp) or tp
    if not isinstance(obj, type):
        return None
    cls = cast("type[object]", obj)
    if issubclass(cls, msgspec.Struct):
        config = cls.__struct_config__
        fields = tuple(
            _Field(f.name, f.encode_name, f.type, f.default, f.default_factory) for f in msgspec.structs.fields(tp)
        )
        return _Record(
            _class_name(tp),
            cls.__qualname__ if cls is tp else _class_name(tp),
            cls.__module__,
            cls.__doc__,
            fields,
            config.forbid_unknown_fields,
            config.array_like,
            config.tag_field,
            config.tag,
        )
    if cls is not tp:
        return None
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls, include_extras=True)
        fields = tuple(
            _Field(
                f.name,
                f.name,
                hints[f.name],
                msgspec.NODEFAULT if f.default is dataclasses.MISSING else f.default,
                msgspec.NODEFAULT if f.default_factory is dataclasses.MISSING else f.default_factory,
            )
            for f in dataclasses.fields(cls)
            if f.init
        )
        return _Record(cls.__name__, cls.__qualname__, cls.__module__, _own_doc(cls), fields, False)
    if typing.is_typeddict(cls):
        hints = typing.get_type_hints(cls, include_extras=True)
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        typed: list[_Field] = []
        for name, hint in hints.items():
            # Stringified annotations hide NotRequired from __required_keys__
            # on Python 3.11, so the wrapper itself decides when present.
            required = name in required_keys
            while typing.get_origin(hint) in (Required, NotRequired):
                required = typing.get_origin(hint) is Required
                hint = typing.get_args(hint)[0]
            if required:
                typed.append(_Field(name, name, hint))
            else:
                typed.append(_Field(name, name, Union[hint, msgspec.UnsetType], msgspec.UNSET))  # noqa: UP007
        return _Record(cls.__name__, cls.__qualname__, cls.__module__, cls.__doc__, tuple(typed), False)
    if tuple in cls.__mro__ and hasattr(cls, "_fields"):
        hints = typing.get_type_hints(cls, include_extras=True)
        defaults: dict[str, Any] = getattr(cls, "_field_defaults", {})
        fields = tuple(
            _Field(name, name, hints.get(name, Any), defaults.get(name, msgspec.NODEFAULT))
            for name in cast("tuple[str, ...]", getattr(cls, "_fields"))
        )
        return _Record(cls.__name__, cls.__qualname__, cls.__module__, _own_doc(cls), fields, True, array_like=True)
    return None


def _is_struct_class(obj: object) -> bool:
    return isinstance(obj, type) and issubclass(obj, msgspec.Struct)


def _class_name(tp: Any) -> str:
    args = typing.get_args(tp)
    if not args:
        return cast(type, tp).__name__
    rendered = ", ".join(a.__name__ if isinstance(a, type) else repr(a) for a in args)
    return f"{cast(type, typing.get_origin(tp)).__name__}[{rendered}]"


def _own_doc(cls: type) -> str | None:
    # Dataclasses and named tuples invent "Name(a, b)" docstrings, which
    # msgspec leaves out of their schemas; the mirror must too.
    doc = cls.__doc__
    if doc and doc.startswith(f"{cls.__name__}(") and doc.endswith(")"):
        return None
    return doc


def _components(tp: Any) -> Iterator[Any]:
    """The types directly inside ``tp`` that could hold a record."""
    record = _record(tp)
    if record is not None:
        yield from (field.type for field in record.fields)
        return
    origin = typing.get_origin(tp)
    if origin is Literal:
        return
    if origin is not None:
        yield from (arg for arg in typing.get_args(tp) if arg is not Ellipsis)
        return
    inner = getattr(tp, "__supertype__", None) or getattr(tp, "__value__", None)
    if inner is not None:
        yield inner


def _has_open_record(root: type) -> bool:
    """Whether a record below ``root`` would accept a key it does not declare."""
    return _any_type(list(_components(root)), _is_open_record)


def _is_open_record(tp: Any) -> bool:
    record = _record(tp)
    return record is not None and not record.closed


def _is_mapping(tp: object) -> bool:
    return isinstance(tp, type) and issubclass(tp, Mapping)


def _has_non_str_keys(root: type) -> bool:
    """Whether a mapping below ``root`` has keys other than ``str``, which JSON spells as strings.

    >>> import msgspec
    >>> class ByName(msgspec.Struct):
    ...     scores: dict[str, int]
    >>> class ById(msgspec.Struct):
    ...     names: list[dict[int, str]]
    >>> _has_non_str_keys(ByName), _has_non_str_keys(ById)
    (False, True)
    """
    return _any_type(list(_components(root)), _is_non_str_mapping)


def _is_non_str_mapping(tp: Any) -> bool:
    if _is_mapping(tp):
        return True  # a bare mapping type: keys of any type
    if _is_mapping(typing.get_origin(tp)):
        args = typing.get_args(tp)
        return not args or args[0] is not str
    return False


def _any_type(pending: list[Any], test: Callable[[Any], bool]) -> bool:
    """Whether ``test`` holds for a type in ``pending`` or below it, each visited once."""
    seen: set[int] = set()
    while pending:
        tp = pending.pop()
        if id(tp) in seen:
            continue
        seen.add(id(tp))
        if test(tp):
            return True
        pending.extend(_components(tp))
    return False


# --- strict mirrors -------------------------------------------------------------

_Key = tuple[object, bool, bool]

# Completed mirrors, keyed by (type, is-root, is-decoding). A mirror is a pure
# function of its type, so sharing one across codecs keeps schemas and
# msgspec's decoder caches small.
_MIRRORS: dict[_Key, Any] = {}


def _mirror(tp: type, *, root: bool, decoding: bool = False) -> Any:
    """The closed Struct mirroring record type ``tp`` (tagless when ``root``).

    A *decoding* mirror is never described, only decoded through, before the
    application's own type: it refuses what msgspec's reading of ``tp`` takes
    yet its schema does not admit (see :meth:`_MirrorBuilder.type`).
    """
    key: _Key = (tp, root, decoding)
    mirror = _MIRRORS.get(key)
    if mirror is None:
        builder = _MirrorBuilder(decoding=decoding)
        mirror = builder.record(tp, root=root)
        builder.finish()
    return mirror


class _MirrorBuilder:
    """One walk over a type tree; recursive types are tied up with forward refs."""

    def __init__(self, *, decoding: bool = False) -> None:
        self.decoding = decoding
        self.built: dict[_Key, Any] = {}
        self.frames: list[_Key] = []
        # (mirror that holds the reference, attribute name, mirror it names)
        self.fixups: list[tuple[_Key, str, _Key]] = []

    def finish(self) -> None:
        # msgspec resolves a Struct's annotations on first use, so binding the
        # forward-ref names after every class exists is early enough.
        for holder, attribute, target in self.fixups:
            setattr(self.built[holder], attribute, self.built[target])
        _MIRRORS.update(self.built)

    def record(self, tp: Any, *, root: bool = False) -> Any:
        key: _Key = (tp, root, self.decoding)
        done = _MIRRORS.get(key) or self.built.get(key)
        if done is not None:
            return done
        if key in self.frames:
            attribute = f"_agentfx_ref_{len(self.fixups)}"
            self.fixups.append((self.frames[-1], attribute, key))
            return typing.ForwardRef(attribute)
        info = _record(tp)
        assert info is not None
        self.frames.append(key)
        try:
            fields = [(f.name, self.type(f.type), _field_spec(f)) for f in info.fields]
        finally:
            self.frames.pop()
        if not self.decoding:
            for field in info.fields:
                _check_default(info.name, field)
        mirror = msgspec.defstruct(
            # A tagged type nested in itself has a second, tagged mirror; a
            # distinct name keeps msgspec from qualifying that one's $defs key.
            # The codec puts the real title back on the inlined root.
            f"{info.name}_root" if root else info.name,
            fields,
            module=info.module,
            namespace={"__doc__": info.doc, "__qualname__": info.qualname},
            tag=None if root else info.tag,
            tag_field=None if root else info.tag_field,
            forbid_unknown_fields=True,
            array_like=info.array_like,
            # Hashable, so a mirror can stand inside a set as the frozen record it mirrors does.
            frozen=True,
            # Mirrors are never built positionally; this keeps field order
            # even when a required field follows a defaulted one.
            kw_only=True,
        )
        self.built[key] = mirror
        return mirror

    def type(self, tp: Any) -> Any:
        """``tp`` with every record inside replaced by its mirror (``tp`` itself if none).

        In a decoding mirror a ``Decimal`` is a ``str`` too: its schema is a
        string, yet msgspec reads a JSON number into one as well. Its own
        rules (bounds, the decimal syntax) stay with the application's type,
        decoded next. A string's ``pattern`` is matched as the schema's
        ECMA-262 reader matches it (see :func:`agentfx._patterns.ecma_pattern`).
        And a nested tagged record must carry its tag, as its schema says:
        msgspec requires the tag only to tell a union's records apart, so
        every tagged record stands in a union with :func:`_tag_required`'s.
        """
        if _record(tp) is not None:
            mirror = self.record(tp)
            required = _tag_required([tp]) if self.decoding else None
            return mirror if required is None else Union[mirror, required]  # noqa: UP007
        if self.decoding and _unwrapped(tp) is decimal.Decimal:
            return str
        if self.decoding and _unwrapped(tp) is uuid.UUID:
            return _UUID_TEXT
        origin = typing.get_origin(tp)
        if tp is msgspec.Raw:
            raise TypeError(
                "msgspec.Raw cannot be read from a tool call's arguments (msgspec builds one only when it decodes "
                "JSON bytes itself); take Any, or the type the value has"
            )
        if origin is Literal or origin is None:
            if _is_flag(tp):
                # msgspec decodes any combination of the members, which the
                # schema (its members alone) would not admit: strict decoding
                # would take what the advertised schema refuses.
                raise TypeError(
                    f"{getattr(tp, '__name__', tp)} is an enum.Flag, whose combinations a JSON Schema cannot list; "
                    "take a list of an Enum instead"
                )
            if not self.decoding and tp in _TIME_TEXT:
                return Annotated[tp, msgspec.Meta(description=_TIME_TEXT[tp])]
            inner = getattr(tp, "__supertype__", None) or getattr(tp, "__value__", None)
            if inner is None or origin is Literal:
                return tp
            mirrored = self.type(inner)
            # A NewType or type alias over a record becomes the record's mirror.
            return tp if mirrored is inner else mirrored
        if origin is Annotated:
            inner, *metadata = typing.get_args(tp)
            _check_multiple_of(metadata)
            tz = next((meta.tz for meta in metadata if isinstance(meta, msgspec.Meta) and meta.tz is not None), None)
            if inner in _TIME_TEXT and tz is not None:
                # A tz constraint gives msgspec's own format, except a naive date-time's.
                naive = not self.decoding and inner is datetime.datetime and not tz
                mirrored = Annotated[inner, msgspec.Meta(description=_NAIVE_TEXT)] if naive else inner
            else:
                mirrored = self.type(inner)
            if self.decoding:
                ecma = [_ecma_meta(meta) for meta in metadata]
                if any(new is not old for new, old in zip(ecma, metadata, strict=True)):
                    return Annotated[(mirrored, *ecma)]
            return tp if mirrored is inner else Annotated[(mirrored, *metadata)]
        args = typing.get_args(tp)
        _check_literal_union(tp)
        if self.decoding and (origin is Union or origin is types.UnionType):
            # The union's own records, and one record requiring their tag field for them all.
            # A UUID beside another member but None stays one: as a string it would
            # change how msgspec reads the union (every mapping key as the string).
            mixed = sum(arg is not type(None) for arg in args) > 1

            def member(arg: Any) -> Any:
                if _record(arg) is not None:
                    return self.record(arg)
                return arg if mixed and _unwrapped(arg) is uuid.UUID else self.type(arg)

            members = tuple(member(arg) for arg in args)
            required = _tag_required(list(args))
            return Union[members if required is None else (*members, required)]  # noqa: UP007
        if origin in _SET_ORIGINS and args:
            _check_hashable_items(tp, args[0])
        mirrored_args = tuple(arg if arg is Ellipsis else self.type(arg) for arg in args)
        names = _property_names(args[0]) if _is_mapping(origin) and args else None
        if names is not None:
            # msgspec says nothing of the keys of such a mapping, so its schema
            # would admit any key while the decoder refuses all but these.
            return Annotated[origin[mirrored_args], msgspec.Meta(extra_json_schema={"propertyNames": names})]
        if all(new is old for new, old in zip(mirrored_args, args, strict=True)):
            return tp
        if origin is Union or origin is types.UnionType:
            return Union[mirrored_args]  # noqa: UP007
        return origin[mirrored_args]


def _check_default(record: str, field: _Field) -> None:
    """Refuse a default its own field refuses: a call that leaves the field out would hand ``update`` a value no agent could send.

    The default is read back from its JSON as an agent's value would be, so
    every constraint of the field applies. A default factory is not called
    here (it may build something new each time) and is not checked.

    >>> from typing import Annotated
    >>> _check_default("AddTodo", _Field("priority", "priority", Annotated[int, msgspec.Meta(ge=1)], 0))
    Traceback (most recent call last):
    ...
    TypeError: the default of AddTodo.priority, 0, is not a value the field takes (Expected `int` >= 1); change the default or the field's type
    """
    default = field.default
    if default is msgspec.NODEFAULT or default is msgspec.UNSET:
        return
    try:
        encoded = msgspec.json.encode(default)
    except (TypeError, ValueError):
        return  # Not JSON at all: describing the field's default refuses it, in msgspec's words.
    try:
        msgspec.json.decode(encoded, type=field.type)
    except msgspec.ValidationError as exc:
        raise TypeError(
            f"the default of {record}.{field.name}, {reprlib.repr(default)}, is not a value the field takes ({exc}); "
            "change the default or the field's type"
        ) from None


_TIME_TEXT: dict[object, str] = {
    datetime.datetime: "An RFC 3339 date-time, such as 2024-05-01T09:30:00Z; the UTC offset may be left out",
    datetime.time: "An RFC 3339 time, such as 09:30:00; the UTC offset may be left out",
}
"""What a date-time or time the decoder reads with or without an offset is described with.

msgspec gives such a type no ``format``: JSON Schema's ``date-time`` and
``time`` require the offset, which the decoder does not. Without a word, an
agent would read a bare string and guess. A description of the application's
own, in the same ``Annotated``, comes later and wins.
"""

_NAIVE_TEXT = "An RFC 3339 date-time without a UTC offset, such as 2024-05-01T09:30:00"
"""What a date-time constrained ``tz=False`` is described with (msgspec gives it no ``format``)."""

_SET_ORIGINS: frozenset[object] = frozenset({set, frozenset, AbstractSet})
_UNHASHABLE: frozenset[object] = frozenset({list, dict, set, bytearray})
"""What msgspec decodes into values no set can hold."""


def _check_hashable_items(tp: Any, item: Any) -> None:
    """Refuse a set whose items msgspec cannot hash: every value but the empty set would be refused.

    >>> class Tag(msgspec.Struct):
    ...     name: str
    >>> _check_hashable_items(set[Tag], Tag)
    Traceback (most recent call last):
    ...
    TypeError: set[Tag] cannot hold Tag: its values are not hashable, so no set of them can be decoded; declare Tag with frozen=True, or take a list
    """
    unhashable = _unhashable(item)
    if unhashable is not None:
        shown, fix = unhashable
        raise TypeError(
            f"{_class_name(tp)} cannot hold {shown}: its values are not hashable, so no set of them can be decoded; {fix}"
        )
    if _mixes_bool_and_number(item, set()):
        # JSON's true and 1 are two items, Python's True and 1 one: the schema
        # would allow [1, true] and the decoder refuse it as a repeated item.
        raise TypeError(
            f"{_class_name(tp)} cannot hold both true and 1 (or false and 0) as two items, as its schema would allow: "
            "Python counts them as one; take a list, or keep booleans and numbers in separate fields"
        )


def _unhashable(tp: Any) -> tuple[str, str] | None:
    """What in ``tp`` decodes to a value that cannot be hashed, and the fix, or ``None``."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _unhashable(typing.get_args(tp)[0])
    inner = getattr(tp, "__supertype__", None) or getattr(tp, "__value__", None)
    if inner is not None and origin is None:
        return _unhashable(inner)
    if origin is Union or origin is types.UnionType:
        return next((found for arg in typing.get_args(tp) if (found := _unhashable(arg)) is not None), None)
    if origin is tuple:
        return next((found for arg in typing.get_args(tp) if arg is not Ellipsis and (found := _unhashable(arg)) is not None), None)
    cls: object = origin or tp
    if cls in _UNHASHABLE or _is_mapping(cls) or (isinstance(cls, type) and typing.is_typeddict(cls)):
        return _class_name(tp), "take a tuple or a frozen record for each item, or a list instead of the set"
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        config = cls.__struct_config__
        if config.eq and not config.frozen:
            return cls.__name__, f"declare {cls.__name__} with frozen=True, or take a list"
        return None
    if isinstance(cls, type) and dataclasses.is_dataclass(cls) and getattr(cls, "__hash__", None) is None:
        return cls.__name__, f"declare {cls.__name__} with @dataclass(frozen=True), or take a list"
    return None


_NUMBERS: frozenset[object] = frozenset({int, float, decimal.Decimal})


def _mixes_bool_and_number(tp: Any, seen: set[int]) -> bool:
    """Whether one place in ``tp`` takes both a boolean and a number, which Python may count as equal.

    >>> _mixes_bool_and_number(int | bool, set()), _mixes_bool_and_number(tuple[int, bool], set())
    (True, False)
    """
    tp = _unwrapped(tp)
    kinds = _scalar_kinds(tp)
    if "bool" in kinds and "number" in kinds:
        return True
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType or origin is tuple:
        return any(arg is not Ellipsis and _mixes_bool_and_number(arg, seen) for arg in typing.get_args(tp))
    record = _record(tp) if id(tp) not in seen else None
    if record is not None:
        # Records compare field by field: P(x=1) == P(x=True).
        seen.add(id(tp))
        return any(_mixes_bool_and_number(field.type, seen) for field in record.fields)
    return False


def _scalar_kinds(tp: Any) -> set[str]:
    """``"bool"`` and ``"number"``: which of the two the value at this one place may be."""
    tp = _unwrapped(tp)
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return {kind for arg in typing.get_args(tp) for kind in _scalar_kinds(arg)}
    if origin is Literal:
        return {"bool" if type(value) is bool else "number" for value in typing.get_args(tp) if type(value) in (bool, int)}
    if tp is bool:
        return {"bool"}
    if tp in _NUMBERS or (isinstance(tp, type) and issubclass(tp, (enum.IntEnum, enum.IntFlag))):
        return {"number"}
    return set()


def _needs_decoding_mirror(root: type) -> bool:
    """Whether msgspec would read, below ``root``, a value its schema refuses that a decoding mirror refuses.

    >>> class Price(msgspec.Struct):
    ...     amount: decimal.Decimal
    >>> class Name(msgspec.Struct):
    ...     title: str
    >>> class Shape(msgspec.Struct, tag=True):
    ...     sides: int
    >>> Drawn = msgspec.defstruct("Drawn", [("shape", Shape)])
    >>> _needs_decoding_mirror(Price), _needs_decoding_mirror(Name), _needs_decoding_mirror(Drawn)
    (True, False, True)
    """
    return _any_type(list(_components(root)), _decodes_more_than_described)


_UUID_TEXT = Annotated[str, msgspec.Meta(min_length=36, max_length=36)]
"""A UUID as its schema's ``format: uuid`` reads one: hyphenated. msgspec takes 32 bare hex digits too.

Decoded after the application's type has read a UUID there, so its length
alone tells the two spellings apart (a pattern costs a regular expression
match, several times the whole decode).
"""


def _decodes_more_than_described(tp: Any) -> bool:
    return tp is decimal.Decimal or tp is uuid.UUID or (isinstance(tp, msgspec.Meta) and _ecma_meta(tp) is not tp) or _tagged_object(tp)


def _tagged_object(tp: Any) -> bool:
    """Whether ``tp`` is a tagged record sent as an object: one whose tag msgspec may not require."""
    record = _record(tp)
    return record is not None and record.tag_field is not None and not record.array_like


_TAG_REQUIRED: dict[tuple[str, bool, frozenset[object]], Any] = {}
"""The records :func:`_tag_required` made, by tag field, tag kind and the tags beside them: one per set of records."""


def _tag_required(members: list[Any]) -> Any:
    """The record that makes msgspec require the tag of the tagged object records among ``members``; ``None`` if none.

    msgspec reads a record's tag to tell a union's records apart, and so
    requires it only there: a tagged record alone (or beside ``None``) is
    read without it. Beside this record, with the same tag field and a tag
    no client sends, every one is told apart by its tag. It has no fields,
    so what decodes to it (only its own tag) the application's type has
    already refused.

    >>> class Shape(msgspec.Struct, tag=True):
    ...     sides: int
    >>> msgspec.convert({"sides": 3}, Shape)
    Shape(sides=3)
    >>> msgspec.convert({"sides": 3}, Union[Shape, _tag_required([Shape])])
    Traceback (most recent call last):
    ...
    msgspec.ValidationError: Object missing required field `type`
    """
    tagged = [cast("_Record", _record(member)) for member in members if _tagged_object(member)]
    if not tagged:
        return None
    tag_field = tagged[0].tag_field
    assert tag_field is not None
    numbered = isinstance(tagged[0].tag, int)
    taken = frozenset(record.tag for record in tagged)
    key = (tag_field, numbered, taken)
    made = _TAG_REQUIRED.get(key)
    if made is None:
        tag: object = -(2**63) if numbered else "\x00agentfx: a tag no client sends"
        while tag in taken:
            tag = tag + 1 if isinstance(tag, int) else f"{tag}'"
        made = msgspec.defstruct("TagRequired", [], tag=cast("Any", tag), tag_field=tag_field, forbid_unknown_fields=True, frozen=True)
        _TAG_REQUIRED[key] = made
    return made


def _ecma_meta(meta: object) -> object:
    """``meta`` with its pattern matched as ECMA-262 matches it; ``meta`` itself when that changes nothing."""
    if not isinstance(meta, msgspec.Meta) or meta.pattern is None:
        return meta
    pattern = ecma_pattern(meta.pattern)
    if pattern == meta.pattern:
        return meta
    kept = {name: getattr(meta, name) for name in _META_CONSTRAINTS if getattr(meta, name) is not None}
    return msgspec.Meta(**kept, pattern=pattern)


_META_CONSTRAINTS = ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "tz")
"""What a ``Meta`` says of a value besides its pattern (a decoding mirror is never described)."""

# --- sets: unique items -----------------------------------------------------------
#
# A set's schema says ``uniqueItems: true``, yet msgspec reads a list with a
# repeated item into a set by dropping the repeat. After decoding, each set is
# compared with the list it came from: fewer items means a repeat (two items
# that decode equal). The walk follows the type, pairing each JSON value with
# what it decoded to, and is built once per input type, for those with a set.
# Inside a set nothing pairs (its order is not the list's): there the walk
# rebuilds each item with the sets inside it already decoded, so every value
# is decoded once more at most, however deeply sets nest.
# Equal is the application's equality: two spellings of one value (the
# decimals "1.0" and "1.00", [1, 2] and [2, 1] as frozensets) are a repeat
# here, though a JSON Schema validator tells them apart; the set could hold
# only one of them.

_Check = Callable[[Any, Any, str], "str | None"]
"""``check(sent, decoded, path)``: the path of a set sent with a repeated item inside ``sent``, if any."""


def _repeated_items_check(root: type) -> _Check | None:
    """The check of the sets inside the input type ``root``; ``None`` when it holds none.

    >>> class Labelled(msgspec.Struct):
    ...     labels: frozenset[str]
    >>> check = _repeated_items_check(Labelled)
    >>> check({"labels": ["a", "a"]}, Labelled(frozenset({"a"})), "$")
    '$.labels'
    """
    if not _any_type(list(_components(root)), _is_set):
        return None
    return _RepeatedItems().check(root)


def _is_set(tp: Any) -> bool:
    origin: object = typing.get_origin(tp) or tp
    return isinstance(origin, type) and issubclass(origin, AbstractSet)


_UNPAIRED: Any = object()
"""In place of what a value decoded to, where it is not known: the value's own walk rebuilds it."""

_Task = tuple["_Walker", Any, Any, str]
"""``(walker, sent, decoded, path)``: a value for the walk to visit; ``decoded`` may be :data:`_UNPAIRED`."""

_Found = tuple["str | None", Any]
"""What a visit gives back: the path of a set sent with a repeated item, if any, and the value rebuilt."""

_Visit = Generator[_Task, _Found, _Found]


class _Walker:
    """How the sets inside one type are checked, visiting a value paired with what it decoded to, or not.

    A visit is a generator yielding the values inside to visit and receiving
    what each gave back, so :func:`_walk` runs it with its own stack: a
    value nested as deeply as msgspec decodes is checked, however many
    levels that is, without Python's recursion limit.

    Unpaired (inside a set, whose own order is not the list's), a visit
    rebuilds the value: the JSON sent with each set inside it replaced by
    what it decoded to. msgspec takes a decoded value as it is, so each
    set's items are then decoded once, over what is left of them, and the
    whole walk is linear in the payload however deeply sets nest.
    """

    __slots__ = ()

    def visit(self, sent: Any, decoded: Any, path: str) -> _Visit:  # pragma: no cover - every kind has its own
        raise NotImplementedError
        yield


def _walk(walker: _Walker, sent: Any, decoded: Any, path: str) -> str | None:
    """The path of the first set with a repeated item inside ``sent``, visited by ``walker`` on a stack of its own."""
    stack = [walker.visit(sent, decoded, path)]
    given: Any = None
    while stack:
        try:
            task = stack[-1].send(given)
        except StopIteration as done:
            stack.pop()
            given = done.value
            continue
        inner, value, made, at = task
        while isinstance(inner, _Later):
            inner = inner.walker
        stack.append(inner.visit(value, made, at))
        given = None
    return cast("_Found", given)[0]


class _Unchecked(_Walker):
    """A value with no set inside: nothing to check, and nothing to rebuild."""

    __slots__ = ()

    def visit(self, sent: Any, decoded: Any, path: str) -> _Visit:
        return None, sent
        yield


class _Later(_Walker):
    """The walker of a recursive type, known once the type's walker is built."""

    __slots__ = ("walker",)

    def __init__(self) -> None:
        self.walker: _Walker = _Unchecked()


class _SetWalk(_Walker):
    __slots__ = ("item", "tp")

    def __init__(self, tp: Any, item: _Walker | None) -> None:
        self.tp, self.item = tp, item

    def visit(self, sent: Any, decoded: Any, path: str) -> _Visit:
        if decoded is not _UNPAIRED:
            if len(sent) != len(decoded):
                return path, None
            if self.item is not None:
                for i, value in enumerate(sent):
                    where, _ = yield self.item, value, _UNPAIRED, f"{path}[{i}]"
                    if where is not None:
                        return where, None
            return None, None
        items: list[Any] = sent
        first = None
        if self.item is not None:
            items = []
            for i, value in enumerate(sent):
                where, rebuilt = yield self.item, value, _UNPAIRED, f"{path}[{i}]"
                items.append(rebuilt)
                first = where if first is None else first
        made = msgspec.convert(items, self.tp, str_keys=True)
        # This set's own repeat is named before one inside its items, as when paired.
        return (path if len(made) != len(sent) else first), made


def _visit_each(children: Iterator[tuple[Any, _Walker, Any, Any, str]], rebuilt: Any) -> _Visit:
    """Visit each ``(slot, walker, sent, decoded, path)`` of a container, paired or rebuilt.

    Paired (``rebuilt`` is ``None``), up to the first repeat; else every one,
    each rebuilt value put in ``rebuilt[slot]`` and the first repeat kept.
    """
    first = None
    for slot, walker, value, made, path in children:
        where, item = yield walker, value, made, path
        if rebuilt is None:
            if where is not None:
                return where, None
        else:
            rebuilt[slot] = item
            first = where if first is None else first
    return first, rebuilt


class _RecordWalk(_Walker):
    __slots__ = ("array_like", "fields", "typed_dict")

    def __init__(self, fields: list[tuple[str, str, int, _Walker]], array_like: bool, typed_dict: bool) -> None:
        self.fields, self.array_like, self.typed_dict = fields, array_like, typed_dict

    def visit(self, sent: Any, decoded: Any, path: str) -> _Visit:
        paired = decoded is not _UNPAIRED
        rebuilt: Any = None if paired else list(sent) if self.array_like else dict(sent)
        return (yield from _visit_each(self.children(sent, decoded, path, paired), rebuilt))

    def children(self, sent: Any, decoded: Any, path: str, paired: bool) -> Iterator[tuple[Any, _Walker, Any, Any, str]]:
        for name, key, at, walker in self.fields:
            made = _UNPAIRED if not paired else decoded[name] if self.typed_dict else getattr(decoded, name)
            if self.array_like:
                if at < len(sent):
                    yield at, walker, sent[at], made, f"{path}[{at}]"
            elif key in sent:
                yield key, walker, sent[key], made, f"{path}.{key}"


class _SequenceWalk(_Walker):
    """A list, a sequence or a tuple: every item checked by one walker, or each position by its own."""

    __slots__ = ("item", "positions")

    def __init__(self, item: _Walker | None, positions: list[_Walker | None] | None) -> None:
        self.item, self.positions = item, positions

    def visit(self, sent: Any, decoded: Any, path: str) -> _Visit:
        paired = decoded is not _UNPAIRED
        made = iter(decoded) if paired else itertools.repeat(_UNPAIRED)
        children = (
            (i, walker, value, value_made, f"{path}[{i}]")
            for i, (value, value_made) in enumerate(zip(sent, made))
            if (walker := self.item if self.positions is None else self.positions[i] if i < len(self.positions) else None)
            is not None
        )
        return (yield from _visit_each(children, None if paired else list(sent)))


class _MappingWalk(_Walker):
    __slots__ = ("value",)

    def __init__(self, value: _Walker) -> None:
        self.value = value

    def visit(self, sent: Any, decoded: Any, path: str) -> _Visit:
        # Keys that decode equal (an integer key spelled twice) leave fewer
        # entries to pair with: then each value is rebuilt, as inside a set.
        paired = decoded is not _UNPAIRED and len(sent) == len(decoded)
        made = iter(decoded.values()) if paired else itertools.repeat(_UNPAIRED)
        children = ((key, self.value, value, value_made, f"{path}[...]") for (key, value), value_made in zip(sent.items(), made))
        return (yield from _visit_each(children, None if paired else dict(sent)))


class _UnionWalk(_Walker):
    """The members that hold a set, each with the class it decodes to, its JSON kind and its tag."""

    __slots__ = ("options", "tp")

    def __init__(self, tp: Any, options: list[tuple[type | tuple[type, ...], type, tuple[str, object] | None, _Walker]]) -> None:
        self.tp, self.options = tp, options

    def visit(self, sent: Any, decoded: Any, path: str) -> _Visit:
        if decoded is _UNPAIRED:
            # msgspec takes at most one member of each JSON kind, or tagged
            # records of it: the member is told by the kind and the tag.
            kind = _sent_kind(sent)
            fitting = [o for o in self.options if o[1] is kind]
            if len(fitting) > 1:
                fitting = [o for o in fitting if o[2] is not None and _tag_of(sent, o[2][0]) == o[2][1]]
            if not fitting:
                return None, sent
            if len(fitting) == 1:
                where, rebuilt = yield fitting[0][3], sent, _UNPAIRED, path
                return where, rebuilt
            decoded = msgspec.convert(sent, self.tp, str_keys=True)  # pragma: no cover - a kind msgspec takes twice
        for cls, _, _, walker in self.options:
            if isinstance(decoded, cls):
                where, _ = yield walker, sent, decoded, path
                return where, decoded
        return None, decoded


def _sent_kind(sent: object) -> type | None:
    """``dict`` or ``list`` for a JSON object or array; else ``None``."""
    return dict if isinstance(sent, dict) else list if isinstance(sent, list) else None


def _tag_of(sent: Any, tag_field: str) -> object:
    """The tag a tagged record was sent with: its ``tag_field`` key, or an array-like one's first item."""
    if isinstance(sent, dict):
        return cast("dict[str, object]", sent).get(tag_field)
    return cast("list[object]", sent)[0] if sent else None


class _RepeatedItems:
    def __init__(self) -> None:
        self.made: dict[int, _Walker | None] = {}
        self.held: list[object] = []  # keeps the ids in ``made`` from being reused

    def check(self, root: Any) -> _Check | None:
        walker = self.of(root)
        if walker is None:
            return None
        return lambda sent, decoded, path: _walk(walker, sent, decoded, path)

    def of(self, tp: Any) -> _Walker | None:
        key = id(tp)
        if key in self.made:
            return self.made[key]
        self.held.append(tp)
        if not _any_type([tp], _is_set):
            self.made[key] = None
            return None
        # A recursive type meets its own walker, still being built, as this placeholder.
        later = _Later()
        self.made[key] = later
        made = self.build(tp)
        if made is not None:
            later.walker = made
        self.made[key] = made
        return made

    def build(self, tp: Any) -> _Walker | None:
        inner = _unwrapped(tp)
        if inner is not tp:
            return self.of(inner)
        record = _record(tp)
        if record is not None:
            offset = 1 if record.array_like and record.tag_field is not None else 0
            fields = [(f.name, f.encode_name, i + offset, found) for i, f in enumerate(record.fields) if (found := self.of(f.type)) is not None]
            return _RecordWalk(fields, record.array_like, typing.is_typeddict(tp)) if fields else None
        origin: object = typing.get_origin(tp) or tp
        args = [arg for arg in typing.get_args(tp) if arg is not Ellipsis]
        if origin is Union or origin is types.UnionType:
            options = [(_decoded_class(m), _json_kind(m), _tagged(m), found) for m in args if (found := self.of(m)) is not None]
            return _UnionWalk(tp, options) if options else None
        if not isinstance(origin, type):
            return None
        if issubclass(origin, AbstractSet):
            return _SetWalk(tp, self.of(args[0]) if args else None)
        if issubclass(origin, Mapping):
            found = self.of(args[1]) if len(args) == 2 else None
            return None if found is None else _MappingWalk(found)
        if issubclass(origin, tuple) and args and typing.get_args(tp)[-1] is not Ellipsis:
            positions = [self.of(arg) for arg in args]
            return None if all(p is None for p in positions) else _SequenceWalk(None, positions)
        found = self.of(args[0]) if args else None
        return None if found is None else _SequenceWalk(found, None)


def _json_kind(tp: Any) -> type:
    """``dict`` or ``list``: what JSON sends a value of ``tp``, a type that holds a set, as."""
    inner = _unwrapped(tp)
    record = _record(inner)
    if record is not None:
        return list if record.array_like else dict
    origin: object = typing.get_origin(inner) or inner
    return dict if isinstance(origin, type) and issubclass(origin, Mapping) else list


def _tagged(tp: Any) -> tuple[str, object] | None:
    """The tag field and tag of a tagged Struct, which tell it from the union's other members of its kind."""
    record = _record(_unwrapped(tp))
    if record is None or record.tag_field is None:
        return None
    return record.tag_field, record.tag


def _decoded_class(tp: Any) -> type | tuple[type, ...]:
    """The class of what msgspec decodes ``tp`` to, to tell a union's members apart."""
    inner = _unwrapped(tp)
    if typing.is_typeddict(inner):
        return dict
    origin: object = typing.get_origin(inner) or inner
    if not isinstance(origin, type):
        return ()
    cls = cast("type[object]", origin)
    if issubclass(cls, AbstractSet):
        return (set, frozenset)
    return dict if issubclass(cls, Mapping) else cls


def _check_multiple_of(metadata: list[Any]) -> None:
    """Refuse a ``multiple_of`` that is not the number it is written as, like ``0.1``.

    msgspec checks it on the binary float: ``1.0`` is not an exact multiple of
    the double nearest 0.1, so it refuses most of the values the schema's
    ``"multipleOf": 0.1`` admits (``1``, ``1.5``), saying they are not
    multiples of 0.1, to an agent that cannot correct them. A value whose decimal spelling is exact (``0.5``,
    ``0.25``, ``2``) is checked as JSON Schema means it.

    >>> _check_multiple_of([msgspec.Meta(multiple_of=0.25)])
    >>> _check_multiple_of([msgspec.Meta(multiple_of=0.1)])
    Traceback (most recent call last):
    ...
    TypeError: multiple_of=0.1 has no exact binary value, so msgspec refuses numbers the schema calls its multiples; take an int in units of 0.1, or a multiple_of such as 0.5 or 0.25
    """
    for meta in metadata:
        step = getattr(meta, "multiple_of", None) if isinstance(meta, msgspec.Meta) else None
        if isinstance(step, float) and math.isfinite(step) and decimal.Decimal(repr(step)) != decimal.Decimal(step):
            raise TypeError(
                f"multiple_of={step!r} has no exact binary value, so msgspec refuses numbers the schema calls "
                f"its multiples; take an int in units of {step!r}, or a multiple_of such as 0.5 or 0.25"
            )


INTEGER_KEY = "^-?(0|[1-9][0-9]*)$"
"""The object keys msgspec decodes to an ``int``: decimal digits without a ``+``, spaces or leading zeros."""

NUMBER_KEY = "^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?$"
"""The object keys offered for a ``float``: a JSON number."""


def _property_names(key: Any) -> dict[str, Any] | None:
    """The schema of the object keys msgspec decodes to ``key``, or ``None`` when msgspec says it or it cannot be said.

    JSON spells every key as a string, and with ``str_keys`` msgspec reads an
    integer key from its decimal digits and a UUID key from its text; msgspec's
    own schema of such a mapping is silent about its keys.

    >>> import uuid
    >>> _property_names(int), _property_names(uuid.UUID), _property_names(str)
    ({'type': 'string', 'pattern': '^-?(0|[1-9][0-9]*)$'}, {'type': 'string', 'format': 'uuid'}, None)

    Raises:
        TypeError: for an integer key that must be a multiple of a number,
            and for a bool key, which no JSON object key decodes as.
    """
    if "propertyNames" in msgspec.json.schema(dict[key, int]):
        return None  # string-like keys (a pattern, a Literal, an Enum): msgspec describes them
    inner = _unwrapped(key)
    values: tuple[object, ...] = typing.get_args(inner) if typing.get_origin(inner) is Literal else ()
    if inner is bool or (values and all(type(value) is bool for value in values)):
        # msgspec reads no key string as a bool ("true" included), so such a
        # mapping could only ever be sent empty: surely not what was meant.
        raise TypeError("a mapping keyed by bool cannot be sent as JSON, where no key decodes as a bool; key it by str or int")
    if inner is int:
        return _integer_key_names(key)
    if inner is float and key is float:
        # JSON's number syntax: what msgspec reads as a float key, bar two
        # edges a pattern cannot say well (a key past the largest double is
        # refused; "nan" and "inf" are taken yet not offered). A bounded
        # float key stays undescribed: its bounds have no pattern.
        return {"type": "string", "pattern": NUMBER_KEY}
    if not values and isinstance(inner, type) and issubclass(inner, enum.Enum):
        values = tuple(member.value for member in inner)
    if values and all(type(value) is int for value in values):
        names = [str(value) for value in sorted(cast("tuple[int, ...]", values))]
        if "0" in names:
            # msgspec reads "-0" as 0, so the key 0 has two spellings.
            names.insert(names.index("0"), "-0")
        return {"enum": names}
    if values:
        return None
    # A key read from its own string form (a UUID, a date) is described as a
    # field of that type is; a plain string says nothing an object key is not.
    own = msgspec.json.schema(inner)
    return own if own.get("type") == "string" and len(own) > 1 and "$defs" not in own else None


def _integer_key_names(key: Any) -> dict[str, Any]:
    """The object keys msgspec decodes to the integer type ``key``, within its ``Meta`` bounds.

    A bound is part of the pattern: a pattern saying only "an integer" would
    advertise keys the decoder refuses. Every range of integers is a regular
    language, so any bounds are said exactly.

    >>> from typing import Annotated
    >>> _integer_key_names(Annotated[int, msgspec.Meta(ge=0)])
    {'type': 'string', 'pattern': '^(-?0|[1-9][0-9]*)$'}
    >>> _integer_key_names(Annotated[int, msgspec.Meta(gt=0, le=12)])
    {'type': 'string', 'pattern': '^([1-9]|1[0-2])$'}

    Raises:
        TypeError: for a key that must be a multiple of a number other than 1.
    """
    info = msgspec.inspect.type_info(key)
    assert isinstance(info, msgspec.inspect.IntType)
    if info.multiple_of is not None and info.multiple_of != 1:
        # No short pattern says "a multiple of 7", and neither approximation
        # is honest. A wider pattern advertises keys every call with them is
        # refused for; a narrower one hides keys the decoder takes, and an
        # agent that trusts the schema can never learn they exist, since no
        # refusal ever names them. So the contract is refused where it is
        # written, as an enum.Flag is, and the programmer chooses keys a
        # schema can state.
        raise TypeError(
            f"a mapping key that must be a multiple of {info.multiple_of} cannot be described in an input schema, "
            "where every key is a string; key it by a Literal of the allowed integers instead"
        )
    low = info.ge if info.gt is None else info.gt + 1
    high = info.le if info.lt is None else info.lt - 1
    if low is None and high is None:
        return {"type": "string", "pattern": INTEGER_KEY}
    spellings = _integer_spellings(low, high)
    if not spellings:
        return {"enum": []}  # bounds no integer meets: the decoder takes no key
    body = spellings[0] if len(spellings) == 1 else f"({'|'.join(spellings)})"
    return {"type": "string", "pattern": f"^{body}$"}


def _integer_spellings(low: int | None, high: int | None) -> list[str]:
    """Regex alternatives for the decimals msgspec reads as an integer in ``[low, high]`` (``None``: unbounded).

    >>> _integer_spellings(None, -1), _integer_spellings(-12, 5)
    (['-[1-9][0-9]*'], ['-?0', '[1-5]', '-[1-9]', '-1[0-2]'])
    """
    spellings: list[str] = []
    # msgspec reads "-0" as 0 too, so 0 has two spellings.
    if (low is None or low <= 0) and (high is None or high >= 0):
        spellings.append("-?0")
    if high is None or high >= 1:
        spellings.extend(_magnitudes(1 if low is None else max(low, 1), high))
    if low is None or low <= -1:
        negative = _magnitudes(1 if high is None else max(-high, 1), None if low is None else -low)
        spellings.extend(f"-{spelling}" for spelling in negative)
    return spellings


def _magnitudes(low: int, high: int | None) -> list[str]:
    """Regex alternatives for the decimals of ``low`` to ``high`` (``None``: unbounded), ``1 <= low``.

    >>> _magnitudes(7, None), _magnitudes(1, 100)
    (['[7-9]', '[1-9][0-9]+'], ['[1-9]', '[1-9][0-9]', '100'])
    """
    spellings: list[str] = []
    if high is not None and low > high:
        return spellings
    width = len(str(low))
    while high is None or width <= len(str(high)):
        first = max(low, 10 ** (width - 1))
        if high is None and first == 10 ** (width - 1):
            # Every number of this many digits or more.
            more = {0: "*", 1: "+"}.get(width - 1, f"{{{width - 1},}}")
            spellings.append(f"[1-9][0-9]{more}")
            break
        last = 10**width - 1 if high is None else min(high, 10**width - 1)
        spellings.extend(_same_width(str(first), str(last)))
        width += 1
    return spellings


def _same_width(low: str, high: str) -> list[str]:
    """Regex alternatives for the numbers ``low`` to ``high``, decimals of one width, ``low <= high``.

    >>> _same_width("17", "42")
    ['1[7-9]', '[2-3][0-9]', '4[0-2]']
    """
    if low == high:
        return [low]
    shared = 0
    while low[shared] == high[shared]:
        shared += 1
    prefix, low, high = low[:shared], low[shared:], high[shared:]
    rest = len(low) - 1
    # A low end whose tail is all zeros (a high end's all nines) covers every
    # number under its leading digit, so that digit joins the run between
    # them instead of needing an alternative of its own.
    low_whole, high_whole = low[1:] == "0" * rest, high[1:] == "9" * rest
    first = low[0] if low_whole else str(int(low[0]) + 1)
    last = high[0] if high_whole else str(int(high[0]) - 1)
    spellings: list[str] = []
    if not low_whole:
        spellings.extend(low[0] + tail for tail in _same_width(low[1:], "9" * rest))
    if first <= last:
        digits = first if first == last else f"[{first}-{last}]"
        spellings.append(digits + {0: "", 1: "[0-9]"}.get(rest, f"[0-9]{{{rest}}}"))
    if not high_whole:
        spellings.extend(high[0] + tail for tail in _same_width("0" * rest, high[1:]))
    return [prefix + spelling for spelling in spellings]


def _check_literal_union(union: Any) -> None:
    """Refuse a union of a Literal and another type of its values' JSON kind that msgspec does not decode as advertised.

    msgspec decodes a union by the kind of the value, not by its value:
    ``Literal["s", "m"] | Annotated[str, Meta(min_length=3)]`` advertises
    ``"s"``, yet every string is read by the constrained ``str`` alone and
    ``"s"`` is refused; every integer beside ``Literal[1, 2] | float`` is read
    by the Literal, so ``12`` is advertised and refused. No schema says what
    such a union decodes, so it is refused where it is declared. Beside an
    unconstrained ``str`` or ``int`` the Literal only names likely values, and
    schema and decoder agree: that stays allowed.

    >>> _check_literal_union(Literal["auto"] | str)
    >>> _check_literal_union(Literal[1, 2] | float)
    Traceback (most recent call last):
    ...
    TypeError: a union of Literal[1, 2] and float cannot be described in an input schema: msgspec reads every integer by the Literal alone, so the float's integers are refused; keep one of them
    """
    if typing.get_origin(union) not in (Union, types.UnionType):
        return
    # Each member on its own: msgspec's view of the whole union may merge or reorder them.
    members = [(member, msgspec.inspect.type_info(member)) for member in typing.get_args(union)]
    for literal, literal_info in members:
        if not isinstance(literal_info, msgspec.inspect.LiteralType):
            continue
        kinds = {type(value) for value in literal_info.values}
        for other, other_info in members:
            if str in kinds and isinstance(other_info, msgspec.inspect.StrType) and _constrained(other_info):
                why = f"every string by the {_type_name(other)} alone, so the Literal's values it refuses are refused"
            elif int in kinds and isinstance(other_info, msgspec.inspect.IntType) and _constrained(other_info):
                why = f"every integer by the {_type_name(other)} alone, so the Literal's values it refuses are refused"
            elif int in kinds and isinstance(other_info, msgspec.inspect.FloatType):
                why = f"every integer by the Literal alone, so the {_type_name(other)}'s integers are refused"
            else:
                continue
            raise TypeError(
                f"a union of {_type_name(literal)} and {_type_name(other)} cannot be described in an input schema: "
                f"msgspec reads {why}; keep one of them"
            )


def _constrained(info: msgspec.inspect.StrType | msgspec.inspect.IntType) -> bool:
    if isinstance(info, msgspec.inspect.StrType):
        return info.min_length is not None or info.max_length is not None or info.pattern is not None
    return any(bound is not None for bound in (info.ge, info.gt, info.le, info.lt, info.multiple_of))


def _type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else repr(tp).replace("typing.", "")


def _unwrapped(tp: Any) -> Any:
    """``tp`` without the NewTypes, type aliases and ``Annotated`` around it."""
    for _ in range(32):
        if typing.get_origin(tp) is Annotated:
            tp = typing.get_args(tp)[0]
            continue
        inner = getattr(tp, "__supertype__", None) or getattr(tp, "__value__", None)
        if inner is None:
            return tp
        tp = inner
    return tp


def _is_flag(tp: object) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Flag)


def _field_spec(field: _Field) -> Any:
    if field.default is not msgspec.NODEFAULT:
        return msgspec.field(default=field.default, name=field.encode_name)
    if field.default_factory is not msgspec.NODEFAULT:
        return msgspec.field(default_factory=field.default_factory, name=field.encode_name)
    return msgspec.field(name=field.encode_name)
