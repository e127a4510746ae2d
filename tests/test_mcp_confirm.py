"""Human confirmation over MCP (DESIGN §10), in-process with the SDK's real ``mcp.Client``.

``legacy`` is a 2025-11-25 session (the person is asked in band with a form
elicitation); ``auto`` is the 2026-07-28 per-request path (the call answers
``InputRequiredResult`` with a sealed ``requestState`` and the client's retry
carries the answer). Every test runs on asyncio and trio.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp
import mcp_types as types
import msgspec
import pytest
from mcp.client.session import ClientRequestContext
from mcp.server.request_state import RequestStateSecurity

import agentfx
from agentfx.app import App
from agentfx.audit import AuditEntry, AuditLog
from agentfx.mcp import server
from agentfx.mcp import _confirm
from agentfx.program import Program
from agentfx.runtime import AgentRuntime

pytestmark = pytest.mark.anyio

MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])
INVALID_STATE = "Invalid or expired requestState"


class Model(msgspec.Struct, frozen=True):
    items: tuple[str, ...] = ("milk", "tea", "bread")
    selected: str | None = None
    spare: tuple[str, ...] = ()


class User(msgspec.Struct, frozen=True):
    name: str
    may_remove: bool = True


class Removed(msgspec.Struct, frozen=True, tag=True):
    """Remove an item."""

    item: str


class Selected(msgspec.Struct, frozen=True, tag=True):
    """Select an item."""

    item: str


class RemovedSelected(msgspec.Struct, frozen=True, tag=True):
    item: str


class NoInput(msgspec.Struct, frozen=True):
    """Nothing to send."""


class Spared(msgspec.Struct, frozen=True, tag=True):
    """Mark an item as spare: removing it asks nobody. Not exposed to agents."""

    item: str


Message = Removed | Selected | RemovedSelected | Spared


def update(model: Model, message: Message) -> Model:
    match message:
        case Removed(item=item) | RemovedSelected(item=item):
            return msgspec.structs.replace(model, items=tuple(i for i in model.items if i != item), selected=None)
        case Selected(item=item):
            return msgspec.structs.replace(model, selected=item)
        case Spared(item=item):
            return msgspec.structs.replace(model, spare=(*model.spare, item))


Items = agentfx.for_model(Model, principal=User)


def _may_remove(req: agentfx.AuthorizationRequest[User, Removed, Model]) -> bool | agentfx.Confirm:
    if not req.principal.may_remove:
        return False
    if req.input.item in req.model.spare:
        return True
    return agentfx.Confirm(f'Remove "{req.input.item}"?')


def _may_remove_selected(req: agentfx.AuthorizationRequest[User, NoInput, Model]) -> agentfx.Confirm:
    return agentfx.Confirm(f'Remove the selected item "{req.model.selected}"?')


Contract = Items.define(
    messages=Items.expose(
        Message,
        Items.variant(
            Removed,
            "Remove an item",
            name="remove",
            available=lambda model: bool(model.items),
            authorize=_may_remove,
            may_confirm=True,
        ),
        Items.variant(Selected, "Select an item", name="select"),
        Items.variant(
            RemovedSelected,
            "Remove the selected item",
            name="remove_selected",
            available=lambda model: model.selected is not None,
            input=NoInput,
            to_message=lambda _, ctx: RemovedSelected(item=ctx.model.selected or ""),
            authorize=_may_remove_selected,
        ),
    ),
)

app = App(Contract, init=Model(), update=update, principal=User("ada"))


@dataclass
class Person:
    """The client's elicitation callback: records each question and answers as told."""

    answer: Callable[[types.ElicitRequestFormParams], types.ElicitResult | types.ErrorData] = field(
        default=lambda _: types.ElicitResult(action="accept", content={"confirm": True})
    )
    asked: list[types.ElicitRequestFormParams] = field(default_factory=lambda: [])
    before_answering: Callable[[], Any] | None = None

    async def __call__(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        if self.before_answering is not None:
            await self.before_answering()
        return self.answer(params)


def answering(action: str, content: dict[str, Any] | None = None) -> Callable[[object], types.ElicitResult]:
    return lambda _: types.ElicitResult(action=action, content=content)  # pyright: ignore[reportArgumentType]


@dataclass
class Connected:
    client: mcp.Client
    runtime: AgentRuntime[Model, User]
    program: Program[Model, Any]
    log: AuditLog


@asynccontextmanager
async def connected(
    mode: str,
    person: Person | None = None,
    *,
    principal: User = User("ada"),
    security: RequestStateSecurity | None = None,
) -> AsyncGenerator[Connected]:
    log = agentfx.audit_log(principal=lambda user: user.name)
    async with app.program() as program:
        runtime = app.bind(program, principal=principal, audit=log)
        async with mcp.Client(
            server(runtime, request_state_security=security), mode=mode, elicitation_callback=person
        ) as client:
            yield Connected(client, runtime, program, log)


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def outcomes(log: AuditLog) -> list[tuple[str, str, str, bool]]:
    return [(e.capability, e.decision, e.outcome, e.confirmed is True) for e in log.entries()]


def confirmed_entries(log: AuditLog) -> list[AuditEntry]:
    return [e for e in log.entries() if e.confirmed is True]


# --- both revisions, through the client's own loop --------------------------------------------------


@MODES
async def test_an_approval_dispatches_and_the_person_saw_a_one_boolean_form(mode: str) -> None:
    person = Person()
    async with connected(mode, person) as c:
        result = await c.client.call_tool("remove", {"item": "milk"})
        assert not result.is_error
        assert text(result) == "Dispatched Removed"
        assert c.program.model.items == ("tea", "bread")
        [form] = person.asked
        assert form.message == 'Remove "milk"?'
        schema = form.requested_schema
        assert schema["type"] == "object"
        assert list(schema["properties"]) == ["confirm"]
        assert schema["properties"]["confirm"]["type"] == "boolean"
        assert schema["required"] == ["confirm"]
        expected = [("remove", "dispatched", "dispatched", True)]
        if mode == "auto":
            # The first round asked and sent nothing; the retry re-ran the pipeline.
            expected.insert(0, ("remove", "refused", "AgentConfirmationRequiredError", False))
        assert outcomes(c.log) == expected


def _refuse_to_ask(_: object) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message="no")


