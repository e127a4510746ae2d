"""``agentfx.pipeline.__all__`` names ``bind``, as every public step.

A star import reads ``__all__`` (for pyright as at run time), so this module
fails the type check, and the test, when ``bind`` is missing from it.
"""

from __future__ import annotations

from typing import Any, assert_type

from agentfx import Capability
from agentfx.pipeline import *  # noqa: F403


def composed() -> Step[Capability[Any, Any]]:  # noqa: F405
    return bind(bind(resolve(), check_not_aborted), check_available)  # noqa: F405


def test_bind_comes_with_the_steps() -> None:
    assert_type(composed(), Step[Capability[Any, Any]])  # noqa: F405
    assert callable(bind)  # noqa: F405
