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

import bisect
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


_LINE_END = re.compile(r"\r\n?|\n")
"""CommonMark's line endings, and only those: ``str.splitlines`` also breaks at U+2028, a form feed and others."""


def _cell(text: str) -> str:
    # A newline would end the table row and a bare pipe would split the cell.
    return " ".join(_LINE_END.split(text.replace("|", "\\|")))


def _trimmed(text: str) -> str:
    r"""``text`` without the blank lines it starts or ends with: they would widen the gap between blocks.

    >>> _trimmed("\n  \nPing the app.\n\n"), _trimmed("    code\n")
    ('Ping the app.', '    code')
    """
    lines = _LINE_END.split(text)
    while lines and not lines[0].strip(" \t"):
        lines.pop(0)
    while lines and not lines[-1].strip(" \t"):
        lines.pop()
    return "\n".join(lines)


# A blockquote marker (group 1), or a list item's bullet (group 2) or number
# (group 3) with its delimiter, which a space, a tab or the line's end follows.
_CONTAINER = re.compile(r"(>)|([-+*])(?=[ \t]|$)|([0-9]{1,9})[.)](?=[ \t]|$)")
# CommonMark's block starts, HTML's aside, that reach past a description: an
# ATX heading, a code fence (closed only by another, so it swallows the
# document) and a thematic break, spaced or not.
_BLOCK_START = re.compile(r"#|`{3}|~{3}|([*_-])(?:[ \t]*\1){2,}[ \t]*$")
# What may start a link reference definition (``[label]: url``): more than
# CommonMark reads as one, as reading one where there is none only escapes more.
_LINK_DEFINITION = re.compile(r"\[(?:\\.|[^\]\\])*\]:")
# What a line's containers' markers and the space between them are made of (more
# than they are: a line that reads as one where there is none only escapes more).
_MARKERS = re.compile(r"[ \t>0-9.)+*-]*")
# A line of only ``=`` or ``-``: below a paragraph, a setext underline turning
# it into a heading.
_SETEXT = re.compile(r"=+[ \t]*$|-+[ \t]*$")
# HTML block starts of CommonMark's types 1 to 6: types 1 to 5 end only at their
# own end marker (``<!--`` runs to ``-->``), 6 passes raw HTML through to a blank
# line. ``\s`` is as broad as markdown-it reads it, wider than the spec's space
# and tab, so a line that either reads as a start is escaped.
_HTML_BLOCK = re.compile(
    r"<(?ai:pre|script|style|textarea)(?=\s|>|$)|<!--|<\?|<![A-Za-z]|<!\[CDATA\["
    r"|</?(?ai:address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details"
    r"|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head|header|hr"
    r"|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p|param|search"
    r"|section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul)(?=\s|/?>|$)"
)
# Type 7: a whole open or closing tag alone on its line (of any name: the spec
# leaves type 1's out, markdown-it does not). It cannot interrupt a paragraph,
# and an email autolink (``<a@b.co>``) or a tag followed by text is none.
_ATTRIBUTE = r"""\s+[A-Za-z_:][A-Za-z0-9_.:-]*(?:\s*=\s*(?:[^\s"'=<>`]+|'[^']*'|"[^"]*"))?"""
_HTML_TAG_LINE = re.compile(rf"(?:<[A-Za-z][A-Za-z0-9-]*(?:{_ATTRIBUTE})*\s*/?>|</[A-Za-z][A-Za-z0-9-]*\s*>)\s*$")
# A code fence's opening line. A backtick fence's info string holds no backtick;
# one holding a pipe is not kept, since GFM renderers that try a table first
# (markdown-it) read it, above a delimiter row, as a table's header, and its
# closing line as an opening.
_FENCE = re.compile(r"`{3,}(?!.*[`|])|~{3,}(?!.*\|)")


class _Open:
    """A container a line may continue: a blockquote, or a list item ``width`` columns wide.

    A list item's width runs from its container's content to its own; ``empty``
    says the item has held nothing yet, so a blank line ends it.
    """

    __slots__ = ("empty", "width")

    def __init__(self, width: int | None, *, empty: bool = False) -> None:
        self.width = width
        self.empty = empty