@MODES
@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(answering("decline"), id="decline"),
        pytest.param(answering("cancel"), id="cancel"),
        pytest.param(answering("accept", {"confirm": False}), id="accept-false"),
        pytest.param(answering("accept", {"confirm": "true"}), id="accept-a-string"),
        pytest.param(answering("accept", {}), id="accept-nothing"),
        pytest.param(_refuse_to_ask, id="error-answer"),
    ],
)
async def test_anything_but_an_approval_declines_and_sends_nothing(
    mode: str, answer: Callable[[types.ElicitRequestFormParams], types.ElicitResult | types.ErrorData]
) -> None:
    person = Person(answer=answer)
    async with connected(mode, person) as c:
        try:
            result = await c.client.call_tool("remove", {"item": "milk"})
        except mcp.MCPError as refused:
            # A 2026 client gives up itself when its own callback answers an error.
            assert mode == "auto"
            assert refused.error.message == "no"
        else:
            assert result.is_error
            assert text(result) == 'Declined: Remove "milk"?'
            assert result.structured_content == {
                "_tag": "AgentAuthorizationError",
                "capability": "remove",
                "tag": "Removed",
                "message": 'Declined: Remove "milk"?',
            }
        assert c.program.model.items == ("milk", "tea", "bread")
        assert confirmed_entries(c.log) == []
        assert len(person.asked) == 1


@MODES
async def test_a_client_without_elicitation_is_told_the_call_needs_confirmation(mode: str) -> None:
    async with connected(mode) as c:
        result = await c.client.call_tool("remove", {"item": "milk"})
        assert result.is_error
        assert text(result) == '"remove" needs a person to confirm: Remove "milk"?'
        failure = msgspec.convert(result.structured_content, agentfx.DispatchError)
        assert failure == agentfx.AgentConfirmationRequiredError.of("remove", "Removed", 'Remove "milk"?')
        assert c.program.model.items == ("milk", "tea", "bread")
        assert outcomes(c.log) == [("remove", "refused", "AgentConfirmationRequiredError", False)]


@MODES
async def test_a_refusal_is_never_asked_about(mode: str) -> None:
    person = Person()
    async with connected(mode, person, principal=User("guest", may_remove=False)) as c:
        result = await c.client.call_tool("remove", {"item": "milk"})
        assert text(result) == 'Not authorized to invoke "remove"'
        assert person.asked == []
        assert c.program.model.items == ("milk", "tea", "bread")


