"""Claiming this process's stdin and stdout for a wire, so nothing the application prints reaches it.

This layer owns the descriptor shuffle: private copies of fds 0 and 1 for the
wire, fd 0 reading the null device and fd 1 writing to stderr meanwhile, and
both put back afterwards, at most one claim at a time. It deliberately knows
nothing of what is served over the copies (``agentfx.mcp`` serves MCP, and
``agentfx serve`` claims before it imports its target).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Generator
from contextlib import contextmanager

__all__ = ["claim_stdio"]

_claimed = threading.Lock()


@contextmanager
def claim_stdio() -> Generator[tuple[int, int]]:
    """Private copies of fds 0 and 1 for the wire; fd 0 reads the null device and fd 1 writes to stderr meanwhile.

    With stderr closed, fd 1 writes to the null device instead.

    Raises:
        RuntimeError: This process's stdio is already claimed.
    """
    if not _claimed.acquire(blocking=False):
        raise RuntimeError("this process's stdio is already being served")
    try:
        if sys.platform == "win32":  # pragma: no cover - the descriptors are served in place
            yield 0, 1
            return
        import fcntl

        _flush(sys.stdout)
        wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        try:
            wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        except BaseException:
            os.close(wire_in)
            raise
        # Entered before fds 0 and 1 are replaced, so a KeyboardInterrupt between
        # any two steps still puts them back: putting back one not yet replaced
        # changes nothing.
        try:
            try:
                os.fstat(2)
                stderr = 2
            except OSError:
                stderr = None
            # Opened after the check: with stderr closed, the null device takes fd 2
            # (until it is closed below), and fd 1 writes to it instead.
            null = os.open(os.devnull, os.O_RDWR)
            try:
                os.dup2(null, 0)
                os.dup2(null if stderr is None else stderr, 1)
            finally:
                os.close(null)
            yield wire_in, wire_out
        finally:
            # Each step in the finally of the one before, so an interrupted one
            # skips none after it; inline, as a call is itself a point a
            # signal's handler may raise at.
            try:
                # Printed while claimed, so it belongs on stderr, not on the stdout restored below.
                _flush(sys.stdout)
            finally:
                try:
                    os.dup2(wire_in, 0)
                finally:
                    try:
                        os.dup2(wire_out, 1)
                    finally:
                        try:
                            os.close(wire_in)
                        finally:
                            os.close(wire_out)
    finally:
        _claimed.release()


def _flush(stream: object) -> None:
    flush = getattr(stream, "flush", None)
    if callable(flush):
        try:
            flush()
        except (OSError, ValueError):
            pass
