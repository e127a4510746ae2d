"""Introspection and documentation: a contract described as data, JSON and Markdown.

This layer owns the descriptors adapters list (:class:`MessageDescriptor`,
:class:`ResourceDescriptor`, :class:`AgentSchema`), the committed forms of a
contract (:func:`to_manifest`, :func:`to_markdown`) and the one-line
:func:`summarize` of a finished dispatch. Everything here is a pure function of
a :class:`~agentfx.contract.Definition`: it never calls ``available``,
``authorize``, ``to_message`` or a projection, and never sees a Model, so a
manifest generated today is byte-identical to one generated tomorrow from the
same contract. It deliberately knows nothing of hosts, transports or how a
dispatch ran; :func:`summarize` reads only the result it is handed.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, cast

import msgspec

from .completion import Completion, StateCompletion
from .contract import check_definition
from .hints import Hints
from .naming import message_tag
from .schema import json_schema_components

if TYPE_CHECKING:
    from .contract import Capability, Definition
    from .pipeline import DispatchResult

__all__ = [
    "AgentSchema",
    "MessageDescriptor",
    "ResourceDescriptor",
    "Summary",
    "context_schema",
    "describe",
    "messages",
    "output_schema",
    "resources",
    "schema",
    "summarize",
    "to_manifest",
    "to_markdown",
]


class MessageDescriptor(msgspec.Struct, frozen=True):
    """One exposed capability as an agent sees it, with nothing derived from a Model.

    ``model_dependent`` says ``available`` was declared; ``requires_authorization``
    that ``authorize`` was; ``completion`` is the manifest's completion dict, or
    ``None`` without a completion contract. ``title`` and ``hints`` are as
    declared (``None`` when not). ``output_schema`` is the JSON Schema of the
    ``data`` of a successful call's reply (see :mod:`agentfx.tools`): the
    capability, its tag and, with a completion contract, how it settled and
    with which Message. ``may_confirm`` says that ``authorize``
    was declared to possibly ask a person (``may_confirm=True``). An adapter
    that must decide before the call treats every capability with
    ``authorize`` as possibly confirming: an undeclared ``Confirm`` still works.
    """

    name: str
    tag: str
    description: str
    input_schema: dict[str, Any]
    model_dependent: bool
    requires_authorization: bool
    completion: dict[str, Any] | None = None
    title: str | None = None
    hints: Hints | None = None
    output_schema: dict[str, Any] = msgspec.field(default_factory=lambda: {"type": "object"})
    may_confirm: bool = False


class ResourceDescriptor(msgspec.Struct, frozen=True):
    """One resource: its name, description and the JSON Schema of what reading it returns.

    The schema describes the value as JSON carries it: its numbers also admit
    ``null``, which is what a float that is not finite is served as.
    """

    name: str
    description: str
    schema: dict[str, Any]


class AgentSchema(msgspec.Struct, frozen=True):
    """The whole contract as descriptors: capabilities, resources and the context schema."""

    messages: list[MessageDescriptor]
    resources: list[ResourceDescriptor]
    context: dict[str, Any] | None = None


class Summary(msgspec.Struct, frozen=True):
    """A one-line account of a dispatch; ``ok`` is ``False`` only for a declared failure."""

    ok: bool
    text: str


def _copy(value: dict[str, Any]) -> dict[str, Any]:
    # Schemas may be cached on codecs; a caller editing a manifest it was
    # handed must not edit the contract. A JSON round trip keeps key order.
    copied: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(value))
    return copied


def _completion(completion: Completion[Any, Any] | StateCompletion[Any, Any, Any] | None) -> dict[str, Any] | None:
    if isinstance(completion, Completion):
        out: dict[str, Any] = {"success": [message_tag(cls) for cls in completion.success]}
        if completion.failure:
            out["failure"] = [message_tag(cls) for cls in completion.failure]
        return out
    if isinstance(completion, StateCompletion):
        return {"state": {"source": "model" if completion.source is None else "external"}}
    return None


_HINT_KEYS = {"read_only": "readOnly", "destructive": "destructive", "idempotent": "idempotent", "open_world": "openWorld"}
_HINT_WORDS = {"read_only": "read-only", "destructive": "destructive", "idempotent": "idempotent", "open_world": "open world"}


def _const(value: str) -> dict[str, Any]:
    return {"type": "string", "const": value}


# Where JSON Schema holds subschemas (2020-12, with the draft-07 forms): one,
# an array of them, or a map to them. Every other keyword holds a value or an
# annotation (``default``, ``examples``, ``const``, ``enum``, ``required``,
# ``dependentRequired``, msgspec's ``discriminator``, an application's own
# keys), which describes nothing and is never rewritten.
_SUBSCHEMA = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SUBSCHEMAS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUBSCHEMA_MAP = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})


def _null_for_numbers(schema: Any) -> Any:
    """``schema`` with every ``"type": "number"`` also admitting ``null``.

    A float that is not finite encodes as ``null`` (JSON has no NaN), so a
    schema that describes what is served admits it. Only schemas are widened:
    a ``default`` or an example that happens to read ``{"type": "number"}``
    is a value, and stays as it is.

    >>> _null_for_numbers({"properties": {"x": {"type": "number", "minimum": 0}, "n": {"type": "integer"}}})
    {'properties': {'x': {'type': ['number', 'null'], 'minimum': 0}, 'n': {'type': 'integer'}}}
    >>> _null_for_numbers({"type": "object", "default": {"type": "number"}})
    {'type': 'object', 'default': {'type': 'number'}}
    """
    if not isinstance(schema, dict):
        # true and false are schemas too, and ``dependencies`` may hold a list of names.
        return schema
    widened: dict[str, Any] = {}
    for key, value in cast("dict[str, Any]", schema).items():
        if key in _SUBSCHEMAS or (key in _SUBSCHEMA and isinstance(value, list)):
            value = [_null_for_numbers(item) for item in cast("list[Any]", value)]
        elif key in _SUBSCHEMA:
            value = _null_for_numbers(value)
        elif key in _SUBSCHEMA_MAP and isinstance(value, dict):
            value = {name: _null_for_numbers(item) for name, item in cast("dict[str, Any]", value).items()}
        widened[key] = value
    kind = widened.get("type")
    if kind == "number":
        widened["type"] = ["number", "null"]
    elif isinstance(kind, list) and "number" in kind and "null" not in kind:
        widened["type"] = [*cast("list[Any]", kind), "null"]
    return widened


def _served(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of a resource's or the context's declared schema, saying what reading it serves."""
    # A reply's completion Message gets the same widening (output_schema):
    # msgspec encodes NaN and the infinities as null wherever a float is.
    served: dict[str, Any] = _null_for_numbers(_copy(schema))
    return served


