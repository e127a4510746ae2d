"""Laws of the MCP change watches: a change is announced once, and only a change."""

from __future__ import annotations

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfx.mcp._watch import ListWatch, ResourceWatch

VALUES = st.sampled_from([b"[]", b'["a"]', b'["a","b"]', None])
# Each step: the value the resource now encodes to, and whether a check runs after it.
STEPS = st.lists(st.tuples(VALUES, st.booleans()), max_size=30)


@settings(max_examples=150, deadline=None)
@given(first=VALUES, steps=STEPS)
def test_a_resource_is_announced_exactly_when_its_encoding_differs_from_the_last_check(
    first: bytes | None, steps: list[tuple[bytes | None, bool]]
) -> None:
    current = [first]
    announced: list[str] = []

    async def announce(uri: str) -> None:
        announced.append(uri)

    async def main() -> int:
        watch = ResourceWatch(lambda uri: current[0], announce)
        watch.subscribe("app://r")
        expected, seen = 0, first
        for value, check in steps:
            current[0] = value
            if check:
                await watch.check()
                if value != seen:
                    expected, seen = expected + 1, value
        return expected

    expected = anyio.run(main)
    assert announced == ["app://r"] * expected


NAMES = st.lists(st.sampled_from(["a", "b", "c"]), unique=True).map(sorted)


@settings(max_examples=150, deadline=None)
@given(listed=NAMES, steps=st.lists(st.tuples(NAMES, st.booleans()), max_size=20))
def test_a_tool_list_is_announced_exactly_when_it_differs_from_the_last_check(
    listed: list[str], steps: list[tuple[list[str], bool]]
) -> None:
    current = [listed]
    # Which step announced, and which way: the watch's own announcement or the
    # one a call hands in (so the call's client hears it before the answer).
    announced: list[tuple[int, str]] = []
    step = [0]

    async def announce() -> None:
        announced.append((step[0], "watch"))

    async def now() -> None:
        announced.append((step[0], "call"))

    async def main() -> list[tuple[int, str]]:
        watch = ListWatch(lambda: current[0], announce)
        watch.listed(listed)
        expected: list[tuple[int, str]] = []
        seen = listed
        for i, (names, after_a_call) in enumerate(steps):
            step[0], current[0] = i, names
            await watch.check(now if after_a_call else None)
            if names != seen:
                expected.append((i, "call" if after_a_call else "watch"))
                seen = names
        return expected

    expected = anyio.run(main)
    assert announced == expected
