"""Bodies that are not JSON because of ``NaN``, ``Infinity`` or ``-Infinity`` are parse errors over HTTP, in both eras.

Python's and pydantic's JSON readers take those words for floats, so a body
holding one would reach a capability as a value no JSON client could send.
Served by uvicorn on loopback; requests are raw, since no client library
writes such a body.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import mcp_types as types
import msgspec
import pytest

import agentfx
from agentfx.app import App
from agentfx.mcp import http_app
from tests.http_support import JSON_AND_SSE, MODERN, modern, open_session, post, serving
from tests.mcp_wire import call

pytestmark = pytest.mark.anyio


class SetTemp(msgspec.Struct, frozen=True, tag=True):
    celsius: float


class Labelled(msgspec.Struct, frozen=True, tag=True):
    label: str


Message = SetTemp | Labelled

_seen: list[Message] = []
_lock = threading.Lock()


def update(model: int, message: Message) -> int:
    with _lock:
        _seen.append(message)
    return model + 1


app = App(
    agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(SetTemp, "Set the temperature", name="set_temp"),
            agentfx.variant(Labelled, "Label it", name="label"),
        )
    ),
    0,
    update,
)


def seen() -> list[Message]:
    with _lock:
        return list(_seen)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(lambda _url: http_app(app)) as served:
        yield served


# Each a call whose arguments hold a word that is not JSON, where a number or a string belongs.
NOT_JSON = [
    ("set_temp", "celsius", "NaN"),
    ("set_temp", "celsius", "Infinity"),
    ("set_temp", "celsius", "-Infinity"),
    ("set_temp", "celsius", "[NaN]"),
    ("label", "label", "NaN"),
    ("label", "label", "-Infinity"),
]
PARSE_ERROR = {"jsonrpc": "2.0", "id": None, "error": {"code": types.PARSE_ERROR, "message": "Parse error"}}


def with_word(body: dict[str, Any], field: str, word: str) -> bytes:
    """``body`` as JSON, the argument ``field`` holding ``word`` as it stands."""
    raw = json.dumps(body)
    placeholder = json.dumps(f"<{field}>")
    assert placeholder in raw
    return raw.replace(placeholder, word).encode()


def answered(response: httpx.Response) -> tuple[int, str, Any]:
    return response.status_code, response.headers.get("content-type", ""), response.json()


@pytest.mark.parametrize(("tool", "field", "word"), NOT_JSON)
async def test_in_a_session_a_body_with_nan_or_infinity_is_a_parse_error_and_nothing_is_sent(
    url: str, tool: str, field: str, word: str
) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, url)
        before = seen()
        headers = {**JSON_AND_SSE, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
        refused = await http.post(url, content=with_word(call(5, tool, {field: f"<{field}>"}), field, word), headers=headers)
        not_json = await http.post(url, content=b"{not json", headers=headers)
        # Answered exactly as any other body that is not JSON is.
        assert answered(refused) == answered(not_json) == (400, "application/json", PARSE_ERROR)
        assert seen() == before
        # The session serves on.
        status, answer, _ = await post(http, url, call(6, "set_temp", {"celsius": 21.5}), session=session)
        assert status == 200 and answer["result"]["content"][0]["text"] == "Dispatched SetTemp"
        assert seen()[-1] == SetTemp(celsius=21.5)


@pytest.mark.parametrize(("tool", "field", "word"), NOT_JSON)
async def test_sessionless_a_body_with_nan_or_infinity_is_a_parse_error_and_nothing_is_sent(
    url: str, tool: str, field: str, word: str
) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        before = seen()
        headers = {**JSON_AND_SSE, "Mcp-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool}
        body = with_word(modern("tools/call", {"name": tool, "arguments": {field: f"<{field}>"}}), field, word)
        refused = await http.post(url, content=body, headers=headers)
        not_json = await http.post(url, content=b"{not json", headers=headers)
        assert answered(refused) == answered(not_json) == (400, "application/json", PARSE_ERROR)
        assert seen() == before


async def test_the_words_inside_strings_are_only_text(url: str) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, url)
        status, answer, _ = await post(http, url, call(7, "label", {"label": "NaN Infinity -Infinity"}), session=session)
        assert status == 200 and answer["result"]["content"][0]["text"] == "Dispatched Labelled"
        assert seen()[-1] == Labelled(label="NaN Infinity -Infinity")
        request = modern("tools/call", {"name": "label", "arguments": {"label": "NaN"}})
        status, answer, _ = await post(http, url, request, version=MODERN)
        assert status == 200 and answer["result"]["content"][0]["text"] == "Dispatched Labelled"
        assert seen()[-1] == Labelled(label="NaN")