@MODES
async def test_the_message_comes_from_the_snapshot_taken_before_asking(mode: str) -> None:
    # The Model changes while the person decides: in band the call keeps its
    # snapshot; on 2026 the retry re-reads the Model and, since the prompt
    # changed, asks again about what it would now do.
    holder: list[Program[Model, Any]] = []

    async def select_bread() -> None:
        if holder[0].model.selected == "milk":
            await holder[0].send(Selected(item="bread"))

    person = Person(before_answering=select_bread)
    async with connected(mode, person) as c:
        holder.append(c.program)
        await c.program.send(Selected(item="milk"))
        result = await c.client.call_tool("remove_selected", {})
        assert not result.is_error, text(result)
        prompts = [form.message for form in person.asked]
        if mode == "legacy":
            assert prompts == ['Remove the selected item "milk"?']
            assert c.program.model.items == ("tea", "bread")
        else:
            assert prompts == ['Remove the selected item "milk"?', 'Remove the selected item "bread"?']
            assert c.program.model.items == ("milk", "tea")
            assert [o[2] for o in outcomes(c.log)] == [
                "AgentConfirmationRequiredError",
                "AgentAuthorizationError",
                "dispatched",
            ]


async def test_a_cancelled_call_stops_asking_and_sends_nothing() -> None:
    asking = anyio.Event()

    async def never() -> None:
        asking.set()
        await anyio.sleep_forever()

    person = Person(before_answering=never)
    async with connected("legacy", person) as c:
        async with anyio.create_task_group() as tg:
            tg.start_soon(c.client.call_tool, "remove", {"item": "milk"})
            with anyio.fail_after(5):
                await asking.wait()
            tg.cancel_scope.cancel()
        with anyio.fail_after(5):
            while not c.log.entries():
                await anyio.sleep(0.01)
        assert outcomes(c.log) == [("remove", "refused", "AgentCancelledError", False)]
        assert c.program.model.items == ("milk", "tea", "bread")


# --- 2026-07-28: the sealed requestState, driven by hand --------------------------------------------


async def first_round(c: Connected, arguments: dict[str, Any]) -> types.InputRequiredResult:
    result = await c.client.session.call_tool("remove", arguments, allow_input_required=True)
    assert isinstance(result, types.InputRequiredResult), result
    assert result.input_requests is not None and result.request_state is not None
    [(key, request)] = result.input_requests.items()
    assert key == "confirm"
    assert isinstance(request, types.ElicitRequest)
    assert isinstance(request.params, types.ElicitRequestFormParams)
    return result


APPROVE: types.InputResponses = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}


DECLINE: types.InputResponses = {"confirm": types.ElicitResult(action="decline")}


async def retry(
    c: Connected, arguments: dict[str, Any], state: str, answer: types.InputResponses = APPROVE
) -> types.CallToolResult | types.InputRequiredResult:
    return await c.client.session.call_tool(
        "remove", arguments, input_responses=answer, request_state=state, allow_input_required=True
    )


async def test_the_state_is_sealed_and_says_nothing_readable() -> None:
    async with connected("auto", Person()) as c:
        first = await first_round(c, {"item": "milk"})
        assert first.request_state is not None
        assert "milk" not in first.request_state and "remove" not in first.request_state
        assert outcomes(c.log) == [("remove", "refused", "AgentConfirmationRequiredError", False)]
        approved = await retry(c, {"item": "milk"}, first.request_state)
        assert isinstance(approved, types.CallToolResult) and not approved.is_error
        assert c.program.model.items == ("tea", "bread")


def _made_up(state: str) -> str:
    return "v1." + "A" * 60


def _extended(state: str) -> str:
    return state + "A"


def _plaintext(state: str) -> str:
    return msgspec.json.encode({"v": 1}).decode()


def _unsealed(state: str) -> str:
    # Exactly what the server would seal, but unsealed: only the seal makes it an approval.
    return _confirm.Approvals(ttl=60.0).mint("remove", {"item": "milk"}, 'Remove "milk"?')


