"""Human confirmation over MCP: how a ``Confirm`` answer reaches the person behind a client.

This layer owns the MCP side of DESIGN §10, on the SDK's own machinery:

- **2025-11-25 sessions** whose client declared the elicitation capability are
  asked in band: the invocation's ``confirm`` sends a form elicitation (the
  prompt, one boolean ``confirm``) and waits for it, raced by the pipeline
  against the call's signal. Accept with ``confirm: true`` approves; decline,
  cancel, ``false`` or an error answer declines.
- **2026-07-28 requests** cannot wait on the client, so a call that needs
  confirmation is answered with an ``InputRequiredResult``: the same form as
  an embedded elicitation and a ``requestState`` that the SDK's
  ``RequestStateBoundary`` seals (AES-GCM under a ``RequestStateSecurity``)
  and binds to the tool, its arguments, the authenticated principal and an
  expiry. The state inside names the capability, a digest of the arguments,
  the prompt shown and a nonce that :class:`Approvals` lets be redeemed once.
  The client's retry is verified (a forged, expired, rebound or replayed state
  is refused before anything runs) and re-runs the whole pipeline on a fresh
  Model snapshot with the person's answer: it approves only the prompt the
  person saw; a call whose prompt changed meanwhile asks again.
- Any other client gets the ``AgentConfirmationRequiredError`` result.

What a client answers is the client's word: nothing here proves that a person
saw the prompt. The default key is ephemeral, made per :func:`agentfx.mcp.server`
and held by this process only, so a retry must reach the server that asked (a
restart, or another worker, refuses it). Several processes serving one
contract must share a key through ``RequestStateSecurity(keys=[...])`` and
should bind the principal (``bind_principal``; the default binds an OAuth
caller); the single-use ledger stays per server, so there a state could be
redeemed once in each process until it expires.

It deliberately knows nothing of the pipeline's steps, audit or transports: it
builds invocations for the call handler and shapes what the runtime answered.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import mcp_types as types
import msgspec
from mcp.server.request_state import RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from .._approval import Approval, asked_again
from ..confirm import ConfirmationRequest
from ..errors import AgentConfirmationRequiredError, ContractError, DispatchError, echo

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = [
    "APPROVALS_CAPACITY",
    "FIELD",
    "INVALID_STATE",
    "Approvals",
    "LEDGER_CAPACITY",
    "Ledgers",
    "Plan",
    "bound",
    "can_elicit",
    "form",
    "plan",
    "security",
]

_logger = logging.getLogger("agentfx.mcp")

FIELD = "confirm"
"""The form's one boolean field, and the key of the embedded elicitation in an ``InputRequiredResult``."""

INVALID_STATE = "Invalid or expired requestState"
"""The SDK's frozen message for a refused ``requestState``; a replay is refused with the same words."""

APPROVALS_CAPACITY = 10_000
"""How many redeemed confirmations one server's ledger remembers within their lifetime; beyond it a retry is refused (a principal's in an HTTP app: :data:`LEDGER_CAPACITY`)."""

LEDGER_CAPACITY = 1_000
"""How many redeemed confirmations one principal's ledger remembers within their lifetime, in an HTTP app."""

_STATE_VERSION = 1


def security(given: RequestStateSecurity | None) -> RequestStateSecurity:
    """The policy that seals ``requestState``: ``given``, else a fresh process-local key.

    >>> security(None).ttl
    600.0

    Raises:
        ContractError: ``given`` is not a ``RequestStateSecurity``.
    """
    if given is None:
        return RequestStateSecurity.ephemeral()
    if not isinstance(cast(object, given), RequestStateSecurity):
        raise ContractError(
            "request_state_security takes the SDK's RequestStateSecurity (mcp.server.request_state), "
            f"such as RequestStateSecurity(keys=[...]); got {type(given).__name__}"
        )
    return given


