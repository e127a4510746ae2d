"""OAuth 2.1 bearer tokens at the Streamable HTTP endpoint, in both eras, on the SDK's resource-server support.

A real uvicorn server on 127.0.0.1 serves the todo example as a resource
server; the tests verify HS256 JWTs with a verifier of their own
(:class:`tests.http_support.JwtVerifier`, the README's example): valid,
expired, for another audience, signed with another key, and short of a scope.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl
from starlette.authentication import AuthCredentials

import agentfx
from agentfx.mcp import http_app
from agentfx.runtime import AgentRuntime
from examples.todo.app import DELETE_REFUSED, app, user_from_token
from tests.http_support import ISSUER, JSON_AND_SSE, MODERN, JwtVerifier, jwt_token, modern, open_session, post, sdk_client, serving
from tests.mcp_wire import text

pytestmark = pytest.mark.anyio


class Ping(msgspec.Struct, frozen=True, tag=True):
    pass

SDK_CLIENT = pytest.mark.parametrize("anyio_backend", ["asyncio"])
"""The SDK's HTTP client leaves its SSE readers to trio's finalizer (see test_mcp_http_sessionless)."""

READ = "todos:read"
DELETE = "todos:delete"


def allowed_to_delete(reply: str) -> bool:
    # Past the scope check a deletion completes, or (where the example asks a
    # person first) waits for that person: either way it was not refused for the scope.
    return reply.splitlines()[0] == "Completed: DeletedTodo" or "confirm" in reply.lower()


def settings(url: str) -> AuthSettings:
    return AuthSettings(
        issuer_url=AnyHttpUrl(ISSUER),
        resource_server_url=AnyHttpUrl(url),
        required_scopes=[READ],
        validate_token_resource=True,
    )


@pytest.fixture
def todos() -> Iterator[str]:
    """The todo example as a resource server: a token's scopes decide who may delete."""

    def make(url: str) -> Any:
        return http_app(
            app, token_verifier=JwtVerifier(url), auth=settings(url), principal_from_token=user_from_token
        )

    with serving(make) as url:
        yield url


@SDK_CLIENT
async def test_a_token_with_the_delete_scope_deletes_in_both_eras_and_one_without_is_told_the_scope(
    todos: str,
) -> None:
    reader = jwt_token(todos, scopes=READ, subject="rita")
    deleter = jwt_token(todos, scopes=f"{READ} {DELETE}", subject="dan")
    async with sdk_client(todos, reader) as rita, sdk_client(todos, deleter, mode="legacy") as dan:
        assert (rita.protocol_version, dan.protocol_version) == (MODERN, "2025-11-25")
        await rita.call_tool("select_todo", {"id": "todo-1"})
        refused = await rita.call_tool("delete_selected_todo", {})
        assert refused.is_error and text(refused) == DELETE_REFUSED
        assert DELETE in DELETE_REFUSED
        await dan.call_tool("select_todo", {"id": "todo-1"})
        allowed = await dan.call_tool("delete_selected_todo", {})
        assert allowed_to_delete(text(allowed)), text(allowed)


async def test_missing_expired_foreign_and_forged_tokens_get_401_naming_the_metadata(todos: str) -> None:
    metadata = todos.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    refused = {
        "missing": None,
        "expired": jwt_token(todos, scopes=READ, expires_in=-60),
        "another audience": jwt_token("https://other.example/mcp", scopes=READ),
        "another key": jwt_token(todos, scopes=READ, key="not-the-key-the-server-trusts-at-all"),
        "not a jwt": "bogus",
    }
    async with httpx.AsyncClient() as http:
        for why, token in refused.items():
            for version in (MODERN, None):
                body = modern("tools/list") if version else {"jsonrpc": "2.0", "id": 0, "method": "initialize"}
                status, _, response = await post(http, todos, body, token=token, version=version)
                assert status == 401, why
                challenge = response.headers["www-authenticate"]
                assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata}"' in challenge, why
        short = jwt_token(todos, scopes=DELETE)
        status, _, response = await post(http, todos, modern("tools/list"), token=short, version=MODERN)
        assert status == 403 and 'error="insufficient_scope"' in response.headers["www-authenticate"]

        described = await http.get(metadata)
        assert described.status_code == 200
        document = described.json()
        assert document["resource"] == todos
        assert document["authorization_servers"] == [ISSUER]
        assert document["scopes_supported"] == [READ]


