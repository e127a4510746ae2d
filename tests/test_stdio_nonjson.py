"""``NaN``, ``Infinity`` and ``-Infinity`` on the stdio wire: not JSON, so a parse error, and nothing is dispatched.

The SDK's parser takes those words for floats. Served over real pipes by the
stdio transport (the harness of ``tests/test_stdio.py``), on asyncio and trio.
"""

from __future__ import annotations

import json

import mcp_types as types
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage

import agentfx
from agentfx.app import App
from agentfx.mcp._stdio import read_line
from tests.mcp_wire import call
from tests.test_stdio import serving


class SetTemp(msgspec.Struct, frozen=True, tag=True):
    celsius: float


class Labelled(msgspec.Struct, frozen=True, tag=True):
    label: str


Message = SetTemp | Labelled

app = App(
    agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(SetTemp, "Set the temperature", name="set_temp"),
            agentfx.variant(Labelled, "Label it", name="label"),
        )
    ),
    0,
    lambda model, _message: model + 1,
)

# Each a call whose arguments hold a word that is not JSON, where a number or a string belongs.
NOT_JSON = [
    ("set_temp", "celsius", "NaN"),
    ("set_temp", "celsius", "Infinity"),
    ("set_temp", "celsius", "-Infinity"),
    ("set_temp", "celsius", "[1, NaN]"),
    ("label", "label", "NaN"),
    ("label", "label", "-Infinity"),
]


def with_word(request_id: int, tool: str, field: str, word: str) -> bytes:
    """A ``tools/call`` line whose argument ``field`` holds ``word`` as it stands."""
    line = json.dumps(call(request_id, tool, {field: "<>"}))
    return line.replace('"<>"', word).encode()


@pytest.mark.parametrize(("tool", "field", "word"), NOT_JSON)
def test_a_line_with_nan_or_infinity_is_a_parse_error(tool: str, field: str, word: str) -> None:
    answer = read_line(with_word(1, tool, field, word))
    assert answer == read_line(b"{oops")
    assert isinstance(answer, types.JSONRPCError)
    assert (answer.id, answer.error.code, answer.error.message) == (None, types.PARSE_ERROR, "Parse error")


@given(st.text(alphabet="NaInfity- IN\"\\", max_size=30))
def test_the_words_inside_strings_are_only_text(label: str) -> None:
    message = read_line(json.dumps(call(1, "label", {"label": label})).encode())
    assert isinstance(message, SessionMessage) and isinstance(message.message, types.JSONRPCRequest)
    assert message.message.params == {"name": "label", "arguments": {"label": label}}


@pytest.mark.anyio
async def test_over_the_wire_such_a_line_is_answered_as_not_json_and_never_dispatched() -> None:
    log = agentfx.audit_log()
    async with serving(log, app) as (peer, task_group, _):
        await peer.write(b"{oops\n")
        not_json = await peer.receive()
        assert not_json == {"jsonrpc": "2.0", "id": None, "error": {"code": types.PARSE_ERROR, "message": "Parse error"}}
        for index, (tool, field, word) in enumerate(NOT_JSON):
            await peer.write(with_word(10 + index, tool, field, word) + b"\n")
            assert await peer.receive() == not_json
        # The server serves on, the words in a string being only text.
        await peer.send(call(2, "label", {"label": "NaN Infinity -Infinity"}))
        answer = await peer.receive()
        assert answer["id"] == 2 and answer["result"]["content"][0]["text"] == "Dispatched Labelled"
        await peer.send(call(3, "set_temp", {"celsius": 21.5}))
        assert (await peer.receive())["result"]["content"][0]["text"] == "Dispatched SetTemp"
        task_group.cancel_scope.cancel()
    assert [(e.capability, e.outcome) for e in log.entries()] == [("label", "dispatched"), ("set_temp", "dispatched")]
