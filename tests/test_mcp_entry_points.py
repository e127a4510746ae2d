"""The MCP entry points refuse what is not a bound runtime, each naming itself, before touching anything."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import agentfx
from agentfx.mcp import serve_stdio, server

pytestmark = pytest.mark.anyio


class Pinged(msgspec.Struct, frozen=True, tag=True):
    pass


Contract = agentfx.define(agentfx.expose(Pinged, agentfx.variant(Pinged, "Ping")))
PINGS = agentfx.App(Contract, init=0, update=lambda count, _: count + 1)


@pytest.mark.parametrize("given", [PINGS, Contract], ids=["App", "Definition"])
def test_server_names_itself(given: Any) -> None:
    with pytest.raises(agentfx.ContractError, match=r"^server\(\) takes a bound runtime, got (App|Definition)"):
        server(given)


@pytest.mark.parametrize("given", [PINGS, Contract], ids=["App", "Definition"])
async def test_serve_stdio_names_itself_and_leaves_stdio_alone(given: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import agentfx.mcp._stdio as stdio

    def claimed() -> Any:
        raise AssertionError("stdio was claimed")

    monkeypatch.setattr(stdio, "claim_stdio", claimed)
    with pytest.raises(agentfx.ContractError, match=r"^serve_stdio\(\) takes a bound runtime, got (App|Definition)"):
        await serve_stdio(given)