def bound(given: RequestStateSecurity, principal: str) -> RequestStateSecurity:
    """``given`` (its key ring or codec, lifetime and audience), with every state also bound to ``principal``.

    For servers that share one policy but serve one principal each (one per
    principal's runtime over HTTP): a state sealed for one principal is
    refused for any other, whether or not ``given`` binds principals itself
    (its own binding, an OAuth caller's by default, is kept beside).

    >>> policy = RequestStateSecurity(keys=["k" * 32], bind_principal=None, ttl=60.0)
    >>> ann = bound(policy, "ann")
    >>> ann.codec is policy.codec, ann.ttl, ann.bind_principal(None)
    (True, 60.0, '["ann",null]')
    """
    outer = given.bind_principal

    def bind(ctx: ServerRequestContext[Any, Any]) -> str:
        return msgspec.json.encode([principal, None if outer is None else outer(ctx)]).decode()

    return RequestStateSecurity(codec=given.codec, ttl=given.ttl, bind_principal=bind, audience=given.audience)


def form(prompt: str) -> types.ElicitRequestFormParams:
    """The form a person confirms with: the prompt, and one boolean ``confirm`` (false unless ticked).

    >>> form("Delete it?").requested_schema["required"]
    ['confirm']
    """
    return types.ElicitRequestFormParams(
        message=prompt,
        requested_schema={
            "type": "object",
            "properties": {
                FIELD: {
                    "type": "boolean",
                    "title": "Confirm",
                    "description": "Tick to allow this action; leave unticked to refuse it.",
                    "default": False,
                }
            },
            "required": [FIELD],
        },
    )


def approved(answer: object) -> bool:
    """Whether an elicitation answer approves: accepted, with ``confirm`` exactly ``true``.

    >>> approved(types.ElicitResult(action="accept", content={"confirm": True}))
    True
    >>> approved(types.ElicitResult(action="accept", content={"confirm": "yes"}))
    False
    >>> approved(types.ElicitResult(action="decline"))
    False
    """
    if not isinstance(answer, types.ElicitResult) or answer.action != "accept" or answer.content is None:
        return False
    return answer.content.get(FIELD) is True