def output_schema(capability: Capability[Any, Any]) -> dict[str, Any]:
    """The JSON Schema of a successful call's reply ``data``, for one capability.

    An object naming the capability and its tag (as constants) and, when the
    capability declares a completion contract, ``completion``: its ``status``
    (``"completed"``, or ``"failed"`` when failure Messages are declared) and,
    for a Message contract, the settling ``message``, one of the declared
    success and failure Messages as ``msgspec`` encodes them. Shared
    definitions sit under ``$defs`` of the root.

    >>> import msgspec
    >>> from agentfx.contract import expose, variant
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> [capability] = expose(Ping, variant(Ping, "Ping the app")).capabilities
    >>> output_schema(capability)["properties"]
    {'capability': {'type': 'string', 'const': 'ping'}, 'tag': {'type': 'string', 'const': 'Ping'}}
    """
    properties: dict[str, Any] = {"capability": _const(capability.name), "tag": _const(capability.tag)}
    required = ["capability", "tag"]
    root: dict[str, Any] = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    completion = capability.completion
    if completion is None:
        return root
    status: dict[str, Any]
    settled: dict[str, Any] = {"type": "object"}
    if isinstance(completion, Completion):
        classes = (*completion.success, *completion.failure)
        try:
            refs, defs = json_schema_components(classes)
        except (TypeError, ValueError, NameError):
            # A Message msgspec cannot describe still encodes (through the
            # application's own hooks); promising only an object keeps every
            # reply valid against the schema.
            refs, defs = [{"type": "object"} for _ in classes], {}
        # A float that is not finite encodes as null (JSON has no NaN): the
        # settling Message's numbers admit it, or a client that validates the
        # reply would refuse a call that completed.
        refs = [_null_for_numbers(ref) for ref in refs]
        defs = {name: _null_for_numbers(definition) for name, definition in defs.items()}
        status = {"type": "string", "enum": ["completed", "failed"]} if completion.failure else _const("completed")
        settled["properties"] = {"status": status, "message": {"anyOf": refs}}
        settled["required"] = ["status", "message"]
        if defs:
            root["$defs"] = defs
    else:
        settled["properties"] = {"status": _const("completed")}
        settled["required"] = ["status"]
    settled["additionalProperties"] = False
    properties["completion"] = settled
    required.append("completion")
    return root


