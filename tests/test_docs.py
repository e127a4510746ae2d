"""Introspection and documentation: descriptors, the manifest, the Markdown, summaries."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfx

from agentfx.completion import Completion, CompletionOutcome, Source, when
from agentfx.builder import for_model
from agentfx.contract import Definition, define, expose, projection, resource, variant
from agentfx.docs import (
    AgentSchema,
    MessageDescriptor,
    ResourceDescriptor,
    Summary,
    context_schema,
    describe,
    messages,
    resources,
    schema,
    summarize,
    to_manifest,
    to_markdown,
)
from agentfx.docs import _code  # pyright: ignore[reportPrivateUsage]
from agentfx.hints import Hints
from agentfx.invocation import Invocation
from agentfx.pipeline import DispatchResult
from tests.support import DeletedTodo, Model, NoInput, Todo, User

if TYPE_CHECKING:
    from markdown_it.token import Token

# This contract's own Messages: their tags and fields are pinned by the exact manifest and Markdown below.


class CreateTodo(msgspec.Struct, frozen=True, tag=True):
    title: str


class DeleteTodo(msgspec.Struct, frozen=True, tag=True):
    id: str


class FailedDeleteTodo(msgspec.Struct, frozen=True, tag=True):
    id: str
    reason: str


class SecretReset(msgspec.Struct, frozen=True, tag=True):
    token: str


class View(msgspec.Struct, frozen=True):
    count: int


Message = CreateTodo | DeleteTodo | DeletedTodo | FailedDeleteTodo | SecretReset

Agent = for_model(Model, principal=User)

SMALL = Agent.define(
    messages=Agent.expose(
        Message,
        Agent.variant(CreateTodo, "Create a todo"),
        Agent.variant(
            DeleteTodo,
            "Delete the selected todo",
            name="delete_selected",
            available=lambda m: m.selected is not None,
            input=NoInput,
            to_message=lambda _, ctx: DeleteTodo(id=ctx.model.selected or ""),
            authorize=lambda req: req.principal.can_delete,
            completion=Completion(success=DeletedTodo, failure=FailedDeleteTodo, timeout=10.0),
        ),
    ),
    resources=[Agent.resource("count", "How many todos", schema=int, read=lambda m: len(m.todos))],
    context=Agent.projection(View, lambda m: View(count=len(m.todos))),
)

CREATE_SCHEMA: dict[str, Any] = {
    "title": "CreateTodo",
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
VIEW_SCHEMA: dict[str, Any] = {
    "title": "View",
    "type": "object",
    "properties": {"count": {"type": "integer"}},
    "required": ["count"],
}

SMALL_MANIFEST: dict[str, Any] = {
    "capabilities": [
        {
            "name": "create_todo",
            "tag": "CreateTodo",
            "description": "Create a todo",
            "inputSchema": CREATE_SCHEMA,
            "modelDependent": False,
            "requiresAuthorization": False,
        },
        {
            "name": "delete_selected",
            "tag": "DeleteTodo",
            "description": "Delete the selected todo",
            "inputSchema": EMPTY_SCHEMA,
            "modelDependent": True,
            "requiresAuthorization": True,
            "completion": {"success": ["DeletedTodo"], "failure": ["FailedDeleteTodo"]},
        },
    ],
    "resources": [{"name": "count", "description": "How many todos", "schema": {"type": "integer"}}],
    "context": VIEW_SCHEMA,
}

SMALL_MARKDOWN = """\
# Agent contract

## Capabilities

| Name | Message | Description | Model-dependent | Authorized |
| --- | --- | --- | --- | --- |
| `create_todo` | `CreateTodo` | Create a todo | no | no |
| `delete_selected` | `DeleteTodo` | Delete the selected todo | yes | yes |

### `create_todo`

Create a todo

Input:

```json
{
  "title": "CreateTodo",
  "type": "object",
  "properties": {
    "title": {
      "type": "string"
    }
  },
  "required": [
    "title"
  ],
  "additionalProperties": false
}
```

### `delete_selected`

Delete the selected todo

Available only in some Model states.

Runs an authorization check before dispatching.

Input:

```json
{
  "type": "object",
  "properties": {},
  "required": [],
  "additionalProperties": false
}
```

