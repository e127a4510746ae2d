"""``App``: a contract served over the reference program."""

from __future__ import annotations

from typing import Any, cast

import msgspec
import pytest

import agentfx
from agentfx.app import App
from agentfx.invocation import Invocation

pytestmark = pytest.mark.anyio


class User(msgspec.Struct, frozen=True):
    name: str


class Counted(msgspec.Struct, frozen=True, tag=True):
    by: int


class Reset(msgspec.Struct, frozen=True, tag=True):
    pass


Message = Counted | Reset


def update(model: int, message: Message) -> int:
    match message:
        case Counted(by=by):
            return model + by
        case Reset():
            return 0


seen: list[object] = []


def remember(request: agentfx.AuthorizationRequest[User, Reset, int]) -> bool:
    seen.append(request.principal)
    return True


Counter = agentfx.for_model(int, principal=User)
counter = Counter.define(
    Counter.expose(
        Message,
        Counter.variant(Counted, "Count up"),
        Counter.variant(Reset, "Start again", authorize=remember),
    )
)


@pytest.fixture(autouse=True)
def forget() -> None:
    seen.clear()


async def test_run_starts_the_program_and_binds_the_runtime() -> None:
    app = App(counter, init=10, update=update)
    async with app.run() as runtime:
        result = await runtime.messages.call(Counted, {"by": 5})
        assert (result.name, runtime.host.model()) == ("counted", 15)
        await runtime.messages.call(Reset, {})
        assert runtime.host.model() == 0
    assert seen == [None], "without a principal every invocation has the principal None"


async def test_a_constant_principal_is_every_invocations_principal() -> None:
    ann = User("ann")
    async with App(counter, 0, update, principal=ann).run() as runtime:
        await runtime.messages.call(Reset, {})
        await runtime.messages.call(Reset, {})
    assert seen == [ann, ann]


async def test_a_resolver_is_called_with_each_invocation() -> None:
    def resolve(invocation: Invocation) -> User:
        return User(f"{invocation.transport}:{invocation.id}")

    async with App(counter, 0, update, principal=resolve).run() as runtime:
        await runtime.messages.call(Reset, {}, Invocation(id="a", transport="test"))
        await runtime.messages.call(Reset, {}, Invocation(id="b", transport="test"))
    assert seen == [User("test:a"), User("test:b")]


async def test_run_can_override_the_principal_and_the_audit_sink() -> None:
    own, other = agentfx.audit_log(), agentfx.audit_log()
    app = App(counter, 0, update, principal=User("ann"), audit=own)
    async with app.run(principal=User("gus"), audit=other) as runtime:
        await runtime.messages.call(Reset, {})
    async with app.run(principal=None) as runtime:
        await runtime.messages.call(Reset, {})
    assert seen == [User("gus"), None]
    assert (len(own.entries()), len(other.entries())) == (1, 1)


async def test_runtimes_bound_to_one_program_share_its_model() -> None:
    app = App(counter, 0, update)
    async with app.program() as program:
        first = app.bind(program, principal=User("ann"))
        second = app.bind(program, principal=User("gus"))
        await first.messages.call(Counted, {"by": 2})
        await second.messages.call(Counted, {"by": 3})
        assert program.model == first.host.model() == second.host.model() == 5
        await second.messages.call(Reset, {})
    assert seen == [User("gus")]


async def test_each_run_starts_from_init() -> None:
    app = App(counter, 1, update)
    for _ in range(2):
        async with app.run() as runtime:
            await runtime.messages.call(Counted, {"by": 1})
            assert runtime.host.model() == 2


def test_the_repr_names_the_capabilities() -> None:
    assert repr(App(counter, 0, update)) == "<App capabilities=[counted, reset]>"


def test_an_app_refuses_what_expose_made_without_define() -> None:
    exposed = Counter.expose(Message, Counter.variant(Counted, "Count up"))
    with pytest.raises(agentfx.ContractError) as raised:
        App(exposed, 0, update)  # pyright: ignore[reportArgumentType]
    assert str(raised.value) == (
        'App() takes the result of define(...) as "definition", got the result of expose(...); '
        "write define(expose(Message, variant(...), ...))"
    )
    with pytest.raises(agentfx.ContractError, match=r'^App\(\) takes the result of define\(\.\.\.\) as "definition", got 3;'):
        App(3, 0, update)  # pyright: ignore[reportArgumentType]


async def _async_update(model: int, message: Message) -> int:
    return model


def _one_argument(model: int) -> int:
    return model


@pytest.mark.parametrize(
    ("wrong", "why"),
    [
        (None, '"update" must be a function taking two arguments (the Model, a Message); it is a NoneType'),
        (3, '"update" must be a function taking two arguments (the Model, a Message); it is an int'),
        (_one_argument, '"update" must take two arguments (the Model, a Message); it takes (model)'),
        (_async_update, '"update" must answer synchronously; it is a coroutine function'),
    ],
    ids=["none", "not-callable", "one-argument", "async"],
)
def test_an_update_that_cannot_run_the_program_is_refused_at_app(wrong: object, why: str) -> None:
    # Before, App() took it, the manifest and the tools were served, and every call failed.
    with pytest.raises(agentfx.ContractError) as info:
        App(counter, init=0, update=cast(Any, wrong))
    assert str(info.value) == f"App(): {why}"


@pytest.mark.parametrize(
    ("wrong", "why"),
    [
        (3, '"program" must be a function taking two arguments (the initial Model, update); it is an int'),
        (agentfx.run_program, '"program" must take two arguments (the initial Model, update); it takes (*, init, update)'),
    ],
    ids=["not-callable", "keywords-only"],
)
async def test_a_program_factory_that_cannot_be_called_is_refused(wrong: object, why: str) -> None:
    with pytest.raises(agentfx.ContractError) as info:
        App(counter, init=0, update=update, program=cast(Any, wrong))
    assert str(info.value) == f"App(): {why}"
    app = App(counter, init=0, update=update)
    with pytest.raises(agentfx.ContractError) as info:
        async with app.run(program=cast(Any, wrong)):
            pass
    assert str(info.value) == f"App.program(): {why}"
