"""``agentfx serve --transport http`` in this very process: what it enters at startup, and what it accepts."""

from __future__ import annotations

import io
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import pytest

from agentfx.cli import main
from tests import cli_targets
from tests.http_support import MODERN, modern, post
from tests.mcp_wire import INITIALIZE

SERVING = re.compile(r"Serving MCP over Streamable HTTP at (http://\S+/mcp)\n")


@contextmanager
def stopped_after(seconds: float) -> Generator[None]:
    """SIGTERM to this process after ``seconds``, unless the block ended first: a server that should not run stops."""
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def serve_while(
    client: Callable[[str], None], *argv: str, transport: str = "http", serving: re.Pattern[str] = SERVING
) -> tuple[int, str, list[BaseException]]:
    """``agentfx serve ARGV`` here, ``client(url)`` run in a thread once it serves, then SIGTERM; exit code, stderr, failures."""
    err = io.StringIO()
    failures: list[BaseException] = []

    def drive() -> None:
        try:
            deadline = time.monotonic() + 10
            while (found := serving.search(err.getvalue())) is None:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.01)
            client(found.group(1))
        except BaseException as exc:  # noqa: BLE001 - handed to the test, which raises it
            failures.append(exc)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=drive)
    thread.start()
    try:
        code = main(["serve", *argv, "--transport", transport, "--port", "0"], out=io.StringIO(), err=err)
    finally:
        thread.join(20)
    return code, err.getvalue(), failures


def test_a_factory_is_entered_once_at_startup_and_outlives_idle_principals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentfx.mcp._http.SESSION_IDLE_TIMEOUT", 0.1)
    monkeypatch.setitem(cli_targets.ENTRIES, "entered", 0)
    monkeypatch.setitem(cli_targets.ENTRIES, "exited", 0)
    seen: list[Any] = []

    def client(url: str) -> None:
        # Entered before anyone connected, as over stdio.
        seen.append(dict(cli_targets.ENTRIES))

        async def calls() -> None:
            async with httpx.AsyncClient() as http:
                add = modern("tools/call", {"name": "add", "arguments": {"title": "kept"}})
                status, answer, _ = await post(http, url, add, version=MODERN)
                assert status == 200, answer
                # Idle for far longer than a principal is kept: http_app lets it go.
                await anyio.sleep(0.5)
                read = modern("resources/read", {"uri": "app://items"})
                status, answer, _ = await post(http, url, read, version=MODERN)
                assert status == 200, answer
                seen.append(answer["result"]["contents"][0]["text"])
                seen.append(dict(cli_targets.ENTRIES))

        anyio.run(calls)

    with stopped_after(20):
        code, err, failures = serve_while(client, "tests.cli_targets:counted")
    assert failures == []
    assert code == 0, err
    # The Model the first call changed is still there: the factory's program was never closed.
    assert seen == [{"entered": 1, "exited": 0}, '["kept"]', {"entered": 1, "exited": 0}]
    assert cli_targets.ENTRIES == {"entered": 1, "exited": 1}


SERVABLE = (
    "serve accepts an App, or a zero-argument callable returning an async context manager that yields a bound runtime"
)


@pytest.mark.parametrize(
    ("target", "found"),
    [
        ("tests.cli_targets:returns_a_number", "returned an int"),
        ("tests.cli_targets:yields_a_definition", "yielded a Definition, a contract without a program to run, not a runtime"),
    ],
)
def test_a_factory_that_gives_no_runtime_is_refused_before_serving(target: str, found: str) -> None:
    err = io.StringIO()
    # A server that started anyway is stopped, and the assertions below say so.
    with stopped_after(5):
        code = main(["serve", target, "--transport", "http", "--port", "0"], out=io.StringIO(), err=err)
    assert (code, err.getvalue()) == (2, f'agentfx: "{target}" {found}; {SERVABLE}\n')


def test_a_factory_that_raises_on_entry_stops_before_serving_with_its_traceback() -> None:
    err = io.StringIO()
    with stopped_after(5):
        code = main(["serve", "tests.cli_targets:enter_raises", "--transport", "http", "--port", "0"], out=io.StringIO(), err=err)
    said = err.getvalue()
    assert code == 4, said
    assert said.startswith("agentfx: the served application stopped with an error:\n")
    assert "RuntimeError: the factory could not start" in said and "Serving" not in said


def test_a_loopback_address_other_than_the_default_names_answers_on_the_url_announced() -> None:
    answered: list[int] = []

    def client(url: str) -> None:
        async def initialize() -> None:
            async with httpx.AsyncClient() as http:
                status, _, _ = await post(http, url, INITIALIZE)
                answered.append(status)

        anyio.run(initialize)

    with stopped_after(20):
        code, err, failures = serve_while(client, "tests.mcp_app:app", "--host", "127.0.0.2")
    assert (code, failures) == (0, [])
    assert SERVING.search(err) is not None and "http://127.0.0.2:" in err
    # Not 421: the Host header the announced URL makes is the address bound.
    assert answered == [200]


SERVING_A2A = re.compile(r"Serving A2A \(.*\) at (http://\S+)/a2a\n")


@pytest.mark.parametrize("allowed", ["agents.example:*", "agents.example:8443", "agents.example"])
def test_an_agent_card_served_on_a_wildcard_names_the_first_allowed_host(allowed: str) -> None:
    cards: list[Any] = []

    def client(base: str) -> None:
        port = base.rsplit(":", 1)[1]
        local = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
        host = allowed.replace("*", port)  # what a client reaching it that way sends
        cards.append(httpx.get(local, headers={"Host": host}, timeout=10).json())
        cards.append(port)

    with stopped_after(20):
        code, err, failures = serve_while(
            client, "tests.mcp_app:app", "--host", "0.0.0.0", "--allowed-host", allowed, transport="a2a",
            serving=SERVING_A2A,
        )
    assert (code, failures) == (0, [])
    card, port = cards
    named = {
        "agents.example:*": f"http://agents.example:{port}/a2a",
        "agents.example:8443": "http://agents.example:8443/a2a",
        "agents.example": "http://agents.example/a2a",
    }[allowed]
    assert [interface["url"] for interface in card["supportedInterfaces"]] == [named, named]
    assert f"agentfx: the agent card names {named}, after the first --allowed-host\n" in err


def test_an_agent_card_served_on_a_wildcard_without_an_allowed_host_says_no_client_can_reach_it() -> None:
    with stopped_after(20):
        code, err, failures = serve_while(
            lambda _base: None, "tests.mcp_app:app", "--host", "0.0.0.0", transport="a2a", serving=SERVING_A2A
        )
    assert (code, failures) == (0, [])
    found = SERVING_A2A.search(err)
    assert found is not None and found.group(1).startswith("http://0.0.0.0:")
    assert (
        f"agentfx: warning: the agent card names {found.group(1)}/a2a, which no client can reach; give the address "
        "clients use as the first --allowed-host\n"
    ) in err