Completes on `DeletedTodo`, fails on `FailedDeleteTodo`.

## Resources

### `count`

How many todos

```json
{
  "type": "integer"
}
```

## Context

```json
{
  "title": "View",
  "type": "object",
  "properties": {
    "count": {
      "type": "integer"
    }
  },
  "required": [
    "count"
  ]
}
```
"""

EMPTY_MARKDOWN = """\
# Agent contract

This contract exposes no capabilities.

## Context

This contract projects no Model context.
"""


def _explode(*_: object) -> NoReturn:
    raise AssertionError("documentation read a Model or ran a hook")


def _hooked() -> Definition[Any, Any]:
    """Every hook of this contract raises: documenting it must call none of them."""
    return define(
        expose(
            Message,
            variant(
                DeleteTodo,
                "Delete",
                available=_explode,
                input=NoInput,
                to_message=_explode,
                authorize=_explode,
                completion=Completion(success=DeletedTodo, correlate=_explode),
            ),
            variant(CreateTodo, "Create", completion=when(projection=_explode, predicate=_explode)),
            variant(
                SecretReset,
                "Reset",
                completion=when(source=Source(get=_explode, subscribe=_explode), predicate=_explode),
            ),
        ),
        resources=[resource("todos", "Todos", schema=list[Todo], read=_explode)],
        context=projection(View, _explode),
    )


# --- descriptors ---------------------------------------------------------------


def test_messages_are_descriptors_in_declaration_order() -> None:
    # Output schemas have tests of their own (tests/test_tools.py).
    assert [msgspec.structs.replace(d, output_schema={}) for d in messages(SMALL)] == [
        MessageDescriptor(
            name="create_todo",
            tag="CreateTodo",
            description="Create a todo",
            input_schema=CREATE_SCHEMA,
            model_dependent=False,
            requires_authorization=False,
            completion=None,
            output_schema={},
        ),
        MessageDescriptor(
            name="delete_selected",
            tag="DeleteTodo",
            description="Delete the selected todo",
            input_schema=EMPTY_SCHEMA,
            model_dependent=True,
            requires_authorization=True,
            completion={"success": ["DeletedTodo"], "failure": ["FailedDeleteTodo"]},
            output_schema={},
        ),
    ]


def test_declaration_order_not_union_order() -> None:
    defn = define(expose(Message, variant(SecretReset, "c"), variant(CreateTodo, "a"), variant(DeleteTodo, "b")))
    assert [d.tag for d in messages(defn)] == ["SecretReset", "CreateTodo", "DeleteTodo"]


def test_describe_matches_messages() -> None:
    assert [describe(c) for c in SMALL.capabilities] == messages(SMALL)


def test_resources_and_context_schema() -> None:
    assert resources(SMALL) == [ResourceDescriptor(name="count", description="How many todos", schema={"type": "integer"})]
    assert context_schema(SMALL) == VIEW_SCHEMA
    assert context_schema(define(expose(Message))) is None


def test_schema_gathers_everything() -> None:
    assert schema(SMALL) == AgentSchema(messages=messages(SMALL), resources=resources(SMALL), context=VIEW_SCHEMA)


def test_descriptors_are_frozen() -> None:
    [descriptor, _] = messages(SMALL)
    with pytest.raises(AttributeError):
        descriptor.name = "other"  # pyright: ignore[reportAttributeAccessIssue]


def test_editing_a_manifest_does_not_edit_the_contract() -> None:
    manifest = to_manifest(SMALL)
    manifest["capabilities"][0]["inputSchema"]["properties"]["title"]["type"] = "integer"
    manifest["resources"][0]["schema"]["type"] = "string"
    manifest["context"]["title"] = "Edited"
    assert to_manifest(SMALL) == SMALL_MANIFEST
    assert SMALL.capabilities[0].codec.schema == CREATE_SCHEMA


# --- the manifest --------------------------------------------------------------


def test_manifest_is_exact() -> None:
    manifest = to_manifest(SMALL)
    assert manifest == SMALL_MANIFEST
    # Key order is part of the committed bytes, not only equality.
    assert json.dumps(manifest) == json.dumps(SMALL_MANIFEST)


def test_empty_contract_manifest_is_exact() -> None:
    assert to_manifest(define(expose(Message))) == {"capabilities": [], "resources": []}
    assert json.dumps(to_manifest(define(expose(Message)))) == '{"capabilities": [], "resources": []}'


def test_manifest_is_byte_stable_across_calls() -> None:
    first = json.dumps(to_manifest(SMALL), indent=2)
    assert json.dumps(to_manifest(SMALL), indent=2) == first
    assert to_markdown(SMALL) == to_markdown(SMALL)


_PRINT_MANIFEST = """
import json, runpy, sys
from agentfx.docs import to_manifest, to_markdown
defn = runpy.run_path(sys.argv[1])["SMALL"]
sys.stdout.write(json.dumps(to_manifest(defn), indent=2) + "\\n" + to_markdown(defn))
"""


@pytest.mark.parametrize("hash_seed", ["1", "2"])
def test_manifest_is_byte_stable_across_processes(hash_seed: str) -> None:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", _PRINT_MANIFEST, __file__],
        capture_output=True,
        check=True,
        cwd=root,
        env=env,
    ).stdout
    expected = json.dumps(to_manifest(SMALL), indent=2) + "\n" + to_markdown(SMALL)
    assert out == expected.encode()


def test_completion_success_only() -> None:
    defn = define(expose(Message, variant(DeleteTodo, "d", completion=Completion(success=DeletedTodo))))
    [entry] = to_manifest(defn)["capabilities"]
    assert entry["completion"] == {"success": ["DeletedTodo"]}
    assert "Completes on `DeletedTodo`.\n" in to_markdown(defn)
    assert "fails on" not in to_markdown(defn)


def test_completion_with_several_tags() -> None:
    defn = define(
        expose(
            Message,
            variant(DeleteTodo, "d", completion=Completion(success=(DeletedTodo, CreateTodo), failure=(FailedDeleteTodo, SecretReset))),
        )
    )
    [entry] = to_manifest(defn)["capabilities"]
    assert entry["completion"] == {"success": ["DeletedTodo", "CreateTodo"], "failure": ["FailedDeleteTodo", "SecretReset"]}
    assert "Completes on `DeletedTodo`, `CreateTodo`, fails on `FailedDeleteTodo`, `SecretReset`.\n" in to_markdown(defn)


def test_state_completions() -> None:
    def predicate(value: object, request: object) -> bool:
        return value == request

    source: Source[object] = Source(get=lambda: None, subscribe=lambda listener: lambda: None)
    defn = define(
        expose(
            Message,
            variant(CreateTodo, "c", completion=when(projection=lambda m: m, predicate=predicate)),
            variant(DeleteTodo, "d", completion=when(source=source, predicate=predicate)),
        )
    )
    create, delete = to_manifest(defn)["capabilities"]
    assert create["completion"] == {"state": {"source": "model"}}
    assert delete["completion"] == {"state": {"source": "external"}}
    markdown = to_markdown(defn)
    assert "Completes when its declared state is reached.\n" in markdown
    assert "Completes when its declared external state is reached.\n" in markdown


def test_no_completion_key_without_a_contract() -> None:
    [entry] = to_manifest(define(expose(Message, variant(CreateTodo, "c"))))["capabilities"]
    assert "completion" not in entry
    assert "Completes" not in to_markdown(define(expose(Message, variant(CreateTodo, "c"))))


# --- the Markdown --------------------------------------------------------------


def test_markdown_is_exact() -> None:
    assert to_markdown(SMALL) == SMALL_MARKDOWN


def test_empty_contract_markdown_is_exact() -> None:
    assert to_markdown(define(expose(Message))) == EMPTY_MARKDOWN


def test_resources_section_only_with_resources() -> None:
    without = define(expose(Message, variant(CreateTodo, "c")))
    assert "## Resources" not in to_markdown(without)
    with_one = define(expose(Message), [resource("n", "A number", schema=int, read=lambda m: 1)])
    markdown = to_markdown(with_one)
    assert markdown.endswith(
        "## Resources\n\n### `n`\n\nA number\n\n```json\n{\n  \"type\": \"integer\"\n}\n```\n\n"
        "## Context\n\nThis contract projects no Model context.\n"
    )


def test_table_cells_escape_pipes_and_newlines() -> None:
    defn = define(expose(Message, variant(CreateTodo, "Create a | b\nsecond line", name="create")))
    markdown = to_markdown(defn)
    assert "| `create` | `CreateTodo` | Create a \\| b second line | no | no |\n" in markdown
    # Outside the table the description is prose and stays as written.
    assert "### `create`\n\nCreate a | b\nsecond line\n\nInput:" in markdown


@pytest.mark.parametrize("where", ["capability", "resource"])
@pytest.mark.parametrize("description", ["Create a todo.\n", "\n \nCreate a todo.\n\t\n\n", "\r\nCreate a todo.\r\n"])
def test_blank_lines_around_a_description_do_not_widen_the_gap_between_blocks(where: str, description: str) -> None:
    # Blocks are separated by one blank line; a description's own leading or trailing newlines added more.
    defn, before, after = _placed(where, description)
    markdown = to_markdown(defn)
    assert f"{before}\n\nCreate a todo.\n\n{after}" in markdown
    assert "\n\n\n" not in markdown


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x0c", "\x0b", "\x1c", "\x85"])
def test_only_markdown_line_endings_are_joined_in_cells_and_code_spans(separator: str) -> None:
    # str.splitlines breaks at these too: the table named a tag the manifest does not have.
    tagged = msgspec.defstruct(f"Tagged{ord(separator)}", [], tag=f"Ping{separator}v2")
    description = f"Ping, then{separator}pong"
    markdown = to_markdown(define(expose(tagged, variant(tagged, description, name="ping"))))
    assert f"| `ping` | `Ping{separator}v2` | {description} | no | no |" in markdown
    assert _code(f"a{separator}b") == f"`a{separator}b`"


# A description is Markdown, but no line of it may open a block that reaches past
# its own section: each case is a description, then that description as rendered.
_ESCAPED_DESCRIPTIONS = {
    "html-comment": ("Create a todo.\n<!-- internal note", "Create a todo.\n\\<!-- internal note"),
    "html-div": ("<div>\nCreate a todo.", "\\<div>\nCreate a todo."),
    "html-script": ("Create a todo.\n<script>", "Create a todo.\n\\<script>"),
    "html-pre": ("Create a todo.\n<pre>", "Create a todo.\n\\<pre>"),
    "backtick-fence": ("Create a todo.\n```", "Create a todo.\n\\```"),
    "tilde-fence": ("Create a todo.\n~~~ text", "Create a todo.\n\\~~~ text"),
    "atx-heading": ("Create a todo.\n## Context", "Create a todo.\n\\## Context"),
    "title": ("# Agent contract\nCreate a todo.", "\\# Agent contract\nCreate a todo."),
    "indented-heading": ("Create a todo.\n   ## Context", "Create a todo.\n   \\## Context"),
    "setext-equals": ("Create a todo\n===", "Create a todo\n\\==="),
    "setext-dash": ("Create a todo\n---", "Create a todo\n\\---"),
    "thematic-break": ("Create a todo.\n\n* * *", "Create a todo.\n\n\\* * *"),
    "blockquote": ("> ## Context", "> \\## Context"),
    "blockquote-html": ("> <!-- internal note", "> \\<!-- internal note"),
    "list-item": ("- ## Context", "- \\## Context"),
    "list-continuation": ("1. Create\n   - a todo\n     ## Context", "1. Create\n   - a todo\n     \\## Context"),
    "crlf": ("Create a todo.\r\n## Context", "Create a todo.\n\\## Context"),
}

_PLACES = ("capability", "resource")


def _placed(where: str, description: str) -> tuple[Definition[Any, Any], str, str]:
    """A contract with ``description`` in one place, and the lines rendered just before and after it."""
    if where == "capability":
        return define(expose(Message, variant(CreateTodo, description, name="create"))), "### `create`", "Input:"
    defn = define(expose(Message), [resource("n", description, schema=int, read=lambda m: 1)])
    return defn, "### `n`", "```json"


def _section(where: str, markdown: str) -> tuple[list[Token], list[tuple[str, str]]]:
    """The tokens between the description's heading and what follows it, and every heading."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    headings = [(t.tag, tokens[k + 1].content) for k, t in enumerate(tokens) if t.type == "heading_open"]
    opened = next(k for k, t in enumerate(tokens) if t.type == "heading_close" and t.tag == "h3") + 1
    for k in range(opened, len(tokens)):
        t = tokens[k]
        if t.level == 0 and (
            (where == "capability" and t.type == "paragraph_open" and tokens[k + 1].content == "Input:")
            or (where == "resource" and t.type == "fence" and t.info == "json")
        ):
            return tokens[opened:k], headings
    raise AssertionError(f"the {where}'s description runs to the end of the document: {headings}")