async def test_a_session_belongs_to_the_token_that_opened_it(todos: str) -> None:
    rita = jwt_token(todos, scopes=READ, subject="rita")
    refreshed = jwt_token(todos, scopes=READ, subject="rita", expires_in=600)
    dan = jwt_token(todos, scopes=f"{READ} {DELETE}", subject="dan")
    broader = jwt_token(todos, scopes=f"{READ} {DELETE}", subject="rita")
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx.AsyncClient() as http:
        session = await open_session(http, todos, rita)
        status, _, _ = await post(http, todos, listing, token=refreshed, session=session)
        assert status == 200, "a refreshed token proves the same principal"
        for other in (dan, broader):
            status, answer, _ = await post(http, todos, listing, token=other, session=session)
            assert (status, answer["error"]["message"]) == (404, "Session not found")


async def test_by_default_the_principal_is_the_access_token_so_authorize_sees_its_scopes() -> None:
    seen: list[AccessToken] = []

    def scoped(request: agentfx.AuthorizationRequest[AccessToken, Ping, int]) -> bool | agentfx.Refusal:
        seen.append(request.principal)
        return "ping" in request.principal.scopes or agentfx.Refusal('Pinging needs the "ping" scope')

    pings = agentfx.App(
        agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping", authorize=scoped))), 0, lambda n, _: n + 1
    )

    @asynccontextmanager
    async def make_runtime(token: AccessToken) -> AsyncGenerator[AgentRuntime[Any, Any]]:
        async with pings.run(principal=token) as runtime:
            yield runtime

    url = "http://127.0.0.1/mcp"
    asgi = http_app(make_runtime, token_verifier=JwtVerifier(url), auth=settings(url))
    ping = modern("tools/call", {"name": "ping", "arguments": {}})
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        status, answer, _ = await post(http, url, ping, token=jwt_token(url, scopes=f"{READ} ping"), version=MODERN)
        assert (status, answer["result"]["isError"]) == (200, False)
        status, answer, _ = await post(http, url, ping, token=jwt_token(url, scopes=READ), version=MODERN)
        assert answer["result"]["content"][0]["text"] == 'Pinging needs the "ping" scope'
        assert asgi.principal_count == 2, "other scopes, another principal"
    assert [sorted(token.scopes) for token in seen] == [["ping", READ], [READ]]
    assert all(token.subject == "ann" for token in seen)


@pytest.mark.parametrize("in_session", [False, True], ids=["sessionless", "in a session"])
async def test_an_app_s_authorize_sees_the_token_of_its_principal_that_expires_last(in_session: bool) -> None:
    # A refreshed token proves the same principal, so it shares the runtime
    # the first token started; authorize must still see the refreshed one
    # (an expiry it checks would otherwise be the first token's), and a stale
    # token still in use must not take its place.
    seen: list[str] = []

    def noted(request: agentfx.AuthorizationRequest[AccessToken, Ping, int]) -> bool:
        seen.append(request.principal.token)
        return True

    pings = agentfx.App(
        agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping", authorize=noted))), 0, lambda n, _: n + 1
    )
    url = "http://127.0.0.1/mcp"
    first, refreshed = jwt_token(url, scopes=READ, expires_in=100), jwt_token(url, scopes=READ, expires_in=200)
    assert first != refreshed
    asgi = http_app(pings, token_verifier=JwtVerifier(url), auth=settings(url))
    ping = modern("tools/call", {"name": "ping", "arguments": {}})
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        # Within one 2025 session too: opened with the first token, each request brings its own.
        session = await open_session(http, url, token=first) if in_session else None
        for token in (first, refreshed, first):
            if session is None:
                status, answer, _ = await post(http, url, ping, token=token, version=MODERN)
            else:
                status, answer, _ = await post(http, url, ping, token=token, session=session)
            assert (status, answer["result"]["isError"]) == (200, False)
        assert asgi.principal_count == 1
    assert seen == [first, refreshed, refreshed]