def can_elicit(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client declared form elicitation (an empty elicitation capability means form)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None


def _digest(arguments: object) -> str:
    encoded = msgspec.json.encode(arguments, order="sorted")
    return hashlib.sha256(encoded).hexdigest()


class _State(msgspec.Struct, frozen=True):
    """What the sealed ``requestState`` carries, in plaintext on this side of the boundary."""

    v: int
    nonce: str
    capability: str
    arguments: str
    prompt: str


class Approvals:
    """The single-use ledger of 2026-07-28 confirmations: each sealed state is redeemed once.

    The boundary has already proved that a state was sealed under this
    server's key, for this tool, these arguments and this principal, and is
    still in time; the ledger refuses a second redemption of the same state (a
    replay). It remembers a redeemed nonce for ``ttl`` (after which the seal
    itself expires) and at most ``capacity`` of them: when full, a redemption
    is refused rather than forgotten, so memory stays bounded and a replay is
    never let through. ``ttl`` is counted on both clocks: the seal's expiry is
    checked against the wall clock, so a nonce is forgotten only once the wall
    clock has passed it too (set back after a redemption, it would otherwise
    make a seal the ledger forgot valid again).

    >>> ledger = Approvals(ttl=60.0, clock=lambda: 0.0)
    >>> state = ledger.mint("remove", {"item": "a"}, "Remove a?")
    >>> ledger.redeem(state, "remove", {"item": "a"})
    'Remove a?'
    >>> ledger.redeem(state, "remove", {"item": "a"}) is None
    True
    """

    def __init__(
        self,
        *,
        ttl: float,
        capacity: int = APPROVALS_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._ttl = ttl
        self._capacity = capacity
        self._clock = clock
        self._wall_clock = wall_clock
        # nonce -> when it may be forgotten, on the monotonic clock and on the wall clock.
        self._redeemed: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def __len__(self) -> int:
        self._expire()
        return len(self._redeemed)

    def _expire(self) -> None:
        now, wall = self._clock(), self._wall_clock()
        redeemed = self._redeemed
        # Recorded in order with one ttl, so the oldest expire first (on the
        # wall clock too, unless it was set back: then some are kept longer).
        while redeemed:
            nonce, (expires, wall_expires) = next(iter(redeemed.items()))
            if expires > now or wall_expires > wall:
                break
            del redeemed[nonce]

    def mint(self, capability: str, arguments: object, prompt: str) -> str:
        """A fresh plaintext state for one confirmation of this exact call."""
        state = _State(_STATE_VERSION, secrets.token_urlsafe(16), capability, _digest(arguments), prompt)
        return msgspec.json.encode(state).decode()

    def redeem(self, state: str, capability: str, arguments: object) -> str | None:
        """The prompt the person answered, the first time ``state`` comes back for this exact call.

        ``None`` for a state that is malformed, names another capability or
        other arguments, was redeemed before, or cannot be recorded (the ledger is full).
        """
        self._expire()
        try:
            decoded = msgspec.json.decode(state, type=_State)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        if decoded.v != _STATE_VERSION or decoded.capability != capability or decoded.arguments != _digest(arguments):
            return None
        if decoded.nonce in self._redeemed:
            return None
        if len(self._redeemed) >= self._capacity:
            _logger.warning("too many confirmations redeemed within their lifetime; refusing %r", capability)
            return None
        self._redeemed[decoded.nonce] = (self._clock() + self._ttl, self._wall_clock() + self._ttl)
        return decoded.prompt


class Ledgers:
    """One :class:`Approvals` per principal, for an app whose principals' servers come and go.

    A principal's ledger outlives its server, so a state it redeemed is
    refused to the server made for it next; each principal has a ledger of
    its own (of ``capacity`` states), so one principal filling its ledger
    refuses only its own retries. A ledger is let go once no server holds
    it and it remembers nothing (each of its states has expired). At most
    ``max_ledgers`` are kept: past that, a principal new to the app gets a
    ledger that keeps nothing, which refuses its retries (a replay is never
    let through), until others are let go.

    >>> ledgers = Ledgers(ttl=60.0, max_ledgers=2)
    >>> ann, bea = ledgers.hold("ann"), ledgers.hold("bea")
    >>> ann is ledgers.hold("ann"), ann is bea
    (True, False)
    >>> cy = ledgers.hold("cy")  # the table is full: a ledger that keeps nothing
    >>> cy.redeem(cy.mint("remove", {}, "Sure?"), "remove", {}) is None
    True
    >>> for name, ledger in [("ann", ann), ("ann", ann), ("bea", bea), ("cy", cy)]:
    ...     ledgers.release(name, ledger)
    >>> len(ledgers)
    0
    """

    __slots__ = ("_capacity", "_clock", "_held", "_ledgers", "_max", "_ttl", "_wall_clock")

    def __init__(
        self,
        *,
        ttl: float,
        max_ledgers: int,
        capacity: int = LEDGER_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._ttl = ttl
        self._max = max_ledgers
        self._capacity = capacity
        self._clock = clock
        self._wall_clock = wall_clock
        self._ledgers: dict[str, Approvals] = {}
        self._held: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._ledgers)

    def hold(self, principal: str) -> Approvals:
        """``principal``'s ledger, for a server made for it; :meth:`release` it when that server ends."""
        self._forget_idle()
        ledger = self._ledgers.get(principal)
        if ledger is None:
            if len(self._ledgers) >= self._max:
                _logger.warning("too many principals' confirmation ledgers are kept; this one's retries are refused")
                return Approvals(ttl=self._ttl, capacity=0, clock=self._clock, wall_clock=self._wall_clock)
            ledger = self._ledgers[principal] = Approvals(
                ttl=self._ttl, capacity=self._capacity, clock=self._clock, wall_clock=self._wall_clock
            )
        self._held[principal] = self._held.get(principal, 0) + 1
        return ledger

    def release(self, principal: str, ledger: Approvals) -> None:
        """A server made for ``principal``, given ``ledger`` by :meth:`hold`, ended.

        Counted down only for the ledger kept for ``principal``: a server given
        one that keeps nothing (the table was full) held nothing, and its end
        must not let go of the ledger a later server of the same principal
        holds, which would forget the states that server redeemed.
        """
        if self._ledgers.get(principal) is not ledger:
            return
        held = self._held.get(principal, 0) - 1
        if held > 0:
            self._held[principal] = held
            return
        self._held.pop(principal, None)
        self._forget_idle()

    def _forget_idle(self) -> None:
        # Held by no server and remembering nothing: nothing a new one could refuse.
        idle = [name for name, ledger in self._ledgers.items() if name not in self._held and not len(ledger)]
        for name in idle:
            del self._ledgers[name]


@dataclass(slots=True)
class Plan:
    """How one ``tools/call`` handles confirmation.

    Attributes:
        confirm: The invocation's ``confirm``, or ``None`` when it cannot ask.
        ask_later: A ``Confirm`` answer becomes an ``InputRequiredResult`` (2026-07-28
            with elicitation) instead of the confirmation-required result.
        declined: On a retry the person declined, the prompt they declined:
            the call is refused, even if it would no longer ask.
    """

    confirm: Callable[[ConfirmationRequest], Any] | None
    ask_later: bool
    declined: str | None = None

    @property
    def changed(self) -> str | None:
        """On a retry, the prompt it met that is not the one the person answered: they must be asked again."""
        confirm = self.confirm
        return confirm.changed if isinstance(confirm, Approval) else None

    def refusal(
        self, approvals: Approvals, name: str, arguments: object, error: DispatchError
    ) -> DispatchError | types.InputRequiredResult:
        """What answers the refusal ``error``: itself, the confirmation it needs, or an ``InputRequiredResult`` asking it.

        A retry that met a prompt the person did not answer was refused
        ``Declined`` by the pipeline; nobody declined it, so it needs a person
        as a first call would (:func:`~agentfx._approval.asked_again`): asked
        here when this call asks later, the confirmation-required answer
        otherwise.
        """
        needs = asked_again(self.changed, error)
        if not (self.ask_later and isinstance(needs, AgentConfirmationRequiredError)):
            return needs
        state = approvals.mint(name, arguments, needs.prompt)
        return types.InputRequiredResult(
            input_requests={FIELD: types.ElicitRequest(params=form(needs.prompt))},
            request_state=state,
        )


# Shared by every call that is not a retry: only a retry's plan is ever changed.
_CANNOT_ASK = Plan(None, False)
_ASK_LATER = Plan(None, True)


def plan(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, approvals: Approvals
) -> Plan:
    """Decide how this call confirms, redeeming the state of a 2026-07-28 retry.

    Raises:
        MCPError: ``-32602`` for a retry whose ``requestState`` this server did
            not mint for this exact call, or already redeemed. Nothing runs.
    """
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    state = params.request_state
    if state is not None:
        # The boundary verified the seal, expiry, tool, arguments and principal;
        # the ledger makes the state single-use and checks its own binding too.
        arguments = params.arguments if params.arguments is not None else {}
        shown = approvals.redeem(state, params.name, arguments)
        if shown is None:
            _logger.warning("requestState for %r was not minted for this call or was already used", echo(params.name))
            raise MCPError(code=types.INVALID_PARAMS, message=INVALID_STATE, data={"reason": "invalid_request_state"})
        answer = approved(_response(params.input_responses))
        # The answer covers the prompt shown, and nothing else; a "no" holds
        # even if the Model moved on so that the call would no longer ask.
        return Plan(Approval(shown, answer=answer), modern and can_elicit(ctx), declined=None if answer else shown)
    if not can_elicit(ctx):
        return _CANNOT_ASK
    if modern:
        return _ASK_LATER
    if not ctx.session.can_send_request:
        # A 2025-11-25 transport without a back-channel (stateless HTTP): nobody can be asked now.
        return _CANNOT_ASK

    async def ask(request: ConfirmationRequest) -> bool:
        try:
            answer = await ctx.session.elicit_form(
                request.prompt, form(request.prompt).requested_schema, related_request_id=ctx.request_id
            )
        except MCPError as refused:
            # The client answered with an error: nobody approved.
            # The client's words, bounded and quoted: a newline in them must not forge a line of the log.
            _logger.info("the client refused to ask about %r: %r", request.capability, echo(refused.error.message))
            return False
        except ValidationError:
            # The client's answer is not an elicitation result at all: nobody
            # approved. Its text would quote what the client sent.
            _logger.warning("the client answered the confirmation of %r with something that is not an answer", request.capability)
            return False
        return approved(answer)

    return Plan(ask, False)


def _response(responses: Mapping[str, object] | None) -> object:
    return None if responses is None else responses.get(FIELD)
