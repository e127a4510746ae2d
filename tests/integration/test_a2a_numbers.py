"""A2A over HTTP: a number that is not finite, on a real uvicorn server, clients on asyncio and trio.

JSON allows ``1e400``; protobuf parses it into a ``Value`` holding an
infinite double, which has no JSON to be answered in. The server and its
application are ``tests/integration/test_a2a_http.py``'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from agentfx.a2a._app import NOT_FINITE
from tests.integration.test_a2a_http import Served, counter_served

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with counter_served() as state:
        yield state


def body(method: str, message: str) -> bytes:
    return ('{"jsonrpc":"2.0","id":"n1","method":"%s","params":{"message":%s}}' % (method, message)).encode()


def message_1_0(data: str, metadata: str = "{}") -> str:
    return '{"messageId":"%s","role":"ROLE_USER","metadata":%s,"parts":[{"data":%s}]}' % (uuid.uuid4().hex, metadata, data)


def message_0_3(data: str, metadata: str = "{}") -> str:
    return '{"kind":"message","messageId":"%s","role":"user","metadata":%s,"parts":[{"kind":"data","data":%s}]}' % (
        uuid.uuid4().hex,
        metadata,
        data,
    )


CASES = {
    "1.0, input": ("1.0", body("SendMessage", message_1_0('{"skill":"add","input":{"amount":1e400}}'))),
    "1.0, metadata": ("1.0", body("SendMessage", message_1_0('{"skill":"ping"}', '{"x":-1e400}'))),
    "1.0, stream": ("1.0", body("SendStreamingMessage", message_1_0('{"skill":"ping"}', '{"x":[1e400]}'))),
    "0.3, input": ("0.3", body("message/send", message_0_3('{"skill":"add","input":{"amount":1e400}}'))),
    "0.3, metadata": ("0.3", body("message/send", message_0_3('{"skill":"ping"}', '{"x":1e400}'))),
}


@pytest.mark.parametrize("name", list(CASES))
async def test_a_message_holding_1e400_is_invalid_params_and_nothing_is_dispatched(served: Served, name: str) -> None:
    version, sent = CASES[name]
    headers = {"Content-Type": "application/json", "Authorization": "Bearer ann", "A2A-Version": version}
    before = len(served.records)
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(served.base + "/a2a", content=sent, headers=headers)
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    answer = response.json()
    assert answer["id"] == "n1" and answer["error"]["code"] == -32602
    assert answer["error"]["message"] == NOT_FINITE
    assert len(served.records) == before  # nothing audited, so nothing dispatched