def test_misconfigured_oauth_is_a_contract_error() -> None:
    url = "http://127.0.0.1/mcp"
    verifier = JwtVerifier(url)
    with pytest.raises(agentfx.ContractError, match="authenticate or token_verifier, not both"):
        http_app(app, authenticate=lambda _request: None, token_verifier=verifier, auth=settings(url))  # pyright: ignore[reportCallIssue, reportArgumentType]
    with pytest.raises(agentfx.ContractError, match="needs auth="):
        http_app(app, token_verifier=verifier)  # pyright: ignore[reportArgumentType]
    with pytest.raises(agentfx.ContractError, match="needs token_verifier"):
        http_app(app, auth=settings(url))  # pyright: ignore[reportArgumentType]
    with pytest.raises(agentfx.ContractError, match="resource_server_url"):
        no_resource = AuthSettings(issuer_url=AnyHttpUrl(ISSUER), resource_server_url=None)
        http_app(app, token_verifier=verifier, auth=no_resource, principal_from_token=user_from_token)
    with pytest.raises(agentfx.ContractError, match="must not have a fragment"):
        http_app(app, token_verifier=verifier, auth=settings(f"{url}#tools"), principal_from_token=user_from_token)


async def test_a_hung_token_verifier_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentfx.mcp._http.AUTHENTICATE_TIMEOUT", 0.1)

    class Hung:
        async def verify_token(self, token: str) -> AccessToken | None:
            await anyio.sleep_forever()
            raise AssertionError(token)

    url = "http://127.0.0.1/mcp"
    asgi = http_app(app, token_verifier=Hung(), auth=settings(url), principal_from_token=user_from_token)
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        status, answer, _ = await post(http, url, modern("tools/list"), token="x", version=MODERN)
        assert (status, answer["error"]["message"]) == (503, "Service Unavailable: authentication timed out")
        assert asgi.principal_count == 0



README = Path(__file__).resolve().parents[2] / "README.md"


async def test_the_readme_oauth_example_serves_the_todo_example_by_scope() -> None:
    block = README.read_text().split("<!-- oauth-example -->", 1)[1].split("<!-- /oauth-example -->", 1)[0]
    program = block.strip().removeprefix("```python").removesuffix("```")
    namespace: dict[str, Any] = {"__name__": "readme_oauth"}
    exec(compile(program, str(README), "exec"), namespace)
    asgi = namespace["asgi"]
    resource, key = namespace["RESOURCE"], namespace["KEY"]
    reader = jwt_token(resource, scopes="todos:read", key=key)
    deleter = jwt_token(resource, scopes="todos:read todos:delete", key=key)
    select = modern("tools/call", {"name": "select_todo", "arguments": {"id": "todo-1"}})
    delete = modern("tools/call", {"name": "delete_selected_todo", "arguments": {}})
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        status, _, response = await post(http, resource, modern("tools/list"), version=MODERN)
        assert status == 401 and "oauth-protected-resource/mcp" in response.headers["www-authenticate"]
        status, answer, _ = await post(http, resource, select, token=reader, version=MODERN)
        assert status == 200, answer
        _, answer, _ = await post(http, resource, delete, token=reader, version=MODERN)
        assert answer["result"]["content"][0]["text"] == DELETE_REFUSED
        _, answer, _ = await post(http, resource, delete, token=deleter, version=MODERN)
        assert "error" not in answer and DELETE_REFUSED not in json.dumps(answer), answer
        if "content" in answer["result"]:
            assert allowed_to_delete(answer["result"]["content"][0]["text"]), answer
        status, _, _ = await post(http, "http://127.0.0.1/mcp", modern("tools/list"), token=deleter, version=MODERN)
        assert status == 421, "only the host it names"


async def test_an_unhashable_principal_is_answered_500_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    url = "http://127.0.0.1/mcp"

    def as_dict(token: AccessToken) -> dict[str, str]:
        return {"sub": token.subject or ""}

    asgi = http_app(
        lambda _principal: app.run(), token_verifier=JwtVerifier(url), auth=settings(url), principal_from_token=as_dict
    )
    with caplog.at_level(logging.ERROR, logger="agentfx.mcp.http"):
        async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
            token = jwt_token(url, scopes=READ)
            status, answer, _ = await post(http, url, modern("tools/list"), token=token, version=MODERN)
            assert (status, answer["error"]["message"]) == (500, "Internal error")
    assert [r.getMessage() for r in caplog.records] == ["a principal must be hashable; this request could not be served"]