def _columns(line: str) -> list[int]:
    """The column each character of ``line`` starts in, then its end's, with CommonMark's tab stops."""
    if "\t" not in line:
        # Most lines: one column a character, counted in C (a fence search reads each line again).
        return list(range(len(line) + 1))
    columns = [0]
    for char in line:
        column = columns[-1]
        columns.append(column + 4 - column % 4 if char == "\t" else column + 1)
    return columns


def _indented(line: str, columns: list[int], column: int) -> int:
    """The index of the first character at or past ``column`` that is no space or tab.

    ``column`` may fall inside a tab, part of which a container's marker took.
    """
    # The last character starting at or before ``column``, found by halving:
    # walking from the line's start would make a line of many markers quadratic.
    index = min(bisect.bisect_right(columns, column) - 1, len(line))
    while index < len(line) and line[index] in " \t":
        index += 1
    return index


def _quote_end(line: str, index: int) -> int:
    """The index past the ``>`` at ``line[index]`` and the one space or tab it may take."""
    return index + 1 + (line[index + 1 : index + 2] in {" ", "\t"})


def _past_quote(line: str, columns: list[int], index: int) -> int:
    """The column past the ``>`` at ``line[index]`` and the one column of space it may take."""
    return columns[index] + _quote_end(line, index) - index


def _continued(line: str, columns: list[int], stack: list[_Open]) -> tuple[int, int]:
    """How far ``line`` continues the containers in ``stack``: the column past their markers, and how many."""
    column = 0
    for depth, container in enumerate(stack):
        index = _indented(line, columns, column)
        indent = columns[index] - column
        if container.width is None:
            if line[index : index + 1] != ">" or indent > 3:
                return column, depth
            column = _past_quote(line, columns, index)
        elif index == len(line):
            if container.empty:
                return column, depth
        elif indent >= container.width:
            column += container.width
        else:
            return column, depth
    return column, len(stack)


def _nested_quote_tab(line: str) -> int | None:
    r"""The index of ``line``'s first ``>`` marker if a tab follows a second one among its markers.

    markdown-it measures that tab otherwise than CommonMark (see :func:`_prose`).

    >>> _nested_quote_tab(">>* \t# Context"), _nested_quote_tab("- > > x\t"), _nested_quote_tab(">\t- # x")
    (0, None, None)
    """
    markers = _MARKERS.match(line)
    prefix = "" if markers is None else markers[0]
    first = prefix.find(">")
    second = prefix.find(">", first + 1) if first >= 0 else -1
    return first if second >= 0 and "\t" in prefix[second + 1 :] else None


def _widths(stack: list[_Open]) -> int:
    """The columns the list items in ``stack`` take together."""
    return sum(container.width for container in stack if container.width is not None)


def _lenient(line: str, columns: list[int], index: int, *, narrow: bool = False, slack: int = 0) -> int | None:
    """The index of the block start markdown-it reads in ``line`` from ``index`` on, if it reads one.

    ``line[index]`` is a ``>``, or the first character past the line's
    indentation.

    markdown-it continues an open blockquote at a ``>`` however far it is
    indented, where CommonMark reads code or a paragraph's continuation. Past
    it, every ``>`` is read as a marker too, and a list marker as an item's.
    ``narrow``: a tab may be as narrow as one column, and the space a marker
    may take may be a whole tab, so a block start any tab stops put three
    columns or fewer past a marker is read. ``slack``: the columns of list
    items markdown-it may continue past a marker, whose content a block start
    may be up to three columns past instead.
    """
    if line[index] == ">":
        column = _past_quote(line, columns, index)
        after = _quote_end(line, index)
    else:
        column, after = columns[index], index
    while True:
        if narrow:
            index = after
            while index < len(line) and line[index] in " \t":
                index += 1
            indent = index - after
        else:
            index = _indented(line, columns, column)
            indent = columns[index] - column
        rest = line[index:]
        if rest[:1] == ">":
            column = _past_quote(line, columns, index)
            after = _quote_end(line, index)
            continue
        if indent > 3 + slack:
            return None
        if _BLOCK_START.match(rest) or _HTML_BLOCK.match(rest) or _SETEXT.match(rest) or _HTML_TAG_LINE.match(rest):
            return index
        container = _CONTAINER.match(rest)
        if container is None:
            return None
        column = columns[index + container.end()] + 1
        after = index + container.end() + 1


