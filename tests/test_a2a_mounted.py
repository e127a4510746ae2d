"""agentfx.a2a served under a prefix: mounted in a larger app, or behind a ``root_path``.

The guard in front of the SDK reads the path the routes match, so the card
stays public and the endpoint's errors keep their fixed words wherever the
app is served from.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount
from starlette.types import ASGIApp

from agentfx.a2a import a2a_app
from tests.test_a2a import CARD, _host, _runtime  # pyright: ignore[reportPrivateUsage]

SECRET = "SECRETMARK"


def _user(request: Request) -> str | None:
    return request.headers.get("x-user")


def _mounted() -> tuple[ASGIApp, Starlette, str]:
    inner = a2a_app(lambda _principal: _runtime(_host()), CARD, authenticate=_user)
    return Starlette(routes=[Mount("/agent", app=inner)]), inner, ""


def _behind_root_path() -> tuple[ASGIApp, Starlette, str]:
    inner = a2a_app(lambda _principal: _runtime(_host()), CARD, authenticate=_user)
    return inner, inner, "/agent"


@asynccontextmanager
async def _http(asgi: ASGIApp, inner: Starlette, root_path: str) -> AsyncGenerator[httpx.AsyncClient]:
    async with inner.router.lifespan_context(inner):
        # As a server given ``root_path`` does: the path still carries the prefix.
        transport = httpx.ASGITransport(app=asgi, root_path=root_path)
        headers = {"A2A-Version": "1.0"}
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as http:
            yield http


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}


SERVED = pytest.mark.parametrize("served", [_mounted, _behind_root_path], ids=["mounted", "root-path"])


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
@SERVED
async def test_the_card_is_public_under_a_prefix(served: Any) -> None:
    asgi, inner, root_path = served()
    async with _http(asgi, inner, root_path) as http:
        card = await http.get("/agent/.well-known/agent-card.json")
        call = await http.post("/agent/a2a", json=_rpc("GetTask", {"id": "x"}))
    assert card.status_code == 200
    assert card.json()["name"] == "t"
    assert call.status_code == 401  # every call is still authenticated


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
@SERVED
async def test_the_endpoints_errors_keep_their_fixed_words_under_a_prefix(served: Any) -> None:
    asgi, inner, root_path = served()
    user = {"x-user": "u"}
    async with _http(asgi, inner, root_path) as http:
        params = await http.post("/agent/a2a", json=_rpc("GetTask", {"id": "x", "historyLength": SECRET}), headers=user)
        not_json = await http.post(
            "/agent/a2a", content=b"{nope " + SECRET.encode(), headers={**user, "content-type": "application/json"}
        )
        batch = await http.post("/agent/a2a", content=b"[1,2]", headers={**user, "content-type": "application/json"})
    assert params.json()["error"]["message"] == "Invalid params: the params are not what the method takes"
    assert not_json.json()["error"]["message"] == "Parse error: the body is not JSON, or is nested too deep to read"
    assert batch.json()["error"]["message"] == "Invalid Request: the body must be one JSON-RPC 2.0 request object"
    for answer in (params, not_json, batch):
        assert SECRET not in answer.text
        assert "Expecting" not in answer.text
        assert "parseError" not in answer.text
