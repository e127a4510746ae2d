"""``agentfx serve --redis URL [--namespace NS]``: usage errors, the install hint, and no Redis import without it."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentfx.cli import main

ROOT = Path(__file__).resolve().parent.parent
TARGET = "tests.redis_app:app"


def run(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    code = main(list(argv), out=io.StringIO(), err=err)
    return code, err.getvalue()


def in_a_fresh_interpreter(code: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=50, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()


def test_redis_takes_only_a_redis_url() -> None:
    code, err = run("serve", TARGET, "--redis", "http://127.0.0.1:1")
    assert code == 2
    assert err == 'agentfx: --redis takes a redis://, rediss:// or unix:// URL, got "http://127.0.0.1:1"\n'


def test_a_namespace_without_redis_is_a_usage_error() -> None:
    code, err = run("serve", TARGET, "--namespace", "shop")
    assert (code, err) == (2, "agentfx: --namespace names the keys of --redis; give --redis URL too\n")


def test_a_malformed_namespace_is_a_usage_error() -> None:
    code, err = run("serve", TARGET, "--redis", "redis://127.0.0.1:1/0", "--namespace", "has space")
    assert code == 2 and err.startswith("agentfx: The Redis namespace must be a non-empty string without spaces")


@pytest.mark.parametrize("target", ["tests.redis_app:runtime_factory"])
def test_redis_serves_an_app_not_a_runtime_factory(target: str) -> None:
    code, err = run("serve", target, "--redis", "redis://127.0.0.1:1/0")
    assert code == 2
    assert err == f'agentfx: --redis serves an App, and "{target}" names a runtime factory, which runs its own program\n'


def test_without_the_extra_redis_says_how_to_install_it() -> None:
    out = in_a_fresh_interpreter(
        """
        import io, sys
        sys.modules["redis"] = None  # as if redis-py were not installed
        from agentfx.cli import main
        err = io.StringIO()
        print(main(["serve", "tests.redis_app:app", "--redis", "redis://127.0.0.1:1/0"], err=err), err.getvalue())
        """
    )
    assert out == "2 agentfx: --redis needs the Redis extra: pip install 'agentfx[redis]'"


def test_the_cli_imports_redis_only_for_redis() -> None:
    out = in_a_fresh_interpreter(
        """
        import io, sys
        from agentfx.cli import main
        main(["manifest", "tests.redis_app:app"], out=io.StringIO())
        main(["serve", "tests.redis_app:app", "--namespace", "x"], err=io.StringIO())
        print(sorted(m for m in sys.modules if m == "redis" or m.startswith(("redis.", "agentfx.redis"))))
        """
    )
    assert out == "[]"