def _text(tokens: list[Token]) -> str:
    """What a reader sees of ``tokens``: the text of every inline run, a soft break as a newline."""
    parts: list[str] = []
    for t in tokens:
        for child in t.children or []:
            parts.append("\n" if child.type == "softbreak" else child.content)
        parts.append("\n")
    return "".join(parts)


def _headings(where: str) -> list[tuple[str, str]]:
    middle = [("h2", "Capabilities"), ("h3", "`create`")] if where == "capability" else [("h2", "Resources"), ("h3", "`n`")]
    return [("h1", "Agent contract"), *middle, ("h2", "Context")]


@pytest.mark.parametrize("where", _PLACES)
@pytest.mark.parametrize(("description", "escaped"), _ESCAPED_DESCRIPTIONS.values(), ids=_ESCAPED_DESCRIPTIONS.keys())
def test_a_description_line_that_would_open_a_block_is_escaped(where: str, description: str, escaped: str) -> None:
    defn, before, after = _placed(where, description)
    assert f"{before}\n\n{escaped}\n\n{after}" in to_markdown(defn)


@pytest.mark.parametrize("where", _PLACES)
@pytest.mark.parametrize("description", [d for d, _ in _ESCAPED_DESCRIPTIONS.values()], ids=_ESCAPED_DESCRIPTIONS.keys())
def test_a_description_renders_inside_its_own_section(where: str, description: str) -> None:
    section, headings = _section(where, to_markdown(_placed(where, description)[0]))
    # One title, the section's own heading, the generated block after the
    # description and the final Context heading, with nothing forged between.
    assert headings == _headings(where)
    assert not [t.type for t in section if t.type in {"heading_open", "fence", "html_block", "hr"}]
    shown = _text(section)
    for line in re.split(r"\r\n|\n", description):
        assert re.sub(r"^(?:[ >]|[-*+] |[0-9]+[.)] )*", "", line) in shown


