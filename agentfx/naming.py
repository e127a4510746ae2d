"""Message tags and capability names.

This layer owns two small rules: what a Message class's *tag* is, and how a
tag turns into a protocol-facing capability name (and whether a name is one a
protocol client will accept). It knows nothing of contracts, variants or
dispatch; callers decide when a name is checked and what to do with it.
"""

from __future__ import annotations

import functools
import re
from typing import cast

from agentfx.errors import ContractError, echo, shown

__all__ = ["check_name", "default_name", "message_tag"]

# MCP and most tool-calling clients accept exactly this alphabet; checking it
# where the name is written beats a rejection at registration time that no
# longer points back at the contract.
_VALID_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")


def message_tag(cls: type) -> str:
    """The tag a Message class is known by.

    A msgspec tag wins when the class has one (``tag=True`` means the class
    name); an integer tag is rendered as a string. Otherwise the class name.

    >>> import msgspec
    >>> class Renamed(msgspec.Struct, tag="renamed"):
    ...     pass
    >>> class Plain(msgspec.Struct):
    ...     pass
    >>> message_tag(Renamed), message_tag(Plain)
    ('renamed', 'Plain')
    """
    config = getattr(cls, "__struct_config__", None)
    tag: object = getattr(config, "tag", None)
    if tag is None:
        return cls.__name__
    return tag if isinstance(tag, str) else str(tag)


@functools.lru_cache(maxsize=4096)
def default_name(tag: str) -> str:
    """The default capability name for a tag: every capital starts a word.

    Runs of capitals are not grouped, so a tag with an acronym is better given
    an explicit name. Names that are already snake case come back unchanged.

    >>> default_name("RequestedDeleteTodo"), default_name("Load2Todos")
    ('requested_delete_todo', 'load2_todos')
    >>> default_name("LoadedHTTPCache")
    'loaded_h_t_t_p_cache'
    """
    out: list[str] = []
    for char in tag:
        if "A" <= char <= "Z":
            # A separator already there starts the word; doubling it would
            # turn "Foo_Bar" into "foo__bar".
            if out and out[-1] not in "_-":
                out.append("_")
            out.append(char.lower())
        else:
            out.append(char)
    return "".join(out)


def check_name(tag: str, name: str) -> str:
    """Return ``name`` if it is a valid capability name, else raise.

    A valid name is 1-128 characters of ``[a-zA-Z0-9_-]``.

    >>> check_name("RequestedCreateTodo", "create_todo")
    'create_todo'
    >>> try:
    ...     check_name("RequestedCreateTodo", "create todo")
    ... except ContractError as error:
    ...     print(error)
    Cannot expose "RequestedCreateTodo": "create todo" is not a valid capability name.
    Use 1-128 characters of [a-zA-Z0-9_-].

    Raises:
        ContractError: when the name is not a string, uses another character
            or has the wrong length.
    """
    # Annotated as str, but an untyped contract can pass anything as a name.
    if not isinstance(cast(object, name), str):
        raise ContractError(
            f'Cannot expose "{tag}": {shown(name)} is not a valid capability name. '
            "Use a string of 1-128 characters of [a-zA-Z0-9_-]."
        )
    if _VALID_NAME.fullmatch(name) is None:
        raise ContractError(
            f'Cannot expose "{tag}": "{echo(name)}" is not a valid capability name. '
            "Use 1-128 characters of [a-zA-Z0-9_-]."
        )
    return name
