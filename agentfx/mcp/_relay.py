"""Streams that stand in for a transport's own and hand on what it carries, with something done on the way.

The SDK takes a server's read and write streams duck-typed (``receive`` or
``send``, ``aclose``, async iteration, ``async with``, and a read stream's
``last_context``). A relay holds the stream it stands in for and answers all
of that for it; a subclass says only what it does to each item. This module
deliberately knows nothing of what they do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

import anyio

if TYPE_CHECKING:
    from types import TracebackType

    from mcp.shared._stream_protocols import ReadStream, WriteStream

__all__ = ["ReadRelay", "WriteRelay"]

T = TypeVar("T")


class _Relay:
    __slots__ = ("_stream",)

    # Any here: each kind of relay says which stream it holds.
    _stream: Any

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        await self.aclose()


class ReadRelay(_Relay, Generic[T]):
    """A read stream handing on what ``stream`` receives: override :meth:`receive`, reading ``self._stream``."""

    __slots__ = ()

    _stream: ReadStream[T]

    def __init__(self, stream: ReadStream[T]) -> None:
        self._stream = stream

    @property
    def last_context(self) -> object:
        # The sender's context, for a transport whose stream carries one (the SDK reads it duck-typed).
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> T:
        return await self._stream.receive()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class WriteRelay(_Relay, Generic[T]):
    """A write stream handing on to ``stream`` what it is sent: override :meth:`send`, writing ``self._stream``."""

    __slots__ = ()

    _stream: WriteStream[T]

    def __init__(self, stream: WriteStream[T]) -> None:
        self._stream = stream

    async def send(self, item: T, /) -> None:
        await self._stream.send(item)
