"""The reference Elm runtime: update, commands, listeners, lifetime and host wiring."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Generator
from typing import Any, NamedTuple, assert_type

import anyio
import msgspec
import pytest

from agentfx.host import Host, Unsubscribe
from agentfx.invocation import Invocation
from agentfx.program import NESTED_MAX, Command, Commands, Program, run_program

pytestmark = pytest.mark.anyio


class Model(msgspec.Struct, frozen=True):
    count: int = 0
    log: tuple[str, ...] = ()


class Add(msgspec.Struct, frozen=True, tag=True):
    amount: int


class Load(msgspec.Struct, frozen=True, tag=True):
    key: str


class Loaded(msgspec.Struct, frozen=True, tag=True):
    key: str


class Ignored(msgspec.Struct, frozen=True, tag=True):
    pass


Message = Add | Load | Loaded | Ignored


def returning(message: Message | None) -> Command[Message]:
    async def command() -> Message | None:
        return message

    return command


def update(model: Model, message: Message) -> Model | tuple[Model, Commands[Message]]:
    match message:
        case Add(amount=amount):
            return Model(model.count + amount, (*model.log, f"add {amount}"))
        case Load(key=key):
            # A chain: Load -> Loaded(key) -> Loaded(key + "!") when key ends with "?".
            logged = Model(model.count, (*model.log, f"load {key}"))
            return logged, [returning(Loaded(key)), returning(None)]
        case Loaded(key=key):
            logged = Model(model.count, (*model.log, f"loaded {key}"))
            if key.endswith("?"):
                return logged, (returning(Loaded(key[:-1] + "!")),)
            return logged, []
        case Ignored():
            return model


async def until(program: Program[Model, Message], done: Callable[[Model], bool]) -> None:
    """Wait (boundedly) until the Model satisfies ``done``."""
    reached = anyio.Event()

    def check() -> None:
        if done(program.model):
            reached.set()

    unsubscribe = program.subscribe(check)
    try:
        check()
        with anyio.fail_after(5):
            await reached.wait()
    finally:
        unsubscribe()


# --- update results ---------------------------------------------------------


async def test_update_returning_a_model_replaces_it() -> None:
    async with run_program(init=Model(), update=update) as program:
        assert program.model == Model()
        await program.send(Add(2))
        assert program.model == Model(2, ("add 2",))
        await program.send(Add(3))
        assert program.model == Model(5, ("add 2", "add 3"))


async def test_update_returning_model_and_commands_sends_results_back_in_order() -> None:
    seen: list[Message] = []
    async with run_program(init=Model(), update=update) as program:
        program.observe(seen.append)
        await program.send(Load("a?"))
        assert program.model.log == ("load a?",)  # applied now; commands run afterwards
        await until(program, lambda model: len(model.log) == 3)
        await anyio.wait_all_tasks_blocked()
    assert program.model.log == ("load a?", "loaded a?", "loaded a!")
    # The command returning None sent nothing.
    assert seen == [Load("a?"), Loaded("a?"), Loaded("a!")]


async def test_a_command_that_returns_none_sends_nothing() -> None:
    ran = anyio.Event()

    async def quiet() -> str | None:
        ran.set()
        return None

    def upd(model: int, message: str) -> int | tuple[int, Commands[str]]:
        return model + 1, [quiet]

    seen: list[str] = []
    async with run_program(init=0, update=upd) as program:
        program.observe(seen.append)
        await program.send("go")
        with anyio.fail_after(5):
            await ran.wait()
        await anyio.wait_all_tasks_blocked()
        assert seen == ["go"]
        assert program.model == 1


async def test_a_plain_tuple_model_uses_the_pair_form() -> None:
    def upd(model: tuple[int, ...], message: int) -> tuple[tuple[int, ...], Commands[int]]:
        return (*model, message), ()

    async with run_program(init=(), update=upd) as program:
        await program.send(1)
        await program.send(2)
        assert program.model == (1, 2)


async def test_a_tuple_whose_second_item_is_not_commands_is_a_model() -> None:
    def upd(model: tuple[int, list[int]], message: int) -> tuple[int, list[int]]:
        return model[0] + message, [message]

    async with run_program(init=(0, []), update=upd) as program:
        await program.send(4)
        assert program.model == (4, [4])


class Ticket:
    """An awaitable that is not a coroutine."""

    def __await__(self) -> Generator[None]:
        yield


@pytest.mark.parametrize("container", [list, tuple])
@pytest.mark.parametrize("awaitable", ["coroutine", "other"])
async def test_a_command_called_instead_of_named_is_refused_and_keeps_the_model(
    container: Callable[[list[object]], object], awaitable: str
) -> None:
    async def fetch() -> Message | None:
        return Loaded("x")

    coroutines: list[Coroutine[Any, Any, Message | None]] = []

    def upd(model: Model, message: Message) -> Any:
        if isinstance(message, Load):
            called: object = Ticket()
            if awaitable == "coroutine":
                coroutines.append(fetch())
                called = coroutines[-1]
            return model, container([returning(Add(1)), called])
        return update(model, message)

    init = Model()
    seen: list[Message] = []
    async with run_program(init=init, update=upd) as program:
        program.observe(seen.append)
        with pytest.raises(TypeError) as refused:
            await program.send(Load("x"))
        assert program.model is init and seen == []
        await anyio.wait_all_tasks_blocked()
        assert seen == []  # not even the command named rightly was started
        await program.send(Add(2))  # the program goes on
        assert program.model == Model(2, ("add 2",))
    if awaitable == "coroutine":
        assert str(refused.value) == (
            "update returned (model, commands) with fetch() among the commands; a command is the async function "
            "itself, which the program calls, not what calling it returns: write [fetch], not [fetch()]"
        )
        # Closed, so it never warns that it was not awaited.
        assert inspect.getcoroutinestate(coroutines[0]) == inspect.CORO_CLOSED
    else:
        assert str(refused.value).startswith("update returned (model, commands) with an awaitable (Ticket) among")


async def test_a_tuple_model_holding_plain_values_where_commands_go_is_still_a_model() -> None:
    def upd(model: tuple[str, tuple[int, ...]], message: int) -> tuple[str, tuple[int, ...]]:
        return model[0], (*model[1], message)

    async with run_program(init=("log", ()), update=upd) as program:
        await program.send(1)
        await program.send(2)
        assert program.model == ("log", (1, 2))


class Pair(NamedTuple):
    value: int
    handlers: tuple[Callable[[], object], ...]


async def test_a_named_tuple_model_is_never_read_as_a_pair() -> None:
    handlers = (lambda: None,)

    def upd(model: Pair, message: int) -> Pair:
        return Pair(model.value + message, handlers)

    async with run_program(init=Pair(0, ()), update=upd) as program:
        await program.send(5)
        assert program.model == Pair(5, handlers)


async def test_an_update_that_raises_propagates_out_of_send_and_keeps_the_model() -> None:
    def upd(model: int, message: int) -> int:
        return model // message

    async with run_program(init=6, update=upd) as program:
        with pytest.raises(ZeroDivisionError):
            await program.send(0)
        assert program.model == 6
        await program.send(2)
        assert program.model == 3


# --- listeners ----------------------------------------------------------------


async def test_observers_see_every_message_after_update_applied_it() -> None:
    seen: list[tuple[Message, Model]] = []
    async with run_program(init=Model(), update=update) as program:
        program.observe(lambda message: seen.append((message, program.model)))
        await program.send(Add(1))
        await program.send(Ignored())
        await program.send(Add(2))
    assert seen == [
        (Add(1), Model(1, ("add 1",))),
        (Ignored(), Model(1, ("add 1",))),
        (Add(2), Model(3, ("add 1", "add 2"))),
    ]


async def test_subscribers_are_told_only_when_the_model_changed() -> None:
    models: list[Model] = []
    async with run_program(init=Model(), update=update) as program:
        program.subscribe(lambda: models.append(program.model))
        await program.send(Ignored())  # update returns the same Model object
        await program.send(Add(1))
        await program.send(Ignored())
        await program.send(Add(0))  # equal count, but a new Model object
    assert models == [Model(1, ("add 1",)), Model(1, ("add 1", "add 0"))]


async def test_subscribers_are_notified_before_observers() -> None:
    order: list[str] = []
    async with run_program(init=Model(), update=update) as program:
        program.observe(lambda message: order.append("observer"))
        program.subscribe(lambda: order.append("subscriber"))
        await program.send(Add(1))
        await program.send(Ignored())
    assert order == ["subscriber", "observer", "observer"]


async def test_listeners_are_notified_in_subscription_order() -> None:
    order: list[int] = []
    async with run_program(init=Model(), update=update) as program:
        for index in range(4):
            program.observe(lambda message, index=index: order.append(index))
        await program.send(Ignored())
    assert order == [0, 1, 2, 3]


async def test_a_listener_may_unsubscribe_itself_during_notification() -> None:
    calls: list[str] = []
    async with run_program(init=Model(), update=update) as program:

        def once(message: Message) -> None:
            calls.append("once")
            unsubscribe_once()

        unsubscribe_once = program.observe(once)
        program.observe(lambda message: calls.append("always"))
        await program.send(Ignored())
        await program.send(Ignored())
    assert calls == ["once", "always", "always"]


async def test_a_listener_unsubscribed_by_an_earlier_one_is_not_called() -> None:
    calls: list[str] = []
    async with run_program(init=Model(), update=update) as program:
        program.subscribe(lambda: unsubscribe_later())
        unsubscribe_later = program.subscribe(lambda: calls.append("later"))
        program.subscribe(lambda: calls.append("last"))
        await program.send(Add(1))
        await program.send(Add(1))
        assert program.listener_count == 2
    assert calls == ["last", "last"]


async def test_a_listener_added_during_notification_first_hears_the_next_one() -> None:
    calls: list[Message] = []
    unsubscribes: list[Unsubscribe] = []
    async with run_program(init=Model(), update=update) as program:

        def recruit(message: Message) -> None:
            if not unsubscribes:
                unsubscribes.append(program.observe(calls.append))

        program.observe(recruit)
        await program.send(Add(1))
        assert calls == []
        await program.send(Add(2))
        assert calls == [Add(2)]


async def test_unsubscribe_is_idempotent_and_removes_only_its_own_subscription() -> None:
    calls: list[Message] = []
    async with run_program(init=Model(), update=update) as program:
        first = program.observe(calls.append)
        program.observe(calls.append)  # the same callable, subscribed twice
        assert program.listener_count == 2
        first()
        first()
        assert program.listener_count == 1
        await program.send(Ignored())
    assert calls == [Ignored()]


async def test_listener_count_counts_observers_and_subscribers() -> None:
    async with run_program(init=Model(), update=update) as program:
        assert program.listener_count == 0
        stop_observing = program.observe(lambda message: None)
        stop_subscribing = program.subscribe(lambda: None)
        assert program.listener_count == 2
        stop_observing()
        assert program.listener_count == 1
        stop_subscribing()
        assert program.listener_count == 0


async def test_a_listener_that_raises_propagates_out_of_send() -> None:
    class ListenerBroke(Exception):
        pass

    def broken(message: Message) -> None:
        raise ListenerBroke

    async with run_program(init=Model(), update=update) as program:
        program.observe(broken)
        with pytest.raises(ListenerBroke):
            await program.send(Add(1))
        assert program.model.count == 1


# --- Messages sent while one is processed ----------------------------------------


async def test_a_message_sent_by_a_listener_is_processed_after_every_listener_heard_the_current_one() -> None:
    async with run_program(init=Model(), update=update) as program:
        host = program.host()
        seen: list[Message] = []
        counts_when_sent: list[int] = []

        def react() -> None:
            if program.model.log[-1] == "add 1":
                host.dispatch(Add(10))
                # Queued, not applied: the Message being processed is not done yet.
                counts_when_sent.append(program.model.count)

        program.subscribe(react)
        program.observe(seen.append)
        await program.send(Add(1))
        assert program.model.log == ("add 1", "add 10")
        assert seen == [Add(1), Add(10)]
        assert counts_when_sent == [1]


async def test_messages_sent_while_processing_are_processed_in_the_order_sent() -> None:
    async with run_program(init=Model(), update=update) as program:
        host = program.host()
        reactions = {"add 1": [Add(2), Add(3)], "add 2": [Add(4)]}
        program.subscribe(lambda: [host.dispatch(m) for m in reactions.get(program.model.log[-1], [])])
        program.observe(lambda message: host.dispatch(Add(5)) if message == Add(3) else None)
        await program.send(Add(1))
        assert program.model.log == ("add 1", "add 2", "add 3", "add 4", "add 5")


async def test_a_listener_that_sends_on_every_change_is_refused_past_the_bound() -> None:
    async with run_program(init=Model(), update=update) as program:
        host = program.host()
        unsubscribe = program.subscribe(lambda: host.dispatch(Add(1)))
        refusal = f"^Cannot send Add\\(amount=1\\): it would be the reaction to {NESTED_MAX} reactions in a row"
        with pytest.raises(RuntimeError, match=refusal):
            await program.send(Add(1))
        assert program.model.count == NESTED_MAX
        # The program is not stuck: the next send is processed as any other.
        unsubscribe()
        await program.send(Add(1))
        assert program.model.count == NESTED_MAX + 1


async def test_a_fan_out_of_any_size_is_one_reaction_deep() -> None:
    # One Message answered by more Messages than a chain may be deep: each is
    # a reaction to the first, so all are processed.
    async with run_program(init=Model(), update=update) as program:
        host = program.host()
        rows = NESTED_MAX + 2_000
        program.observe(lambda message: [host.dispatch(Add(1)) for _ in range(rows)] if message == Add(0) else None)
        await program.send(Add(0))
        assert program.model.count == rows


async def test_a_send_past_the_queue_bound_is_refused_and_what_was_queued_is_processed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("agentfx._sequencing.QUEUED_MAX", 5)
    async with run_program(init=Model(), update=update) as program:
        host = program.host()
        program.observe(lambda message: [host.dispatch(Add(1)) for _ in range(6)] if message == Add(0) else None)
        with pytest.raises(RuntimeError, match="5 Messages are already waiting to be processed"):
            await program.send(Add(0))
        assert program.model.count == 5


async def test_a_queued_message_is_processed_even_when_a_listener_raised() -> None:
    class ListenerBroke(Exception):
        pass

    async with run_program(init=Model(), update=update) as program:
        host = program.host()
        seen: list[Message] = []

        def broken(message: Message) -> None:
            if message == Add(1):
                host.dispatch(Add(10))
                raise ListenerBroke

        program.observe(broken)
        program.observe(seen.append)
        with pytest.raises(ListenerBroke):
            await program.send(Add(1))
        # The listener after the one that raised missed Add(1); Add(10), accepted, was applied.
        assert (program.model.count, seen) == (11, [Add(10)])
        await program.send(Add(100))
        assert program.model.count == 111


# --- send is a checkpoint ------------------------------------------------------


def add(total: int, amount: int) -> int:
    return total + amount


async def test_a_cancelled_send_raises_before_its_message_is_processed() -> None:
    seen: list[int] = []
    async with run_program(init=0, update=add) as program:
        program.observe(seen.append)
        with anyio.CancelScope() as scope:
            scope.cancel()
            await program.send(1)
            pytest.fail("a send inside a cancelled scope returned")
        assert scope.cancelled_caught
        assert program.model == 0 and seen == []
        # A synchronous dispatch is no checkpoint: update runs at once.
        with anyio.CancelScope() as scope:
            scope.cancel()
            assert program.host().dispatch(2) is None
        assert program.model == 2 and seen == [2]


async def test_a_loop_of_sends_lets_started_commands_run() -> None:
    async def answer() -> str | None:
        return "answered"

    def upd(log: tuple[str, ...], message: str) -> tuple[tuple[str, ...], Commands[str]]:
        return (*log, message), [answer] if message == "ask" else []

    async with run_program(init=(), update=upd) as program:
        await program.send("ask")
        assert program.model == ("ask",)  # applied now; its command runs afterwards
        for _ in range(5):
            await program.send("tick")
        assert "answered" in program.model


# --- lifetime -------------------------------------------------------------------


async def test_leaving_the_block_cancels_pending_commands() -> None:
    started = anyio.Event()
    cancelled: list[bool] = []

    async def forever() -> str | None:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        return None

    def upd(model: int, message: str) -> tuple[int, Commands[str]]:
        return model, [forever]

    with anyio.fail_after(5):
        async with run_program(init=0, update=upd) as program:
            await program.send("start")
            await started.wait()
    # The command's task was cancelled and finished before the block returned.
    assert cancelled == [True]


async def test_a_result_finished_while_stopping_is_dropped_not_sent() -> None:
    async def stubborn() -> str | None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            pass
        return "late"

    seen: list[str] = []

    def upd(model: int, message: str) -> tuple[int, Commands[str]]:
        return model + 1, [stubborn] if message == "start" else []

    async with run_program(init=0, update=upd) as program:
        program.observe(seen.append)
        await program.send("start")
        await anyio.wait_all_tasks_blocked()
    assert seen == ["start"]
    assert program.model == 1


async def test_a_command_that_raises_propagates_out_of_run_program() -> None:
    class CommandBroke(Exception):
        pass

    async def broken() -> str | None:
        raise CommandBroke("boom")

    def upd(model: int, message: str) -> tuple[int, Commands[str]]:
        return model, [broken]

    with pytest.raises(CommandBroke, match="boom"), anyio.fail_after(5):
        async with run_program(init=0, update=upd) as program:
            await program.send("go")
            await anyio.sleep_forever()


async def test_two_commands_that_raise_propagate_together() -> None:
    arrived: list[None] = []
    both = anyio.Event()

    async def broken() -> str | None:
        # Shielded, so the first failure's cancellation cannot stop the second.
        with anyio.CancelScope(shield=True):
            arrived.append(None)
            if len(arrived) == 2:
                both.set()
            await both.wait()
            raise KeyError("boom")

    def upd(model: int, message: str) -> tuple[int, Commands[str]]:
        return model, [broken, broken]

    with pytest.raises(BaseExceptionGroup) as caught, anyio.fail_after(5):
        async with run_program(init=0, update=upd) as program:
            await program.send("go")
            await anyio.sleep_forever()
    assert [type(error) for error in caught.value.exceptions] == [KeyError, KeyError]


async def test_an_exception_in_the_block_propagates_bare() -> None:
    with pytest.raises(LookupError, match="from the block"):
        async with run_program(init=Model(), update=update):
            raise LookupError("from the block")


async def test_send_after_the_program_stopped_raises() -> None:
    async with run_program(init=Model(), update=update) as program:
        await program.send(Add(1))
    with pytest.raises(RuntimeError, match="the program has stopped"):
        await program.send(Add(1))
    assert program.model == Model(1, ("add 1",))


# --- host ------------------------------------------------------------------------


async def test_host_reads_the_live_model_and_dispatch_sends() -> None:
    async with run_program(init=Model(), update=update) as program:
        host = program.host()
        assert host.principal is None
        assert host.model() == Model()
        # Synchronous: update has run by the time dispatch returns, so the runtime awaits nothing.
        assert host.dispatch(Add(4)) is None
        assert program.model.count == 4
        assert host.model() is program.model
    with pytest.raises(RuntimeError, match="the program has stopped"):
        host.dispatch(Add(1))


async def test_host_observe_and_subscribe_are_the_programs() -> None:
    events: list[object] = []
    async with run_program(init=Model(), update=update) as program:
        host = program.host()
        assert host.observe is not None and host.subscribe is not None
        stop_observing = host.observe(events.append)
        stop_subscribing = host.subscribe(lambda: events.append("changed"))
        assert program.listener_count == 2
        await program.send(Add(1))
        stop_observing()
        stop_subscribing()
        assert program.listener_count == 0
    assert events == ["changed", Add(1)]


async def test_host_passes_the_principal_resolver_through() -> None:
    def resolver(invocation: Invocation) -> str:
        return f"user-for-{invocation.id}"

    async with run_program(init=Model(), update=update) as program:
        host = program.host(principal=resolver)
        assert host.principal is resolver
        assert host.principal is not None and host.principal(Invocation(id="x")) == "user-for-x"


# --- static types (checked by pyright; trivially true at run time) -------------------


async def test_types_are_inferred_from_init_and_update() -> None:
    async with run_program(init=Model(), update=update) as program:
        assert_type(program, Program[Model, Message])
        assert_type(program.model, Model)
        assert_type(program.host(), Host[Model, Message, None])

        def resolver(invocation: Invocation) -> int:
            return 7

        assert_type(program.host(principal=resolver), Host[Model, Message, int])

    def only_models(model: int, message: str) -> int:
        return model + len(message)

    async with run_program(init=0, update=only_models) as counter:
        assert_type(counter, Program[int, str])

    def only_pairs(model: Model, message: Add) -> tuple[Model, Commands[Add]]:
        return model, []

    async with run_program(init=Model(), update=only_pairs) as paired:
        assert_type(paired, Program[Model, Add])
        await paired.send(Add(1))
        await paired.send(Load("x"))  # pyright: ignore[reportArgumentType]


async def test_a_lone_failure_keeps_its_own_context() -> None:
    async def broken() -> str | None:
        try:
            raise KeyError("first")
        except KeyError:
            raise ValueError("second")  # implicitly chained: the context under test

    def upd(model: int, message: str) -> tuple[int, Commands[str]]:
        return model, [broken]

    with pytest.raises(ValueError) as caught, anyio.fail_after(5):
        async with run_program(init=0, update=upd) as program:
            await program.send("go")
            await anyio.sleep_forever()
    assert isinstance(caught.value.__context__, KeyError)
    assert not caught.value.__suppress_context__
