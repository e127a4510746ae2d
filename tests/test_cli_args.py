"""The ``agentfx`` command's flags: a value that names nothing is a usage error in one line."""

from __future__ import annotations

import io

import pytest

from agentfx.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("check", [("--check", ""), ("--check=",)])
@pytest.mark.parametrize("target", ["tests.mcp_app:definition", "no_such_module_here:x"])
def test_an_empty_check_file_is_a_usage_error_in_one_line(check: tuple[str, ...], target: str) -> None:
    # Before the target is loaded: the flag is wrong whatever the target is.
    said = 'agentfx: --check takes the FILE of a committed manifest; "" names no file\n'
    assert run("manifest", target, *check) == (2, "", said)