def test_a_description_keeps_its_markdown() -> None:
    description = (
        "Create a todo:\n\n- *one* item\n- two, see <https://example.com>\n\n"
        '```json\n{"title": "x"}\n# not a heading\n```\n\n    <b>an indented example</b>\n\n'
        "[docs]: https://example.com/docs\n\nSee [docs].\n## Context"
    )
    markdown = to_markdown(define(expose(Message, variant(CreateTodo, description, name="create"))))
    # Only the forged heading changes; the list, the closed fence and the code stay as written.
    escaped = description.replace("## Context", "\\## Context")
    assert f"### `create`\n\n{escaped}\n\nInput:" in markdown
    section, headings = _section("capability", markdown)
    assert headings == _headings("capability")
    kinds = {t.type for t in section} | {c.type for t in section for c in t.children or []}
    assert {"bullet_list_open", "em_open", "link_open", "fence", "code_block"} <= kinds
    assert [t.content for t in section if t.type in {"fence", "code_block"}] == [
        '{"title": "x"}\n# not a heading\n',
        "<b>an indented example</b>\n",
    ]
    assert "## Context" in _text(section)


def test_markdown_ends_with_one_newline() -> None:
    for defn in (SMALL, define(expose(Message)), _hooked()):
        text = to_markdown(defn)
        assert text.endswith("\n")
        assert not text.endswith("\n\n")
        assert "\n\n\n" not in text