def describe(capability: Capability[Any, Any]) -> MessageDescriptor:
    """The descriptor of one capability; the runtime computes these once, at bind.

    >>> import msgspec
    >>> from agentfx.contract import expose, variant
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> [capability] = expose(Ping, variant(Ping, "Ping the app")).capabilities
    >>> d = describe(capability)
    >>> d.name, d.tag, d.model_dependent, d.completion
    ('ping', 'Ping', False, None)
    """
    return MessageDescriptor(
        name=capability.name,
        tag=capability.tag,
        description=capability.description,
        input_schema=_copy(capability.codec.schema),
        model_dependent=capability.available is not None,
        requires_authorization=capability.authorize is not None,
        completion=_completion(capability.completion),
        title=capability.title,
        hints=capability.hints,
        output_schema=output_schema(capability),
        may_confirm=capability.may_confirm,
    )


def messages(defn: Definition[Any, Any]) -> list[MessageDescriptor]:
    """Every exposed capability's descriptor, in declaration order.

    >>> import msgspec
    >>> from agentfx.contract import define, expose, variant
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> class Pong(msgspec.Struct, tag=True):
    ...     pass
    >>> defn = define(expose(Ping | Pong, variant(Pong, "Pong"), variant(Ping, "Ping")))
    >>> [d.name for d in messages(defn)]
    ['pong', 'ping']
    """
    # What expose(...) made also lists capabilities, so without this check a
    # forgotten define(...) would be described here and refused everywhere else.
    check_definition("messages()", defn)
    return [describe(c) for c in defn.capabilities]


def resources(defn: Definition[Any, Any]) -> list[ResourceDescriptor]:
    """Every resource's descriptor, in declaration order.

    >>> import msgspec
    >>> from agentfx.contract import define, expose, resource
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> defn = define(expose(Ping), [resource("count", "A number", schema=int, read=lambda m: 1)])
    >>> resources(defn)
    [ResourceDescriptor(name='count', description='A number', schema={'type': 'integer'})]
    """
    check_definition("resources()", defn)
    return [ResourceDescriptor(name=r.name, description=r.description, schema=_served(r.json_schema())) for r in defn.resources]


def context_schema(defn: Definition[Any, Any]) -> dict[str, Any] | None:
    """The JSON Schema of the context projection, or ``None`` when the contract projects none.

    As for a resource, its numbers also admit ``null`` (a float that is not finite).

    >>> import msgspec
    >>> from agentfx.contract import define, expose
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> context_schema(define(expose(Ping))) is None
    True
    """
    check_definition("context_schema()", defn)
    return None if defn.context is None else _served(defn.context.json_schema())


def schema(defn: Definition[Any, Any]) -> AgentSchema:
    """The whole contract as descriptors.

    >>> import msgspec
    >>> from agentfx.contract import define, expose
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> schema(define(expose(Ping)))
    AgentSchema(messages=[], resources=[], context=None)
    """
    check_definition("schema()", defn)
    return AgentSchema(messages=messages(defn), resources=resources(defn), context=context_schema(defn))