async def test_principal_from_token_may_be_async_and_its_failures_are_500s_without_their_text() -> None:
    url = "http://127.0.0.1/mcp"
    secret = "principal-backend-said-0xdeadbeef"

    async def later(token: AccessToken) -> Any:
        await anyio.sleep(0)
        return user_from_token(token)

    def raising(_token: AccessToken) -> Any:
        raise RuntimeError(secret)

    def nobody(_token: AccessToken) -> Any:
        return None

    listing = modern("tools/list")
    for convert, expected in ((later, 200), (raising, 500), (nobody, 500)):
        asgi = http_app(app, token_verifier=JwtVerifier(url), auth=settings(url), principal_from_token=convert)
        async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
            status, answer, response = await post(http, url, listing, token=jwt_token(url, scopes=READ), version=MODERN)
            assert status == expected, convert
            assert secret not in response.text
            if expected == 500:
                assert answer["error"]["message"] == "Internal error"


class Issued:
    """A verifier that knows a fixed set of token strings, each standing for the ``AccessToken`` given."""

    def __init__(self, tokens: dict[str, AccessToken]) -> None:
        self.tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        return self.tokens.get(token)


async def test_a_user_an_outer_middleware_put_in_the_scope_does_not_stand_in_for_a_refused_token() -> None:
    url = "http://127.0.0.1/mcp"
    asgi = http_app(app, token_verifier=JwtVerifier(url), auth=settings(url), principal_from_token=user_from_token)
    elsewhere = AccessToken(token="outer", client_id="agent-app", scopes=[READ], subject="mallory")

    async def outer(scope: Any, receive: Any, send: Any) -> None:
        # As a Starlette app authenticating with its own backend around the mounted endpoint.
        await asgi({**scope, "user": AuthenticatedUser(elsewhere), "auth": AuthCredentials([READ])}, receive, send)

    listing = modern("tools/list")
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=outer)) as http:
        for token in (None, jwt_token("https://other.example/mcp", scopes=READ), "bogus"):
            status, _, response = await post(http, url, listing, token=token, version=MODERN)
            assert status == 401, token
            assert 'error="invalid_token"' in response.headers["www-authenticate"]
        status, _, _ = await post(http, url, listing, token=jwt_token(url, scopes=READ), version=MODERN)
        assert status == 200
        assert asgi.principal_count == 1