# --- purity --------------------------------------------------------------------


def test_documentation_never_reads_the_model_or_runs_a_hook() -> None:
    defn = _hooked()
    manifest = to_manifest(defn)
    assert [c["completion"] for c in manifest["capabilities"]] == [
        {"success": ["DeletedTodo"]},
        {"state": {"source": "model"}},
        {"state": {"source": "external"}},
    ]
    assert [d.model_dependent for d in messages(defn)] == [True, False, False]
    assert resources(defn)[0].name == "todos"
    assert context_schema(defn) is not None
    assert schema(defn).context == context_schema(defn)
    assert to_markdown(defn).startswith("# Agent contract\n")


def test_unexposed_messages_are_never_named() -> None:
    defn = define(
        expose(Message, variant(CreateTodo, "Create"), variant(DeleteTodo, "Delete", completion=Completion(success=DeletedTodo)))
    )
    texts = [
        json.dumps(to_manifest(defn)),
        to_markdown(defn),
        repr(messages(defn)),
        repr(schema(defn)),
    ]
    for text in texts:
        assert "DeletedTodo" in text  # named, as a completion
        assert "SecretReset" not in text
        assert "FailedDeleteTodo" not in text


# --- summaries -----------------------------------------------------------------


def _result(completion: CompletionOutcome | None) -> DispatchResult:
    return DispatchResult(
        name="delete_selected",
        tag="DeleteTodo",
        message=DeleteTodo(id="a"),
        invocation=Invocation(id="call-1", transport="in-app"),
        completion=completion,
    )


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (None, Summary(ok=True, text="Dispatched DeleteTodo")),
        (CompletionOutcome("completed", DeletedTodo(id="a")), Summary(ok=True, text="Completed: DeletedTodo")),
        (CompletionOutcome("failed", FailedDeleteTodo(id="a", reason="gone")), Summary(ok=False, text="Failed: FailedDeleteTodo")),
        (CompletionOutcome("completed", None), Summary(ok=True, text="Completed: DeleteTodo reached its declared state")),
    ],
)
def test_summarize(completion: CompletionOutcome | None, expected: Summary) -> None:
    assert summarize(_result(completion)) == expected


