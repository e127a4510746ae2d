"""The reference program's ordering guarantee, as a property: observers hear Messages in processing order."""

from __future__ import annotations

import functools

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfx.program import run_program

LISTENERS = 3
"""Subscribers, then as many observers; each may react to a Message by sending others."""

# A listener's reaction to Message ``m``: Messages numbered above ``m``, so every chain
# ends, and few enough that a run stays within a few hundred Messages.
REACTIONS = st.dictionaries(
    st.tuples(st.integers(0, 2 * LISTENERS - 1), st.integers(0, 7)),
    st.lists(st.integers(1, 8), max_size=2),
    max_size=8,
)


def _log(log: tuple[int, ...], message: int) -> tuple[tuple[int, ...], tuple[()]]:
    # The pair form, as the Model is itself a tuple.
    return (*log, message), ()


def _reaction(reactions: dict[tuple[int, int], list[int]], listener: int, message: int) -> list[int]:
    return [message + step for step in reactions.get((listener, message), [])]


def _elm_order(reactions: dict[tuple[int, int], list[int]], first: int) -> list[int]:
    """What Elm processes: one Message at a time, those its listeners sent queued in the order sent."""
    queue, order = [first], list[int]()
    while queue:
        message = queue.pop(0)
        order.append(message)
        for listener in range(2 * LISTENERS):  # subscribers before observers, each in order
            queue.extend(_reaction(reactions, listener, message))
    return order


@settings(max_examples=200, deadline=None)
@given(reactions=REACTIONS, first=st.integers(0, 7))
def test_observers_hear_every_message_in_processing_order(reactions: dict[tuple[int, int], list[int]], first: int) -> None:
    async def main() -> tuple[tuple[int, ...], list[list[int]]]:
        init: tuple[int, ...] = ()
        async with run_program(init=init, update=_log) as program:
            host = program.host()
            heard: list[list[int]] = [[] for _ in range(LISTENERS)]

            def subscriber(listener: int) -> None:
                for message in _reaction(reactions, listener, program.model[-1]):
                    host.dispatch(message)

            def observer(listener: int, message: int) -> None:
                heard[listener - LISTENERS].append(message)
                for sent in _reaction(reactions, listener, message):
                    host.dispatch(sent)

            for listener in range(LISTENERS):
                program.subscribe(functools.partial(subscriber, listener))
            for listener in range(LISTENERS, 2 * LISTENERS):
                program.observe(functools.partial(observer, listener))
            await program.send(first)
            return program.model, heard

    processed, heard = anyio.run(main)
    assert list(processed) == _elm_order(reactions, first)
    assert heard == [list(processed)] * LISTENERS
