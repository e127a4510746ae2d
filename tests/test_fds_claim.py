"""``claim_stdio`` interrupted between any two of its steps: fds 0 and 1 as they were, nothing left open, claimable again."""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agentfx import _fds
from agentfx._fds import claim_stdio

T = TypeVar("T")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")


class Interrupting:
    """``os`` as ``claim_stdio`` sees it: its ``after``-th ``dup2`` or ``close`` is done, then a KeyboardInterrupt.

    Raised once the call has returned, as a signal's handler would be: no
    handler runs inside the call itself.
    """

    def __init__(self, after: int | None) -> None:
        self.after = after
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def dup2(self, fd: int, fd2: int) -> int:
        return self._then(os.dup2(fd, fd2))

    def close(self, fd: int) -> None:
        os.close(fd)
        self._then(None)

    def _then(self, result: T) -> T:
        self.calls += 1
        if self.calls == self.after:
            raise KeyboardInterrupt
        return result


def identity(fd: int) -> tuple[int, int]:
    found = os.fstat(fd)
    return found.st_dev, found.st_ino


@pytest.fixture
def stdio(tmp_path: Path) -> Generator[None]:
    """fds 0 and 1 on files of their own (not the null device the test runner's fd 0 may already be), then back."""
    saved = os.dup(0), os.dup(1)
    try:
        with (tmp_path / "in").open("w+b") as given, (tmp_path / "out").open("w+b") as taken:
            os.dup2(given.fileno(), 0)
            os.dup2(taken.fileno(), 1)
        yield
    finally:
        os.dup2(saved[0], 0)
        os.dup2(saved[1], 1)
        os.close(saved[0])
        os.close(saved[1])


def steps(monkeypatch: pytest.MonkeyPatch) -> int:
    """How many ``dup2`` and ``close`` calls a whole claim makes."""
    counting = Interrupting(None)
    with monkeypatch.context() as patch:
        patch.setattr(_fds, "os", counting)
        with claim_stdio():
            pass
    return counting.calls


@pytest.mark.usefixtures("stdio")
def test_a_claim_interrupted_at_any_step_leaves_stdio_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    before = identity(0), identity(1)
    opened = sorted(os.listdir("/proc/self/fd"))
    total = steps(monkeypatch)
    assert total == 7  # three to claim, four to give back
    for after in range(1, total + 1):
        with monkeypatch.context() as patch:
            patch.setattr(_fds, "os", Interrupting(after))
            with pytest.raises(KeyboardInterrupt), claim_stdio():
                pass
        assert (identity(0), identity(1)) == before, f"interrupted after step {after}"
        assert sorted(os.listdir("/proc/self/fd")) == opened, f"interrupted after step {after}"
        # The lock was let go: stdio can be claimed again.
        with claim_stdio() as wire:
            assert (identity(wire[0]), identity(wire[1])) == before