def test_summary_names_a_renamed_tag() -> None:
    class Done(msgspec.Struct, tag="done"):
        pass

    assert summarize(_result(CompletionOutcome("completed", Done()))).text == "Completed: done"


def test_summary_encodes_to_json() -> None:
    assert msgspec.json.encode(summarize(_result(None))) == b'{"ok":true,"text":"Dispatched DeleteTodo"}'


# Titles and hints (§9)


class Wiped(msgspec.Struct, frozen=True, tag=True):
    pass


class Pinged(msgspec.Struct, frozen=True, tag=True):
    pass


HINTED = define(
    expose(
        Wiped | Pinged,
        variant(
            Wiped,
            "Wipe everything",
            title="Wipe | all",
            hints=Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
        ),
        variant(Pinged, "Ping", hints=Hints(read_only=True)),
    )
)


def test_manifest_says_title_and_only_the_said_hints() -> None:
    wipe, ping = to_manifest(HINTED)["capabilities"]
    assert list(wipe) == [
        "name",
        "title",
        "tag",
        "description",
        "inputSchema",
        "modelDependent",
        "requiresAuthorization",
        "hints",
    ]
    assert wipe["title"] == "Wipe | all"
    assert wipe["hints"] == {"readOnly": False, "destructive": True, "idempotent": True, "openWorld": False}
    assert "title" not in ping
    assert ping["hints"] == {"readOnly": True}


def test_manifest_omits_title_and_hints_when_absent() -> None:
    for entry in to_manifest(SMALL)["capabilities"]:
        assert "title" not in entry and "hints" not in entry


def test_markdown_has_a_title_and_a_hints_line() -> None:
    text = to_markdown(HINTED)
    assert "### `wiped`\n\nTitle: Wipe \\| all\n\nWipe everything\n\nHints: not read-only, destructive, idempotent, not open world\n\nInput:" in text
    assert "### `pinged`\n\nPing\n\nHints: read-only\n\nInput:" in text
    assert "Title:" not in to_markdown(SMALL) and "Hints:" not in to_markdown(SMALL)