def _forge(state: str) -> str:
    middle = len(state) // 2
    return state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(_forge, id="one-character-changed"),
        pytest.param(_made_up, id="made-up"),
        pytest.param(_extended, id="extended"),
        pytest.param(_plaintext, id="plaintext"),
        pytest.param(_unsealed, id="unsealed-but-well-formed"),
    ],
)
async def test_a_forged_request_state_is_refused_and_nothing_is_sent(tamper: Callable[[str], str]) -> None:
    async with connected("auto", Person()) as c:
        first = await first_round(c, {"item": "milk"})
        assert first.request_state is not None
        with pytest.raises(mcp.MCPError) as refused:
            await retry(c, {"item": "milk"}, tamper(first.request_state))
        assert refused.value.error.code == types.INVALID_PARAMS
        assert refused.value.error.message == INVALID_STATE
        assert c.program.model.items == ("milk", "tea", "bread")
        assert confirmed_entries(c.log) == []


async def test_a_replayed_request_state_is_refused_and_sends_nothing_more() -> None:
    async with connected("auto", Person()) as c:
        await c.program.send(Selected(item="tea"))
        first = await first_round(c, {"item": "milk"})
        assert first.request_state is not None
        approved = await retry(c, {"item": "milk"}, first.request_state)
        assert isinstance(approved, types.CallToolResult) and not approved.is_error
        sent = len(c.log.entries())
        with pytest.raises(mcp.MCPError) as refused:
            await retry(c, {"item": "milk"}, first.request_state)
        assert refused.value.error.message == INVALID_STATE
        # Refused before the runtime ran: no new audit entry, no second Message.
        assert len(c.log.entries()) == sent
        assert len(confirmed_entries(c.log)) == 1


async def test_an_approval_for_one_payload_replayed_with_another_is_refused() -> None:
    async with connected("auto", Person()) as c:
        first = await first_round(c, {"item": "milk"})
        assert first.request_state is not None
        with pytest.raises(mcp.MCPError) as refused:
            await retry(c, {"item": "bread"}, first.request_state)
        assert refused.value.error.message == INVALID_STATE
        assert c.program.model.items == ("milk", "tea", "bread")
        # Still unused: the right payload redeems it.
        approved = await retry(c, {"item": "milk"}, first.request_state)
        assert isinstance(approved, types.CallToolResult) and not approved.is_error
        assert c.program.model.items == ("tea", "bread")


async def test_an_approval_for_one_capability_is_refused_for_another() -> None:
    async with connected("auto", Person()) as c:
        await c.program.send(Selected(item="milk"))
        first = await first_round(c, {"item": "milk"})
        assert first.request_state is not None
        with pytest.raises(mcp.MCPError) as refused:
            await c.client.session.call_tool(
                "remove_selected", {}, input_responses=APPROVE, request_state=first.request_state, allow_input_required=True
            )
        assert refused.value.error.message == INVALID_STATE
        assert c.program.model.items == ("milk", "tea", "bread")


async def test_a_state_sealed_by_another_server_is_refused() -> None:
    async with connected("auto", Person()) as one, connected("auto", Person()) as other:
        first = await first_round(one, {"item": "milk"})
        assert first.request_state is not None
        with pytest.raises(mcp.MCPError) as refused:
            await retry(other, {"item": "milk"}, first.request_state)
        assert refused.value.error.message == INVALID_STATE
        assert other.program.model.items == ("milk", "tea", "bread")


async def test_a_shared_key_lets_another_server_redeem_the_state_once() -> None:
    key = b"k" * 32
    async with (
        connected("auto", Person(), security=RequestStateSecurity(keys=[key])) as one,
        connected("auto", Person(), security=RequestStateSecurity(keys=[key])) as other,
    ):
        first = await first_round(one, {"item": "milk"})
        assert first.request_state is not None
        approved = await retry(other, {"item": "milk"}, first.request_state)
        assert isinstance(approved, types.CallToolResult) and not approved.is_error
        assert other.program.model.items == ("tea", "bread")
        with pytest.raises(mcp.MCPError):
            await retry(other, {"item": "milk"}, first.request_state)