def to_manifest(defn: Definition[Any, Any]) -> dict[str, Any]:
    """The contract as a JSON-ready dict with camelCase wire keys.

    Keys come in a fixed order and nothing is read from a Model, so
    ``json.dumps(to_manifest(defn), indent=2)`` is byte-identical across runs
    and can be committed, making a change to what an application exposes
    visible in review.

    >>> import msgspec
    >>> from agentfx.contract import define, expose
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> to_manifest(define(expose(Ping)))
    {'capabilities': [], 'resources': []}
    """
    check_definition("to_manifest()", defn)
    capabilities: list[dict[str, Any]] = []
    for d in messages(defn):
        entry: dict[str, Any] = {"name": d.name}
        if d.title is not None:
            entry["title"] = d.title
        entry["tag"] = d.tag
        entry["description"] = d.description
        entry["inputSchema"] = d.input_schema
        entry["modelDependent"] = d.model_dependent
        entry["requiresAuthorization"] = d.requires_authorization
        if d.may_confirm:
            entry["mayConfirm"] = True
        if d.hints is not None:
            entry["hints"] = {_HINT_KEYS[key]: value for key, value in d.hints.said().items()}
        if d.completion is not None:
            entry["completion"] = d.completion
        capabilities.append(entry)
    manifest: dict[str, Any] = {
        "capabilities": capabilities,
        "resources": [{"name": r.name, "description": r.description, "schema": r.schema} for r in resources(defn)],
    }
    context = context_schema(defn)
    if context is not None:
        manifest["context"] = context
    return manifest


def _json_block(value: object) -> list[str]:
    return ["```json", json.dumps(value, indent=2, ensure_ascii=False), "```"]


def _cell(text: str) -> str:
    # A newline would end the table row and a bare pipe would split the cell.
    return " ".join(text.replace("|", "\\|").splitlines())


# A blockquote marker, or a list marker (group 1) with the space that ends it.
_CONTAINER = re.compile(r">[ \t]?|([-+*]|[0-9]{1,9}[.)])(?:[ \t]|$)")
# CommonMark's block starts that reach past a description: an ATX heading, a
# code fence (closed only by another, so it swallows the document), an HTML
# block (types 1-5 end only at their own end marker; 6 and 7 pass raw HTML
# through), and a line of only ``=`` or ``-`` (a setext underline turning the
# paragraph above into a heading) or a thematic break. A URI autolink cannot
# start an HTML block (a tag name is never followed by ``:``), so it stays a link.
_BLOCK_START = re.compile(
    r"#|`{3}|~{3}"
    r"|<(?![A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*>)[A-Za-z/!?]"
    r"|([*_-])(?:[ \t]*\1){2,}[ \t]*$|=+[ \t]*$|-+[ \t]*$"
)
# A fence opened in the first column is in no container (a fence line is never
# a lazy continuation), so it runs exactly to its closing line, if it has one.
# An opening backtick fence's info string holds no backtick; one holding a pipe
# is not kept, since GFM renderers that try a table first (markdown-it) read it,
# above a delimiter row, as a table's header, and its closing line as an opening.
_FENCE = re.compile(r"`{3,}(?!.*[`|])|~{3,}(?!.*\|)")


def _column(line: str, index: int) -> int:
    """The column ``line[index]`` stands in, with CommonMark's tab stops."""
    return len(line[:index].expandtabs(4))


def _indented(line: str, index: int) -> int:
    """The index of the first character past the spaces and tabs at ``line[index]``."""
    return len(line) - len(line[index:].lstrip(" \t"))