def test_descriptors_carry_title_hints_and_output_schema() -> None:
    wipe, ping = messages(HINTED)
    assert (wipe.title, wipe.hints) == ("Wipe | all", Hints(read_only=False, destructive=True, idempotent=True, open_world=False))
    assert (ping.title, ping.hints) == (None, Hints(read_only=True))
    assert wipe.output_schema["properties"]["capability"] == {"type": "string", "const": "wiped"}



class Thread(msgspec.Struct, frozen=True):
    text: str
    replies: list[Thread] = []


class Posted(msgspec.Struct, frozen=True, tag=True):
    text: str


def test_a_recursive_type_is_documented_wherever_a_schema_is_declared() -> None:
    # A resource, the context and a mapped input, each a self-referencing Struct.
    definition = agentfx.define(
        agentfx.expose(Posted, agentfx.variant(Posted, "Post", input=Thread, to_message=lambda t, _ctx: Posted(t.text))),
        resources=[agentfx.resource("thread", "The thread", schema=Thread, read=lambda _model: Thread("a"))],
        context=agentfx.projection(Thread, lambda _model: Thread("a")),
    )
    manifest = json.loads(json.dumps(agentfx.to_manifest(definition)))  # a tree JSON can write
    agentfx.bind(definition, host=agentfx.Host(model=lambda: None, dispatch=lambda _message: None))
    assert manifest["capabilities"][0]["inputSchema"]["properties"]["replies"]["items"] == {"$ref": "#/$defs/Thread"}
    assert manifest["resources"][0]["schema"]["$defs"]["Thread"]["properties"]["text"] == {"type": "string"}


@pytest.mark.parametrize(
    "render",
    [
        agentfx.messages,
        agentfx.to_manifest,
        agentfx.to_markdown,
        agentfx.resources,
        agentfx.schema,
        agentfx.context_schema,
    ],
    ids=lambda f: f.__name__,
)
def test_documents_refuse_what_expose_made_without_define(render: Any) -> None:
    class Ping(msgspec.Struct, tag=True):
        pass

    with pytest.raises(agentfx.ContractError, match=rf"^{render.__name__}\(\) takes the result of define"):
        render(agentfx.expose(Ping, agentfx.variant(Ping, "Ping")))


# --- schemas say what JSON carries -----------------------------------------------------------

_NUMBER = {"type": "number"}


class Unit(msgspec.Struct, frozen=True):
    type: str = "number"


class Measure(msgspec.Struct, frozen=True, tag=True):
    pass


class Measured(msgspec.Struct, frozen=True, tag=True):
    # Values that read like a number's schema, in every keyword that holds a value.
    settings: Annotated[
        dict[str, str],
        msgspec.Meta(
            examples=[_NUMBER], extra_json_schema={"const": _NUMBER, "enum": [_NUMBER], "x-unit": _NUMBER}
        ),
    ] = msgspec.field(default_factory=dict[str, str])
    unit: Unit = Unit()
    # And numbers in every place a schema holds a schema.
    ratio: float = 0.5
    many: dict[str, float] = msgspec.field(default_factory=dict[str, float])
    pair: tuple[float, int] = (0.0, 0)
    maybe: float | None = None
    either: Annotated[float | str, msgspec.Meta(extra_json_schema={"type": ["number", "string"]})] = 0.0


_WIDE = ["number", "null"]


def _check_widened(measured: dict[str, Any]) -> None:
    properties = measured["properties"]
    settings = properties["settings"]
    assert (settings["examples"], settings["const"], settings["enum"], settings["x-unit"]) == (
        [_NUMBER],
        _NUMBER,
        [_NUMBER],
        _NUMBER,
    )
    assert properties["unit"]["default"] == _NUMBER
    assert properties["ratio"] == {"type": _WIDE, "default": 0.5}
    assert properties["many"]["additionalProperties"] == {"type": _WIDE}
    assert properties["pair"]["prefixItems"] == [{"type": _WIDE}, {"type": "integer"}]
    assert properties["maybe"]["anyOf"] == [{"type": _WIDE}, {"type": "null"}]
    assert properties["either"]["type"] == ["number", "string", "null"]
    assert properties["either"]["anyOf"] == [{"type": _WIDE}, {"type": "string"}]


