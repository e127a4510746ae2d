"""A person's answer given after the call that asked has ended, and what it covers: the prompt they were shown.

An adapter whose person answers out of band (an A2A task's reply, an MCP
retry, a framework's approval of a deferred call) re-runs the call on the
Model as it is then. This layer owns the one rule every such adapter keeps:
the answer covers the prompt the person was shown and nothing else. A call
that now asks something else (another todo was selected meanwhile) is not
approved by it; the adapter asks again, in the new words. It also owns the
bounded table an adapter keeps of what it asked, by call. It deliberately
knows nothing of any adapter's wire or framework: each says where the shown
prompt comes from and how to ask again.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Generic, TypeVar, cast

from .confirm import ConfirmationRequest
from .errors import AgentAuthorizationError, AgentConfirmationRequiredError

__all__ = ["Approval", "Remembered", "asked_again", "kept"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


class Approval:
    """An ``Invocation.confirm`` for a re-run: ``answer`` to the prompt ``shown``, ``False`` to any other.

    A prompt other than the one shown (or any prompt, when what was shown is
    not known) is kept in :attr:`changed`: the person must be asked about it.
    ``shown`` may be the prompt as :func:`kept` keeps it: a long one's digest.

    >>> import anyio
    >>> from agentfx.confirm import ConfirmationRequest
    >>> approval = Approval('Delete "milk"?')
    >>> ask = lambda prompt: anyio.run(approval, ConfirmationRequest("delete", "Delete", prompt, None))
    >>> ask('Delete "milk"?'), approval.changed
    (True, None)
    >>> ask('Delete "report"?'), approval.changed
    (False, 'Delete "report"?')
    """

    __slots__ = ("answer", "changed", "shown")

    def __init__(self, shown: str | bytes | None, *, answer: bool = True) -> None:
        self.shown = shown
        self.answer = answer
        self.changed: str | None = None

    async def __call__(self, request: ConfirmationRequest) -> bool:
        shown = self.shown
        if shown is not None and (request.prompt if isinstance(shown, str) else kept(request.prompt)) == shown:
            return self.answer
        # Not what the person answered: the Model moved on since, and this
        # answer does not cover what the call would now do.
        self.changed = request.prompt
        return False


def asked_again(changed: str | None, outcome: T) -> T | AgentConfirmationRequiredError:
    """``outcome``, or, when a re-run's approval did not cover the prompt it met, the request to ask about that one.

    The pipeline refuses such a re-run ``Declined: <new prompt>`` (its
    ``confirm`` answered ``False``); nobody declined it, so the adapter asks.
    """
    if changed is not None and isinstance(outcome, AgentAuthorizationError):
        return AgentConfirmationRequiredError.of(outcome.capability, outcome.tag, changed)
    return outcome


class Remembered(Generic[K, V]):
    """What an adapter asked about, by call: at most ``limit`` entries, the oldest forgotten first.

    Bounded in bytes too: a long text in a key is kept as its digest. A value
    is kept as given: a text the model or the Model makes (a prompt) is
    remembered as :func:`kept` makes it.

    >>> kept = Remembered[str, int](2)
    >>> for call in ("a", "b", "c"):
    ...     kept.remember(call, len(call))
    >>> kept.pop("a"), kept.pop("c"), kept.pop("c")
    (None, 1, None)
    """

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int) -> None:
        self._entries: OrderedDict[object, V] = OrderedDict()
        self._limit = limit

    def remember(self, key: K, value: V) -> None:
        kept = _compact(key)
        self._entries.pop(kept, None)
        self._entries[kept] = value
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)

    def pop(self, key: K) -> V | None:
        return self._entries.pop(_compact(key), None)


_KEY_TEXT_MAX = 128
"""The longest text a table keeps as it is in a key; a longer one is kept as its digest."""


def kept(text: str) -> str | bytes:
    """``text`` as a table keeps it: as it is, or its digest when it is longer than :data:`_KEY_TEXT_MAX`.

    >>> kept("Delete the milk?"), len(kept("x" * 1_000_000))
    ('Delete the milk?', 32)
    """
    return cast("str | bytes", _compact(text))


def _compact(key: object) -> object:
    """``key`` with every long text in it (a model's call id) replaced by its digest.

    The table is bounded in entries; a call id is the model's text, of any
    length, so without this one entry could hold megabytes. The digest is
    ``bytes``, never equal to any text, so no id the model writes can name
    another call's entry.

    >>> _compact(("conversation", "call_1")), type(_compact("x" * 200)).__name__
    (('conversation', 'call_1'), 'bytes')
    """
    if isinstance(key, str):
        if len(key) <= _KEY_TEXT_MAX:
            return key
        return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    if type(key) is tuple:
        return tuple(_compact(part) for part in cast("tuple[object, ...]", key))
    return key
