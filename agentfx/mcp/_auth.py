"""OAuth 2.1 bearer tokens at the HTTP endpoint, on the MCP SDK's own resource-server support.

This layer owns what a resource server does with a bearer token: verifying it
with the application's ``TokenVerifier`` through the SDK's
``BearerAuthBackend`` (expiry, and the token's resource when
``AuthSettings.validate_token_resource`` asks for it), answering a missing or
refused token ``401`` and a token without the required scopes ``403``, both
with the SDK's ``WWW-Authenticate`` header naming the protected-resource
metadata, and serving that metadata (RFC 9728) at the SDK's route.

It deliberately knows nothing of sessions, runtimes or capabilities: it turns
a request into an ``AccessToken`` or an answer, and says which tokens prove
the same principal. It checks no signature or claim itself; the verifier
does. It only refuses what the SDK's backend would let through: a request
with several ``Authorization`` headers, and a token at or past its expiry.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any

import msgspec
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken, TokenVerifier, principal_components
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.auth.settings import AuthSettings
from starlette.authentication import AuthCredentials
from starlette.routing import Match

from ..errors import ContractError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.routing import Route
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BearerTokens", "token_identity"]


_PER_TOKEN_CLAIMS = frozenset({"exp", "iat", "nbf", "jti", "auth_time", "nonce", "at_hash", "c_hash"})
"""Claims that differ between two tokens of one grant (times, the token's own id), so prove nothing of the bearer."""


def token_identity(token: AccessToken) -> Hashable:
    """What a token proves about its bearer, for telling principals apart.

    Two tokens prove the same principal when they were issued to the same
    client, by the same issuer, for the same subject, with the same scopes,
    for the same resource and with the same other claims: a refreshed token
    keeps its session, and a token with other scopes or claims (a role taken
    away) is another principal, whose ``authorize`` checks see what it
    proves now. The token string, its expiry and the claims that differ
    from token to token of one grant (``exp``, ``iat``, ``nbf``, ``jti``,
    ``auth_time``, ``nonce``, ``at_hash``, ``c_hash``) are not part of it.

    The subject is ``AccessToken.subject``, else the ``sub`` claim (an
    empty one names nobody). A token
    that names neither, or whose claims are not JSON, proves only itself (a
    digest of the token string stands for the subject): the people signed
    in through one client are never taken for one principal because the
    verifier did not say who they are, at the price of a refreshed token
    starting afresh.

    >>> from mcp.server.auth.provider import AccessToken
    >>> a = AccessToken(token="one", client_id="app", scopes=["todos:read"], subject="ann", claims={"role": "admin"})
    >>> b = a.model_copy(update={"token": "two", "expires_at": 1, "claims": {"role": "admin", "exp": 1}})
    >>> token_identity(a) == token_identity(b)
    True
    >>> token_identity(a) == token_identity(a.model_copy(update={"scopes": ["todos:read", "todos:delete"]}))
    False
    >>> token_identity(a) == token_identity(a.model_copy(update={"claims": {"role": "reader"}}))
    False
    >>> anonymous = AccessToken(token="three", client_id="app", scopes=["todos:read"])
    >>> token_identity(anonymous) == token_identity(anonymous.model_copy(update={"token": "four"}))
    False
    >>> nobody = anonymous.model_copy(update={"subject": ""})
    >>> token_identity(nobody) == token_identity(nobody.model_copy(update={"token": "four"}))
    False
    """
    client_id, issuer, named = principal_components(token)
    claims = token.claims or {}
    # An empty subject says no more than a missing one (``info.get("sub", "")`` in a verifier).
    subject = named or None
    if subject is None:
        claimed = claims.get("sub")
        if isinstance(claimed, str) and claimed:
            subject = claimed
    proven = _proven_claims(claims)
    if subject is None or proven is None:
        # Not the token itself (the key outlives it, and is digested into sealed states), nor a prefix (prefixes collide).
        subject = "token-sha256:" + hashlib.sha256(token.token.encode()).hexdigest()
    return ("agentfx.access-token", client_id, issuer, subject, frozenset(token.scopes), token.resource, proven)


def _proven_claims(claims: dict[str, Any]) -> str | None:
    """A digest of the claims that say something of the bearer; ``None`` when they are not JSON."""
    kept = {name: value for name, value in claims.items() if name not in _PER_TOKEN_CLAIMS}
    if not kept:
        return ""
    try:
        encoded = msgspec.json.encode(kept, order="sorted")
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.MsgspecError):
        return None
    return hashlib.sha256(encoded).hexdigest()