def test_an_output_schema_widens_numbers_and_never_a_value() -> None:
    measure = variant(Measure, "Measure", completion=Completion(success=Measured))
    [descriptor] = messages(define(expose(Measure | Measured, measure)))
    defs = descriptor.output_schema["$defs"]
    _check_widened(defs["Measured"])
    assert defs["Unit"]["properties"]["type"] == {"type": "string", "default": "number"}


def test_resource_and_context_schemas_admit_null_where_a_float_is_served() -> None:
    # msgspec encodes NaN and the infinities as null: what is listed says so, as an output schema does.
    defn = define(
        expose(Measure),
        [
            resource("ratio", "A ratio", schema=float, read=lambda _m: float("nan")),
            resource("measured", "A measure", schema=Measured, read=lambda _m: Measured()),
            resource("count", "A count", schema=int, read=lambda _m: 1),
        ],
        projection(Measured, lambda _m: Measured()),
    )
    ratio, measured, count = resources(defn)
    assert ratio.schema == {"type": _WIDE}
    _check_widened(measured.schema)
    assert count.schema == {"type": "integer"}
    context = context_schema(defn)
    assert context is not None
    _check_widened(context)
    manifest = to_manifest(defn)
    assert [r["schema"] for r in manifest["resources"]] == [r.schema for r in (ratio, measured, count)]
    assert manifest["context"] == context == schema(defn).context
    assert '"type": [\n    "number",\n    "null"\n  ]' in to_markdown(defn)
    # What is declared stays as declared.
    assert defn.resources[0].json_schema() == {"type": "number"}


# --- code spans hold any text ----------------------------------------------------------------


class Poked(msgspec.Struct, frozen=True, tag="po`ked"):
    pass


class Done(msgspec.Struct, frozen=True, tag="``done"):
    pass


class Spaced(msgspec.Struct, frozen=True, tag=" spaced "):
    pass


def test_a_tag_with_backticks_stays_one_code_span() -> None:
    poke = variant(Poked, "Poke", name="poke", completion=Completion(success=Done, failure=Spaced))
    markdown = to_markdown(define(expose(Poked | Done | Spaced, poke)))
    assert "| `poke` | ``po`ked`` | Poke | no | no |\n" in markdown
    assert "Completes on ``` ``done ```, fails on `  spaced  `.\n" in markdown


def _span_content(span: str) -> str:
    """What CommonMark renders for one code span: the fence off, then one space off each end if both are there."""
    fence = len(span) - len(span.lstrip("`"))
    assert span.endswith("`" * fence) and not span.endswith("`" * (fence + 1))
    inner = span[fence:-fence]
    if inner[:1] == inner[-1:] == " " and inner.strip(" "):
        inner = inner[1:-1]
    return inner


@given(st.text(alphabet="`a \t|", min_size=1, max_size=12))
def test_a_code_span_renders_its_text(text: str) -> None:
    span = _code(text)
    fence = len(span) - len(span.lstrip("`"))
    runs = [len(run) for run in re.findall("`+", text)]
    assert all(run != fence for run in runs), "a run as long as the fence would close it"
    assert _span_content(span) == text


@pytest.mark.parametrize("where", _PLACES)
@pytest.mark.parametrize(
    ("description", "escaped"),
    [
        ("- [docs]: https://example.com\nContext\n-", "- [docs]: https://example.com\nContext\n\\-"),
        ("> [docs]: https://example.com\nForged\n=", "> [docs]: https://example.com\nForged\n\\="),
        ("[docs]: https://example.com\n<a href='x'>", "[docs]: https://example.com\n\\<a href='x'>"),
    ],
    ids=["in-a-list-item", "in-a-blockquote", "before-a-tag"],
)
def test_what_follows_a_link_reference_definition_opens_no_block(where: str, description: str, escaped: str) -> None:
    # markdown-it reads the definition as a block of its own: the underline below closed the
    # container and made a top-level heading (a second "## Context"), the tag an HTML block.
    defn, before, after = _placed(where, description)
    markdown = to_markdown(defn)
    assert f"{before}\n\n{escaped}\n\n{after}" in markdown
    section, headings = _section(where, markdown)
    assert headings == _headings(where)
    assert not [t.type for t in section if t.type in {"heading_open", "fence", "html_block", "hr"}]