async def test_a_request_with_two_authorization_headers_is_refused_whichever_comes_first() -> None:
    url = "http://127.0.0.1/mcp"
    asgi = http_app(app, token_verifier=JwtVerifier(url), auth=settings(url), principal_from_token=user_from_token)
    good = f"Bearer {jwt_token(url, scopes=READ)}"
    body = json.dumps(modern("tools/list")).encode()
    routing = {"Mcp-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        for pair in ((good, "Bearer bogus"), ("Bearer bogus", good), (good, good)):
            headers = [*JSON_AND_SSE.items(), *routing.items(), *(("Authorization", value) for value in pair)]
            response = await http.post(url, content=body, headers=headers)
            assert response.status_code == 401, pair
            assert response.headers["www-authenticate"].startswith("Bearer ")
        status, _, _ = await post(http, url, modern("tools/list"), token=good.removeprefix("Bearer "), version=MODERN)
        assert status == 200, "one header is served"
        lower = [*JSON_AND_SSE.items(), *routing.items(), ("Authorization", "bEaReR " + good.removeprefix("Bearer "))]
        assert (await http.post(url, content=body, headers=lower)).status_code == 200, "the scheme is case-insensitive"


async def test_a_token_whose_expiry_has_come_is_refused_even_when_the_verifier_passes_it() -> None:
    url = "http://127.0.0.1/mcp"

    def issued(expires_at: int | None) -> AccessToken:
        return AccessToken(
            token="t", client_id="agent-app", scopes=[READ], subject="ann", resource=url, expires_at=expires_at
        )

    now = int(time.time())
    verifier = Issued({"epoch": issued(0), "now": issued(now), "past": issued(now - 1), "later": issued(now + 300)})
    asgi = http_app(app, token_verifier=verifier, auth=settings(url), principal_from_token=user_from_token)
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        for token, expected in (("epoch", 401), ("now", 401), ("past", 401), ("later", 200)):
            status, _, _ = await post(http, url, modern("tools/list"), token=token, version=MODERN)
            assert status == expected, token


async def test_tokens_that_name_no_subject_are_never_taken_for_one_principal() -> None:
    url = "http://127.0.0.1/mcp"

    def issued(token: str, claims: dict[str, Any] | None = None) -> AccessToken:
        return AccessToken(token=token, client_id="agent-app", scopes=[READ], resource=url, claims=claims)

    verifier = Issued(
        {
            # Two people signed in through one client; the verifier does not say who.
            "ann-1": issued("ann-1"),
            "bob-1": issued("bob-1"),
            # The subject only among the claims: a refreshed token still proves its principal.
            "cid-1": issued("cid-1", {"sub": "cid", "iss": ISSUER}),
            "cid-2": issued("cid-2", {"sub": "cid", "iss": ISSUER}),
            "dee-1": issued("dee-1", {"sub": "dee", "iss": ISSUER}),
        }
    )
    # The default principal, the AccessToken, keyed by what it proves.
    asgi = http_app(lambda _token: app.run(), token_verifier=verifier, auth=settings(url))
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        ann = await open_session(http, url, "ann-1")
        status, answer, _ = await post(http, url, listing, token="bob-1", session=ann)
        assert (status, answer["error"]["message"]) == (404, "Session not found")
        cid = await open_session(http, url, "cid-1")
        status, _, _ = await post(http, url, listing, token="cid-2", session=cid)
        assert status == 200
        status, _, _ = await post(http, url, listing, token="dee-1", session=cid)
        assert status == 404
        assert asgi.principal_count == 2


async def test_a_token_whose_claims_changed_is_another_principal_and_a_refreshed_one_is_not() -> None:
    # A role taken away must reach authorize: the runtime built for the old
    # claims is never handed a token that proves less.
    url = "http://127.0.0.1/mcp"
    now = int(time.time())

    def issued(token: str, role: str, at: int) -> AccessToken:
        claims = {"iss": ISSUER, "sub": "ann", "role": role, "iat": at, "exp": at + 300, "jti": token}
        return AccessToken(
            token=token, client_id="agent-app", scopes=[READ], subject="ann", resource=url, expires_at=at + 300, claims=claims
        )

    verifier = Issued(
        {"admin-1": issued("admin-1", "admin", now), "admin-2": issued("admin-2", "admin", now + 1), "reader": issued("reader", "reader", now + 2)}
    )
    built: list[object] = []

    def make_runtime(token: AccessToken) -> Any:
        built.append((token.claims or {}).get("role"))
        return app.run()

    asgi = http_app(make_runtime, token_verifier=verifier, auth=settings(url))
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        session = await open_session(http, url, "admin-1")
        status, _, _ = await post(http, url, listing, token="admin-2", session=session)
        assert status == 200, "a refreshed token keeps its session"
        status, answer, _ = await post(http, url, listing, token="reader", session=session)
        assert (status, answer["error"]["message"]) == (404, "Session not found")
        status, _, _ = await post(http, url, modern("tools/list"), token="reader", version=MODERN)
        assert status == 200
        assert asgi.principal_count == 2
    assert built == ["admin", "reader"]


async def test_a_token_whose_claims_are_not_json_proves_only_itself() -> None:
    url = "http://127.0.0.1/mcp"

    def issued(token: str) -> AccessToken:
        return AccessToken(
            token=token, client_id="agent-app", scopes=[READ], subject="ann", resource=url, claims={"when": object()}
        )

    verifier = Issued({"one": issued("one"), "two": issued("two")})
    asgi = http_app(lambda _token: app.run(), token_verifier=verifier, auth=settings(url))
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        for token in ("one", "two", "one"):
            status, _, _ = await post(http, url, modern("tools/list"), token=token, version=MODERN)
            assert status == 200
        assert asgi.principal_count == 2


async def test_a_token_verifier_that_raises_is_a_500_without_its_text_or_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = "http://127.0.0.1/mcp"
    secret = "introspection-endpoint-said-0xc0ffee"

    class Raising:
        async def verify_token(self, token: str) -> AccessToken | None:
            raise RuntimeError(secret)

    asgi = http_app(app, token_verifier=Raising(), auth=settings(url), principal_from_token=user_from_token)
    token = "a-bearer-token-that-must-not-be-echoed"
    with caplog.at_level(logging.ERROR, logger="agentfx.mcp.http"):
        async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
            status, answer, response = await post(http, url, modern("tools/list"), token=token, version=MODERN)
    assert (status, answer["error"]["message"]) == (500, "Internal error")
    assert secret not in response.text and token not in response.text and token not in str(response.headers)
    assert asgi.principal_count == 0
    assert not any(token in record.getMessage() for record in caplog.records)


def _expiring_soon(monkeypatch: pytest.MonkeyPatch, url: str, left: float = 0.3) -> Issued:
    """A verifier of one token, ``soon``, that the endpoint's streams take to expire ``left`` seconds from now.

    The token itself expires in about 300 s, so every request is let through;
    the endpoint's clock for a stream's end is moved on to ``left`` before that.
    """
    import agentfx.mcp._http as served

    real = time.time
    start = real()
    expires = int(start) + 300
    # On the endpoint's clock, the token has ``left`` seconds left when this returns.
    monkeypatch.setattr(served, "time", type("Clock", (), {"time": staticmethod(lambda: real() - start + expires - left)}))
    token = AccessToken(token="soon", client_id="agent-app", scopes=[READ], subject="ann", resource=url, expires_at=expires)
    return Issued({"soon": token})


def _sse_data(response: httpx.Response) -> list[Any]:
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]