class BearerTokens:
    """Bearer-token checks for one endpoint, configured from the SDK's ``AuthSettings``.

    Args:
        verifier: The application's ``TokenVerifier``.
        auth: Where tokens come from and what this resource is:
            ``resource_server_url`` is required (it names the metadata),
            ``required_scopes`` are demanded of every token.

    Raises:
        ContractError: ``auth`` names no ``resource_server_url``, or one with a fragment.
    """

    def __init__(self, verifier: TokenVerifier, auth: AuthSettings) -> None:
        resource = auth.resource_server_url
        if resource is None:
            raise ContractError(
                "http_app(token_verifier=...) needs auth=AuthSettings(resource_server_url=...): "
                "clients find the authorization server through this resource's metadata"
            )
        if resource.fragment is not None:
            # RFC 8707 §2 and RFC 9728 §1.2: a resource identifier has no fragment;
            # clients would ask for tokens for a resource the metadata does not name.
            raise ContractError(f"AuthSettings.resource_server_url must not have a fragment, got {str(resource)!r}")
        self._backend = BearerAuthBackend(
            verifier, resource_server_url=resource if auth.validate_token_resource else None
        )
        self._required_scopes = list(auth.required_scopes or ())
        self._metadata_url = build_resource_metadata_url(resource)
        self._routes: list[Route] = create_protected_resource_routes(
            resource_url=resource,
            authorization_servers=[auth.issuer_url],
            scopes_supported=auth.required_scopes,
            resource_documentation=auth.service_documentation_url,
        )

    @property
    def metadata_url(self) -> str:
        """Where the protected-resource metadata is served (what ``WWW-Authenticate`` names)."""
        return str(self._metadata_url)

    def metadata(self, scope: Scope) -> ASGIApp | None:
        """The metadata route answering ``scope``, or ``None`` when the request is for something else."""
        for route in self._routes:
            match, _ = route.matches(scope)
            if match != Match.NONE:
                return route.handle
        return None

    async def verify(self, request: Request) -> AccessToken | None:
        """The request's valid token, or ``None`` (none sent, refused, expired, or for another resource).

        A request with more than one ``Authorization`` header is refused
        whatever they hold: which one a proxy in front checked and which one
        reaches here cannot be told apart (RFC 6750 §2 allows one token per
        request).
        """
        if len(request.headers.getlist("authorization")) > 1:
            return None
        verified = await self._backend.authenticate(request)
        if verified is None:
            return None
        _, user = verified
        token = user.access_token
        # The SDK lets a token through in the second it expires, and one
        # whose expiry is 0; RFC 7519 refuses a token on or after its expiry.
        if token.expires_at is not None and token.expires_at <= time.time():
            return None
        return token

    def guard(self, token: AccessToken | None, then: ASGIApp) -> ASGIApp:
        """``then``, behind the SDK's checks: ``401`` without a token, ``403`` without the required scopes."""
        guarded = RequireAuthMiddleware(then, self._required_scopes, self._metadata_url)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if token is not None:
                scope = {**scope, "user": AuthenticatedUser(token), "auth": AuthCredentials(token.scopes)}
            else:
                # An outer app's authentication (another backend, another
                # resource) must not stand in for the token refused here.
                scope = {key: value for key, value in scope.items() if key not in ("user", "auth")}
            await guarded(scope, receive, send)

        return app


    def expired(self) -> ASGIApp:
        """The SDK's ``401`` for a token no longer valid, with ``WWW-Authenticate`` naming the metadata."""
        return self.guard(None, _unreachable)


async def _unreachable(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError("the SDK's guard let a request without a token through")  # pragma: no cover


PrincipalFromToken = Callable[[AccessToken], "Any | Awaitable[Any]"]
"""``principal_from_token(access_token)``: the principal a verified token proves. May be async."""
