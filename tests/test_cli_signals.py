"""``stopped_by_signals``, what ``agentfx serve`` stops by, on asyncio and trio in this very process.

The subprocess probes in ``tests/integration/test_hardening.py`` show the
whole ``serve`` stopping; here the helper itself, on both backends (the CLI
itself runs asyncio).
"""

from __future__ import annotations

import io
import os
import signal
import threading

import anyio
import pytest

from agentfx.cli import STOP_SIGNALS, stopped_by_signals

pytestmark = pytest.mark.anyio


def installed(signum: signal.Signals) -> bool:
    handler = signal.getsignal(signum)
    return handler not in (signal.SIG_DFL, signal.SIG_IGN, None, signal.default_int_handler)


@pytest.mark.parametrize("signum", STOP_SIGNALS, ids=[s.name for s in STOP_SIGNALS])
async def test_a_stop_signal_cancels_the_scope_and_is_caught(signum: signal.Signals) -> None:
    err = io.StringIO()
    before = signal.getsignal(signum)
    reached_the_end = False
    async with stopped_by_signals(err) as stop:
        # Sending the signal to this very process is safe only with the handler in place.
        assert installed(signum)
        with stop:
            os.kill(os.getpid(), signum)
            with anyio.fail_after(5):
                await anyio.sleep_forever()
        # Cancelled by the signal, not by the deadline; the block goes on.
        assert stop.cancelled_caught
        reached_the_end = True
    assert reached_the_end
    assert err.getvalue() == f"agentfx: {signum.name} received; stopping\n"
    assert signal.getsignal(signum) == before, "the previous handler is back"


async def test_a_signal_before_the_scope_is_entered_cancels_it_on_entry() -> None:
    err = io.StringIO()
    async with stopped_by_signals(err) as stop:
        assert installed(signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        with anyio.fail_after(5):
            while not stop.cancel_called:
                await anyio.sleep(0.01)
        ran = False
        with stop:
            await anyio.sleep(1)
            ran = True
        assert not ran


async def test_a_second_signal_while_stopping_is_caught_too() -> None:
    err = io.StringIO()
    async with stopped_by_signals(err) as stop:
        assert installed(signal.SIGINT)
        with stop:
            os.kill(os.getpid(), signal.SIGINT)
            await anyio.sleep_forever()
        # Closing the App after the scope: another signal must not kill it halfway.
        os.kill(os.getpid(), signal.SIGINT)
        await anyio.sleep(0.05)
    assert err.getvalue().count("received; stopping") == 1


async def test_outside_the_main_thread_the_scope_is_handed_back_as_it_is() -> None:
    outcome: list[bool] = []

    def elsewhere() -> None:
        async def main() -> None:
            async with stopped_by_signals(io.StringIO()) as stop:
                with stop:
                    await anyio.sleep(0)
                outcome.append(stop.cancel_called)

        anyio.run(main)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(10)
    assert outcome == [False]


async def test_an_exception_from_the_block_leaves_as_itself() -> None:
    failure = RuntimeError("a command raised")
    with pytest.raises(RuntimeError) as raised:
        async with stopped_by_signals(io.StringIO()) as stop:
            with stop:
                raise failure
    assert raised.value is failure