def _closing(
    lines: list[str], start: int, stack: list[_Open], fence: str, known: dict[int, list[int]]
) -> tuple[bool, int]:
    """Whether a line closes ``fence``, opened on ``lines[start]`` in ``stack``'s innermost container.

    ``known`` holds the columns of lines already searched, by index: a line
    past the one being read is still as written, so its columns stay true
    for every later search, and a text of fences each shorter than the last
    does not measure each line once per fence.

    Returns:
        Whether one does, and the index of that line, or else of the first
        line past the container (past the text if it ends first). The
        container's end closes the fence in CommonMark, but leaves what follows
        in it to other renderers, so only a line in the container counts.
    """
    closing = re.compile(rf"{re.escape(fence[0])}{{{len(fence)},}}[ \t]*")
    for j in range(start + 1, len(lines)):
        line = lines[j]
        columns = known.get(j)
        if columns is None:
            columns = known[j] = _columns(line)
        column, depth = _continued(line, columns, stack)
        if depth < len(stack):
            return False, j
        index = _indented(line, columns, column)
        if columns[index] - column <= 3 and closing.fullmatch(line, index):
            return True, j
    return False, len(lines)


def _prose(text: str) -> str:
    r"""``text`` as Markdown that cannot open a block reaching past its own section.

    A description is rendered as Markdown, so its lists, emphasis, paragraphs,
    links, inline HTML and closed code fences keep their meaning; but a line
    that starts a heading, a thematic break, a setext underline, an unclosed
    fence or an HTML block would forge the document's own headings or swallow
    the rest of it (an unclosed fence or ``<!--`` runs to the end of the
    document). Such a start gets a backslash, which CommonMark renders as the
    character itself.

    Lines are read as CommonMark reads them. A block starts up to three columns
    past the content of the blockquotes and list items a line continues or
    opens; four columns past it is code, or a paragraph's continuation, and is
    left as written. A code fence at any depth stays a code block when a line in
    its own container closes it (the container's end closes it too, but leaves
    what follows in it to be read as Markdown). An HTML start is escaped only
    where it opens one of CommonMark's seven kinds of HTML block: ``<a@b.co>``
    is an autolink, ``<em>x</em> text`` inline HTML, and a lone tag does not
    interrupt a paragraph. A line of only ``=`` or ``-`` is escaped right below
    a paragraph, where it underlines it. Where markdown-it reads a line's
    containers otherwise (a blockquote continued at a ``>`` indented as code, a
    paragraph ended by a block start a lazy line holds, a tab past a nested
    blockquote's marker, which it measures from the inner blockquote's place in
    the outer one), a block start it reads is escaped too, and until a blank
    line closes every container, so is every fence, underline and lone tag, and
    every block start indented as code. Line endings become ``\n``, the document's own.

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
    >>> print(_prose("- item\n\n  ```\n  # kept\n  ```\n> ```\n> # kept\n> ```\n<a@b.co> wrote\n\n<div>"))
    - item
    <BLANKLINE>
      ```
      # kept
      ```
    > ```
    > # kept
    > ```
    <a@b.co> wrote
    <BLANKLINE>
    \<div>
    """
    lines = re.split(r"\r\n?|\n", text)
    stack: list[_Open] = []  # the open containers, outermost first
    paragraph = False  # whether the innermost open container ends in a paragraph a line may continue
    unsure = False  # whether markdown-it may read the open containers otherwise
    # Per container (None for the text itself) and fence character, the line
    # that container ends before and the shortest fence no line up to it
    # closes: a later, longer fence in it is unclosed too, so no line is
    # searched twice for the same closing.
    unclosed: dict[tuple[_Open | None, str], tuple[int, int]] = {}
    measured: dict[int, list[int]] = {}  # the columns of lines past the one read, as _closing measured them
    i = 0
    while i < len(lines):
        line = lines[i]
        columns = _columns(line)
        column, matched = _continued(line, columns, stack)
        index = _indented(line, columns, column)
        if line[index : index + 1] == ">" and (unsure or (matched < len(stack) and stack[matched].width is None)):
            # A ``>`` indented as code past an open blockquote's, which markdown-it may still
            # hold open where CommonMark ended it: CommonMark reads code or a paragraph's
            # continuation, markdown-it the blockquote's marker, so a block start past it is
            # escaped for markdown-it.
            unsure = True
            # markdown-it continues the list items open in that blockquote too, where the
            # indentation reaches their content.
            start = _lenient(line, columns, index, slack=_widths(stack[matched:]))
            if start is not None:
                lines[i] = line = f"{line[:start]}\\{line[start:]}"
                columns = _columns(line)
        nested = _nested_quote_tab(line)
        if nested is not None:
            # A tab past a nested blockquote's marker: markdown-it measures its width from
            # the inner blockquote's place in the outer one, not from the line's start, so
            # it may read a list item's content, code or a block start where CommonMark
            # reads another. Every reading's block start is escaped, and the containers
            # are read as markdown-it may read them otherwise from here on.
            unsure = True
            start = _lenient(line, columns, nested, narrow=True, slack=_widths(stack))
            if start is not None:
                lines[i] = line = f"{line[:start]}\\{line[start:]}"
                columns = _columns(line)
        opened = False  # whether this line opened a container
        while True:
            index = _indented(line, columns, column)
            lazy = paragraph and not opened  # the line continues the paragraph unless it starts a block
            below = lazy and matched == len(stack)  # and is in the paragraph's own container
            if index == len(line):
                del stack[matched:]
                paragraph = False
                # A blank line past every container leaves markdown-it none open either.
                unsure = unsure and bool(stack)
                break
            if matched:
                stack[matched - 1].empty = False  # what follows is in it, or in what it holds
            rest = line[index:]
            if columns[index] - column > 3:
                # Code, or a paragraph's continuation, which nothing in the line can interrupt.
                if unsure:
                    # Where markdown-it may have measured a container's content otherwise (a tab
                    # past a nested blockquote's marker), this may be no code to it.
                    start = _lenient(line, columns, index, narrow=True)
                    if start is not None:
                        lines[i] = f"{line[:start]}\\{line[start:]}"
                if not lazy:
                    del stack[matched:]
                    paragraph = False
                elif matched < len(stack) and (
                    _BLOCK_START.match(rest) or _HTML_BLOCK.match(rest) or _CONTAINER.match(rest)
                ):
                    # markdown-it may measure the indentation from a container the line falls short of
                    # (a list item's content, a nested blockquote's), end the paragraph at this block
                    # start and read what follows otherwise.
                    unsure = True
                break
            fence = _FENCE.match(rest)
            if fence is not None and not unsure:
                key = (stack[matched - 1] if matched else None, fence[0][0])
                end, shortest = unclosed.get(key, (i, 0))
                closed = False
                if i >= end or len(fence[0]) < shortest:
                    closed, end = _closing(lines, i, stack[:matched], fence[0], measured)
                    if not closed:
                        unclosed[key] = (end, len(fence[0]))
                if closed:
                    del stack[matched:]
                    paragraph = False
                    i = end
                    break
            container = None
            if (
                _BLOCK_START.match(rest)
                or _HTML_BLOCK.match(rest)
                or ((unsure or below) and _SETEXT.match(rest))
                or ((unsure or not lazy) and _HTML_TAG_LINE.match(rest))
            ):
                lines[i] = f"{line[:index]}\\{rest}"
            else:
                container = _CONTAINER.match(rest)
            if container is not None and container[1] is not None:
                del stack[matched:]
                stack.append(_Open(None))
                matched, opened = len(stack), True
                column = _past_quote(line, columns, index)
                continue
            if container is not None:
                marker = columns[index + container.end()]
                content = _indented(line, columns, marker)
                blank = content == len(line)
                # A list item interrupts a paragraph only if it holds something and, numbered, starts at 1.
                if not (below and (blank or (container[2] is None and int(container[3]) != 1))):
                    spaces = columns[content] - marker
                    width = marker + (spaces if not blank and spaces <= 4 else 1) - column
                    del stack[matched:]
                    stack.append(_Open(width, empty=blank))
                    matched, opened = len(stack), True
                    column += width
                    continue
            # The line is a paragraph's, a new one unless it continues the open one.
            if not lazy:
                del stack[matched:]
                paragraph = True
                if _LINK_DEFINITION.match(rest):
                    # A link reference definition, which markdown-it reads as a block of its
                    # own: the lines after it are no paragraph's continuation there, and one
                    # of them may close the containers and open a block (a setext heading).
                    unsure = True
            break
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
    text = " ".join(_LINE_END.split(text))
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
            if described := _trimmed(c["description"]):
                blocks.append([_prose(described)])
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
            if described := _trimmed(r["description"]):
                blocks.append([_prose(described)])
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