async def test_a_retry_meeting_another_prompt_where_nobody_can_be_asked_needs_confirmation_not_declined() -> None:
    # The retry comes from a client that cannot be asked (no elicitation), and
    # the selection changed: nobody declined anything, so the call needs a person.
    key = b"k" * 32
    async with (
        connected("auto", Person(), security=RequestStateSecurity(keys=[key])) as one,
        connected("auto", None, security=RequestStateSecurity(keys=[key])) as other,
    ):
        for c in (one, other):
            await c.program.send(Selected(item="milk"))
        first = await one.client.session.call_tool("remove_selected", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
        await other.program.send(Selected(item="bread"))
        result = await other.client.session.call_tool(
            "remove_selected", {}, input_responses=APPROVE, request_state=first.request_state, allow_input_required=True
        )
        assert isinstance(result, types.CallToolResult) and result.is_error
        assert text(result) == '"remove_selected" needs a person to confirm: Remove the selected item "bread"?'
        assert result.structured_content is not None
        assert result.structured_content["_tag"] == "AgentConfirmationRequiredError"
        assert other.program.model.items == ("milk", "tea", "bread")


async def test_the_retry_rereads_the_model_and_reruns_every_step() -> None:
    async with connected("auto", Person()) as c:
        first = await first_round(c, {"item": "milk"})
        assert first.request_state is not None
        # Meanwhile, every item went: the capability is no longer available.
        for item in ("milk", "tea", "bread"):
            await c.program.send(Removed(item=item))
        result = await retry(c, {"item": "milk"}, first.request_state)
        assert isinstance(result, types.CallToolResult)
        assert text(result) == 'Capability "remove" is not available right now'
        assert confirmed_entries(c.log) == []


async def test_a_declined_retry_is_declined() -> None:
    async with connected("auto", Person()) as c:
        first = await first_round(c, {"item": "milk"})
        assert first.request_state is not None
        result = await retry(c, {"item": "milk"}, first.request_state, DECLINE)
        assert isinstance(result, types.CallToolResult)
        assert text(result) == 'Declined: Remove "milk"?'
        assert c.program.model.items == ("milk", "tea", "bread")


async def test_a_declined_retry_is_declined_even_when_the_call_would_no_longer_ask() -> None:
    async with connected("auto", Person()) as c:
        first = await first_round(c, {"item": "milk"})
        assert first.request_state is not None
        # Meanwhile the Model moved on so that authorize would now allow the call outright.
        await c.program.send(Spared(item="milk"))
        result = await retry(c, {"item": "milk"}, first.request_state, DECLINE)
        assert isinstance(result, types.CallToolResult)
        assert text(result) == 'Declined: Remove "milk"?'
        assert c.program.model.items == ("milk", "tea", "bread")
        assert outcomes(c.log)[-1] == ("remove", "refused", "AgentAuthorizationError", False)
        # The same call, made now, is allowed outright: only the person's "no" stopped the retry.
        done = await c.client.session.call_tool("remove", {"item": "milk"}, allow_input_required=True)
        assert isinstance(done, types.CallToolResult) and not done.is_error
        assert c.program.model.items == ("tea", "bread")


async def test_a_retry_without_an_answer_is_declined() -> None:
    async with connected("auto", Person()) as c:
        first = await first_round(c, {"item": "milk"})
        assert first.request_state is not None
        result = await c.client.session.call_tool(
            "remove", {"item": "milk"}, request_state=first.request_state, allow_input_required=True
        )
        assert isinstance(result, types.CallToolResult)
        assert text(result) == 'Declined: Remove "milk"?'
        assert c.program.model.items == ("milk", "tea", "bread")


async def test_a_legacy_session_never_answers_input_required() -> None:
    async with connected("legacy", Person()) as c:
        result = await c.client.session.call_tool("remove", {"item": "milk"}, allow_input_required=True)
        assert isinstance(result, types.CallToolResult)
        assert text(result) == "Dispatched Removed"


# --- the ledger -------------------------------------------------------------------------------------


def test_the_ledger_forgets_a_redeemed_state_only_once_its_seal_has_expired() -> None:
    now = [0.0]
    ledger = _confirm.Approvals(ttl=10.0, clock=lambda: now[0], wall_clock=lambda: 1_000.0 + now[0])
    state = ledger.mint("remove", {"item": "a"}, "Remove a?")
    assert ledger.redeem(state, "remove", {"item": "a"}) == "Remove a?"
    now[0] = 9.0
    assert ledger.redeem(state, "remove", {"item": "a"}) is None
    assert len(ledger) == 1
    now[0] = 20.0
    assert len(ledger) == 0


def test_a_wall_clock_set_back_after_a_redemption_keeps_the_state_refused() -> None:
    # The seal's expiry is read on the wall clock: set back an hour, a seal
    # past its ttl on the monotonic clock is in time again, and the ledger
    # must still remember its nonce.
    now, wall = [0.0], [5_000.0]
    ledger = _confirm.Approvals(ttl=10.0, clock=lambda: now[0], wall_clock=lambda: wall[0])
    state = ledger.mint("remove", {"item": "a"}, "Remove a?")
    assert ledger.redeem(state, "remove", {"item": "a"}) == "Remove a?"
    now[0], wall[0] = 20.0, 5_000.0 - 3_600.0 + 20.0
    assert ledger.redeem(state, "remove", {"item": "a"}) is None
    assert len(ledger) == 1
    wall[0] = 5_020.0
    assert len(ledger) == 0


def test_a_full_ledger_refuses_rather_than_forgets() -> None:
    ledger = _confirm.Approvals(ttl=10.0, capacity=2, clock=lambda: 0.0)
    states = [ledger.mint("remove", {"item": str(i)}, f"Remove {i}?") for i in range(3)]
    assert ledger.redeem(states[0], "remove", {"item": "0"}) == "Remove 0?"
    assert ledger.redeem(states[1], "remove", {"item": "1"}) == "Remove 1?"
    assert ledger.redeem(states[2], "remove", {"item": "2"}) is None
    assert ledger.redeem(states[0], "remove", {"item": "0"}) is None


def test_a_server_given_a_keep_nothing_ledger_never_lets_go_of_its_principals_real_one() -> None:
    # One room: b's first server gets a ledger that keeps nothing; once a is
    # gone, b's second server (the first still closing) gets the real one.
    # The first one's end must not let the second one's ledger go, or a state
    # the second redeemed would be redeemable again by b's next server.
    ledgers = _confirm.Ledgers(ttl=600.0, max_ledgers=1)
    a = ledgers.hold("a")
    first = ledgers.hold("b")
    ledgers.release("a", a)
    second = ledgers.hold("b")
    assert first is not second
    ledgers.release("b", first)
    state = second.mint("remove", {"item": "milk"}, 'Remove "milk"?')
    assert second.redeem(state, "remove", {"item": "milk"}) == 'Remove "milk"?'
    ledgers.release("b", second)
    assert ledgers.hold("b").redeem(state, "remove", {"item": "milk"}) is None
    assert len(ledgers) == 1


def test_the_ledger_checks_its_own_binding_too() -> None:
    ledger = _confirm.Approvals(ttl=10.0)
    state = ledger.mint("remove", {"item": "a", "n": 1}, "Remove a?")
    assert ledger.redeem(state, "remove", {"item": "b", "n": 1}) is None
    assert ledger.redeem(state, "other", {"item": "a", "n": 1}) is None
    assert ledger.redeem("not json", "remove", {}) is None
    # Argument order does not matter: the digest is of the canonical encoding.
    assert ledger.redeem(state, "remove", {"n": 1, "item": "a"}) == "Remove a?"


# --- plans for the cases a connected client does not reach ------------------------------------------


def _context(protocol_version: str, *, elicitation: types.ElicitationCapability | None, back_channel: bool) -> Any:
    from types import SimpleNamespace

    capabilities = types.ClientCapabilities(elicitation=elicitation)
    session = SimpleNamespace(client_capabilities=capabilities, can_send_request=back_channel)
    return SimpleNamespace(session=session, protocol_version=protocol_version, request_id=1)


def test_a_session_without_a_back_channel_cannot_ask_in_band() -> None:
    ledger = _confirm.Approvals(ttl=60.0)
    params = types.CallToolRequestParams(name="remove", arguments={"item": "milk"})
    form_only = types.ElicitationCapability(form=types.FormElicitationCapability())
    stateless = _confirm.plan(_context("2025-11-25", elicitation=form_only, back_channel=False), params, ledger)
    assert (stateless.confirm, stateless.ask_later) == (None, False)
    duplex = _confirm.plan(_context("2025-11-25", elicitation=form_only, back_channel=True), params, ledger)
    assert duplex.confirm is not None and not duplex.ask_later


def test_a_client_that_can_only_open_urls_is_not_sent_a_form() -> None:
    ledger = _confirm.Approvals(ttl=60.0)
    params = types.CallToolRequestParams(name="remove", arguments={"item": "milk"})
    url_only = types.ElicitationCapability(url=types.UrlElicitationCapability())
    for version in ("2025-11-25", "2026-07-28"):
        plan = _confirm.plan(_context(version, elicitation=url_only, back_channel=True), params, ledger)
        assert (plan.confirm, plan.ask_later) == (None, False)
    # An empty elicitation capability means form, as the specification says.
    empty = _confirm.plan(_context("2026-07-28", elicitation=types.ElicitationCapability(), back_channel=True), params, ledger)
    assert empty.ask_later