def _prose(text: str) -> str:
    r"""``text`` as Markdown that cannot open a block reaching past its own section.

    A description is rendered as Markdown, so its lists, emphasis, paragraphs and
    closed code fences keep their meaning; but a line that starts a heading, an
    unclosed fence or an HTML block would forge the document's own headings or
    swallow the rest of it (an unclosed fence or ``<!--`` runs to the end of the
    document). Such a start gets a backslash, which CommonMark renders as the
    character itself. A block starts up to three columns past its container's
    content: after blockquote and list markers, and on the lines that continue a
    list item, indented to its content. Where the text does not say which item
    a line continues, the deepest one it could is assumed, so an unclear line is
    escaped rather than let through. Four columns past the container it is code
    and is left as written, as is a fence opened in the first column and closed
    within the description. Line endings become ``\n``, the document's own.

    Args:
        text: A capability's or resource's description.

    Returns:
        The description with every block start that could reach past it escaped.

    >>> print(_prose("Ping.\n## Context\n- item\n  - nested\n    <!-- note\n---\n```\n# kept\n```\n~~~"))
    Ping.
    \## Context
    - item
      - nested
        \<!-- note
    \---
    ```
    # kept
    ```
    \~~~
    """
    lines = re.split(r"\r\n?|\n", text)
    items: set[int] = set()  # the content columns of list items that may still be open
    unclosed: dict[str, int] = {}  # per fence character, the shortest fence no line closes
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence is not None and len(fence[0]) < unclosed.get(fence[0][0], len(fence[0]) + 1):
            closing = re.compile(rf" {{0,3}}{re.escape(fence[0][0])}{{{len(fence[0])},}}[ \t]*")
            closed = next((j for j in range(i + 1, len(lines)) if closing.fullmatch(lines[j])), None)
            if closed is not None:
                items.clear()  # the fence closed every list item
                i = closed + 1
                continue
            unclosed[fence[0][0]] = len(fence[0])
        if i and line.strip(" \t") and not lines[i - 1].strip(" \t"):
            # After a blank line, a line indented less than an item's content ends the item.
            items = {c for c in items if c <= _column(line, _indented(line, 0))}
        start = base = 0
        while True:
            end = _indented(line, start)
            at = _column(line, end)
            code = at - max([base, *(c for c in items if c <= at)]) > 3
            if not code and _BLOCK_START.match(line, end):
                lines[i] = f"{line[:end]}\\{line[end:]}"
                break
            container = _CONTAINER.match(line, end)
            # Some renderers (markdown-it) continue an open blockquote at a ``>``
            # indented past code, so such a ``>`` is read on as a marker.
            if container is None or (code and container[1] is not None):
                break
            start = container.end()
            base = _column(line, start)
            if container[1] is not None:
                # An item's content starts one to four columns past its marker, else one.
                marker, content = _column(line, container.end(1)), _column(line, _indented(line, start))
                items.add(content if content - marker <= 4 and line[_indented(line, start) :] else marker + 1)
        i += 1
    return "\n".join(lines)


def _yes_no(value: bool) -> str:
    return "yes" if value else "no"


def _code(text: str) -> str:
    """``text`` as a Markdown code span, whatever backticks it holds (CommonMark's rule).

    The fence is one backtick longer than the longest run inside, so no run
    closes it; a space pads text that starts or ends with a backtick (which
    would lengthen the fence) or with a space at both ends (one of each is
    stripped from such a span). Lines are joined: a span cannot end a block.

    >>> _code("po`ked"), _code("`x"), _code(" a "), _code("ok")
    ('``po`ked``', '`` `x ``', '`  a  `', '`ok`')
    """
    text = " ".join(text.splitlines())
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    if text[:1] == "`" or text[-1:] == "`" or (text[:1] == text[-1:] == " " and text.strip(" ")):
        text = f" {text} "
    return fence + text + fence


def _tags(tags: list[str]) -> str:
    return ", ".join(_code(tag) for tag in tags)


def _completion_sentence(completion: dict[str, Any]) -> str:
    if "state" in completion:
        where = "" if completion["state"]["source"] == "model" else "external "
        return f"Completes when its declared {where}state is reached."
    sentence = f"Completes on {_tags(completion['success'])}"
    if "failure" in completion:
        sentence += f", fails on {_tags(completion['failure'])}"
    return sentence + "."


def _hints_line(hints: dict[str, bool]) -> str:
    """``Hints: destructive, not idempotent`` from the manifest's ``hints``, in field order."""
    words = {_HINT_KEYS[key]: word for key, word in _HINT_WORDS.items()}
    return "Hints: " + ", ".join(words[key] if said else f"not {words[key]}" for key, said in hints.items())


