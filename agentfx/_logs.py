"""Third-party loggers whose text would quote what a client sent, made to say only their name and level.

This layer owns one :class:`logging.Filter` and where it is installed: on
every logger of an SDK's server side (``a2a.*``, ``mcp.*``), never on its
client side, which logs only what a server sent. The SDKs log request ids,
methods, headers and their parsers' errors as they came (tracebacks quoting
client values among them); a record through the filter keeps only its
logger's name and level, so a client can neither flood the log nor forge a
line in it. It deliberately knows nothing of either SDK beyond its loggers'
names: an adapter says which tree is its SDK's.
"""

from __future__ import annotations

import logging

__all__ = ["WITHHELD", "Withheld", "withhold"]


class Withheld(logging.Filter):
    """Puts a fixed line in place of what a logger says: ``<name> logged at <LEVEL>; its text is withheld``."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = "%s logged at %s; its text is withheld"
        record.args = (record.name, record.levelname)
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


WITHHELD = Withheld()
"""The one filter instance, so installing it again adds nothing."""


def withhold(root: str, *, client: str) -> None:
    """Install :data:`WITHHELD` on ``root`` and every logger under it known by now, except ``client``'s tree.

    A logger's filters see only the records logged to that logger, not its
    children's, so each is given the filter; call this again once more of
    the SDK may have been imported (an adapter does when it starts serving).
    """
    for name in list(logging.Logger.manager.loggerDict):
        if name != root and not name.startswith(root + "."):
            continue
        if name == client or name.startswith(client + "."):
            continue
        logging.getLogger(name).addFilter(WITHHELD)