async def test_a_session_s_get_stream_ends_when_the_token_that_opened_it_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx's ASGI transport answers once a response is whole: the GET comes
    # back only because the stream was ended, as the SDK ends one (the client
    # reconnects, with a fresh token).
    url = "http://127.0.0.1/mcp"
    asgi = http_app(app, token_verifier=_expiring_soon(monkeypatch, url), auth=settings(url), principal_from_token=user_from_token)
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        session = await open_session(http, url, "soon")
        headers = {"Accept": "text/event-stream", "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
        with anyio.fail_after(5):
            stream = await http.get(url, headers={**headers, "Authorization": "Bearer soon"})
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        # The session lives on: a request with the (here, same) token is served, and a new GET stream opens.
        status, answer, _ = await post(http, url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, token="soon", session=session)
        assert status == 200 and answer["result"]["tools"], answer
        with anyio.fail_after(5):
            again = await http.get(url, headers={**headers, "Authorization": "Bearer soon"})
        assert again.status_code == 200


async def test_a_listen_stream_ends_with_an_error_when_its_token_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "http://127.0.0.1/mcp"
    asgi = http_app(app, token_verifier=_expiring_soon(monkeypatch, url), auth=settings(url), principal_from_token=user_from_token)
    listen = modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, request_id=7)
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        with anyio.fail_after(5):
            status, answer, response = await post(http, url, listen, token="soon", version=MODERN)
        assert status == 200, response.text
        frames = _sse_data(response)
        assert frames[0]["method"] == "notifications/subscriptions/acknowledged", frames
        # An error, not the graceful close's result: the SDK's client takes the stream as lost and listens again.
        assert answer == {
            "jsonrpc": "2.0",
            "id": 7,
            "error": {"code": -32000, "message": "The access token expired: listen again with a fresh token"},
        }
        # Other requests of the principal are served as before.
        status, answer, _ = await post(http, url, modern("tools/list"), token="soon", version=MODERN)
        assert status == 200 and answer["result"]["tools"]


async def test_a_call_is_not_cut_short_by_its_token_s_expiry(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only streams end at a token's expiry: a call was authorized when it began.
    url = "http://127.0.0.1/mcp"
    asgi = http_app(app, token_verifier=_expiring_soon(monkeypatch, url), auth=settings(url), principal_from_token=user_from_token)
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        status, answer, _ = await post(http, url, modern("tools/list"), token="soon", version=MODERN)
        assert status == 200
        await anyio.sleep(0.5)  # past the moved clock's expiry
        status, answer, _ = await post(http, url, modern("tools/list", request_id=2), token="soon", version=MODERN)
        assert status == 200 and answer["result"]["tools"]


async def test_a_listen_stream_whose_token_expired_before_it_began_is_answered_the_sdk_s_401(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "http://127.0.0.1/mcp"
    verifier = _expiring_soon(monkeypatch, url, left=-1)
    asgi = http_app(app, token_verifier=verifier, auth=settings(url), principal_from_token=user_from_token)
    listen = modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, request_id=7)
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        with anyio.fail_after(5):
            status, _, response = await post(http, url, listen, token="soon", version=MODERN)
        assert status == 401, response.text
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
        assert "/.well-known/oauth-protected-resource/mcp" in challenge