def to_markdown(defn: Definition[Any, Any]) -> str:
    """The contract as a Markdown document, rendered from :func:`to_manifest`.

    Blocks are separated by one blank line and the document ends with a single
    newline. Only exposed Messages are named. A description stays Markdown, but
    a line of it that would open a heading, a code fence or an HTML block is
    escaped, so it cannot forge the document's headings or swallow what follows.

    >>> import msgspec
    >>> from agentfx.contract import define, expose
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> print(to_markdown(define(expose(Ping))), end="")
    # Agent contract
    <BLANKLINE>
    This contract exposes no capabilities.
    <BLANKLINE>
    ## Context
    <BLANKLINE>
    This contract projects no Model context.
    """
    check_definition("to_markdown()", defn)
    manifest = to_manifest(defn)
    blocks: list[list[str]] = [["# Agent contract"]]
    capabilities: list[dict[str, Any]] = manifest["capabilities"]
    if not capabilities:
        blocks.append(["This contract exposes no capabilities."])
    else:
        blocks.append(["## Capabilities"])
        table = [
            "| Name | Message | Description | Model-dependent | Authorized |",
            "| --- | --- | --- | --- | --- |",
        ]
        for c in capabilities:
            table.append(
                f"| {_cell(_code(c['name']))} | {_cell(_code(c['tag']))} | {_cell(c['description'])} "
                f"| {_yes_no(c['modelDependent'])} | {_yes_no(c['requiresAuthorization'])} |"
            )
        blocks.append(table)
        for c in capabilities:
            blocks.append([f"### {_code(c['name'])}"])
            if "title" in c:
                blocks.append([f"Title: {_cell(c['title'])}"])
            blocks.append([_prose(c["description"])])
            if c["modelDependent"]:
                blocks.append(["Available only in some Model states."])
            if c["requiresAuthorization"]:
                blocks.append(["Runs an authorization check before dispatching."])
            if c.get("mayConfirm"):
                blocks.append(["May ask a person to confirm before dispatching."])
            if "hints" in c:
                blocks.append([_hints_line(c["hints"])])
            blocks.append(["Input:"])
            blocks.append(_json_block(c["inputSchema"]))
            if "completion" in c:
                blocks.append([_completion_sentence(c["completion"])])
    resource_entries: list[dict[str, Any]] = manifest["resources"]
    if resource_entries:
        blocks.append(["## Resources"])
        for r in resource_entries:
            blocks.append([f"### {_code(r['name'])}"])
            blocks.append([_prose(r["description"])])
            blocks.append(_json_block(r["schema"]))
    blocks.append(["## Context"])
    if "context" in manifest:
        blocks.append(_json_block(manifest["context"]))
    else:
        blocks.append(["This contract projects no Model context."])
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"


def summarize(result: DispatchResult) -> Summary:
    """A one-line account of a successful dispatch.

    ``Dispatched <Tag>`` without a completion contract; ``Completed: <Tag>`` or
    ``Failed: <Tag>`` naming the Message that settled it; ``Completed: <Tag>
    reached its declared state`` for a state completion, naming the dispatched
    Message. Only a declared failure is not ``ok``.

    >>> import msgspec
    >>> from agentfx.completion import CompletionOutcome
    >>> from agentfx.invocation import Invocation
    >>> from agentfx.pipeline import DispatchResult
    >>> class Deleted(msgspec.Struct, tag=True):
    ...     id: str
    >>> result = DispatchResult("delete", "Delete", None, Invocation(id="1"), CompletionOutcome("completed", Deleted("a")))
    >>> summarize(result)
    Summary(ok=True, text='Completed: Deleted')
    """
    outcome = result.completion
    if outcome is None:
        return Summary(ok=True, text=f"Dispatched {result.tag}")
    message: object = outcome.message
    if outcome.status == "failed":
        tag = result.tag if message is None else message_tag(type(message))
        return Summary(ok=False, text=f"Failed: {tag}")
    if message is None:
        return Summary(ok=True, text=f"Completed: {result.tag} reached its declared state")
    return Summary(ok=True, text=f"Completed: {message_tag(type(message))}")
