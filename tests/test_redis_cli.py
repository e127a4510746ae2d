"""``agentfx serve --redis URL [--namespace NS]``: usage errors, a Redis that cannot start, the install hint, and no Redis import without it."""

from __future__ import annotations

import contextlib
import io
import socket
import socketserver
import subprocess
import sys
import textwrap
import threading
import urllib.parse
from collections.abc import AsyncGenerator, Generator
from pathlib import Path

import pytest

from agentfx.cli import main
from tests.redis_server import free_port, redis_server
from tests.redis_server import anyio_backend as anyio_backend

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


@pytest.mark.parametrize("namespace", ["has space", ""])
def test_a_malformed_namespace_is_a_usage_error(namespace: str) -> None:
    # The empty one too: it is not a namespace left out, so it is not the default's.
    code, err = run("serve", TARGET, "--redis", "redis://127.0.0.1:1/0", "--namespace", namespace)
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


# --- a Redis that cannot be reached or used when the program first loads: exit 3, one line ----------


@contextlib.contextmanager
def _not_redis() -> Generator[int]:
    """A TCP server that answers every connection as an HTTP server would, then closes it."""

    class Answer(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.recv(1024)
            self.request.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Answer) as server:
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        try:
            yield int(server.server_address[1])
        finally:
            server.shutdown()
            thread.join()


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_unreachable_redis_cannot_start_in_one_line_naming_where(transport: str) -> None:
    port = free_port()
    flags = ("--transport", "http", "--port", "0") if transport == "http" else ()
    code, err = run("serve", TARGET, *flags, "--redis", f"redis://127.0.0.1:{port}/0")
    assert (code, err) == (3, f"agentfx: cannot start: the Redis at 127.0.0.1:{port} cannot be reached (Connection refused)\n")


def test_a_redis_that_wants_a_password_says_where_to_give_it_and_never_shows_one() -> None:
    with redis_server(password="s3cret-pw") as running:
        port = running.port
        code, err = run("serve", TARGET, "--redis", f"redis://127.0.0.1:{port}/0")
        assert (code, err) == (
            3,
            f"agentfx: cannot start: the Redis at 127.0.0.1:{port} needs a password; give it in the --redis URL "
            f"(redis://:PASSWORD@127.0.0.1:{port}/0)\n",
        )
        code, err = run("serve", TARGET, "--redis", f"redis://ann@127.0.0.1:{port}/0")
        assert (code, err) == (
            3,
            f"agentfx: cannot start: the Redis at 127.0.0.1:{port} needs a password; give it in the --redis URL "
            f"(redis://ann:PASSWORD@127.0.0.1:{port}/0)\n",
        )
        refused = f"agentfx: cannot start: the Redis at 127.0.0.1:{port} refused the credentials in the --redis URL\n"
        assert run("serve", TARGET, "--redis", f"redis://:wrong-pw@127.0.0.1:{port}/0") == (3, refused)
        # redis-py takes a password from the query too: it was given, and refused.
        assert run("serve", TARGET, "--redis", f"redis://127.0.0.1:{port}/0?password=wrong-pw") == (3, refused)


def test_a_server_that_is_not_redis_cannot_start() -> None:
    with _not_redis() as port:
        code, err = run("serve", TARGET, "--redis", f"redis://:pw-not-shown@127.0.0.1:{port}/0")
    assert code == 3
    assert err.startswith(f"agentfx: cannot start: 127.0.0.1:{port} does not answer as Redis does (")
    assert err.count("\n") == 1 and "pw-not-shown" not in err


@pytest.mark.parametrize("key", ["model", "log"])
def test_a_namespace_holding_a_key_of_the_wrong_kind_cannot_start_in_one_line_naming_it(key: str) -> None:
    with redis_server() as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=2) as sock:
            sock.sendall(f"SET wrong:{key} hello\r\n".encode())
            assert sock.recv(16) == b"+OK\r\n"
        code, err = run("serve", TARGET, "--redis", f"redis://127.0.0.1:{server.port}/0", "--namespace", "wrong")
    assert code == 3
    assert err.startswith("agentfx: cannot start: ") and f"wrong:{key}" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("redis://[::1", 'agentfx: --redis takes a redis://, rediss:// or unix:// URL; "redis://[::1" is not one (Invalid IPv6 URL)\n'),
        (
            "redis://:secret@[::1",
            'agentfx: --redis takes a redis://, rediss:// or unix:// URL; "redis://***@[::1" is not one (Invalid IPv6 URL)\n',
        ),
        (
            "redis://:secret@h:abc/0",
            "agentfx: --redis takes a redis://, rediss:// or unix:// URL; \"redis://:***@h:abc/0\" is not one "
            "(Port could not be cast to integer value as 'abc')\n",
        ),
        (
            "redis://:secret@h/0?socket_timeout=soon",
            "agentfx: --redis: \"redis://:***@h/0?socket_timeout=soon\" is not a URL redis-py accepts "
            "(Invalid value for 'socket_timeout' in connection URL.)\n",
        ),
        ("http://u:secret@h:1", 'agentfx: --redis takes a redis://, rediss:// or unix:// URL, got "http://u:***@h:1"\n'),
        (
            "http://h:1/0?password=secret",
            'agentfx: --redis takes a redis://, rediss:// or unix:// URL, got "http://h:1/0?password=***"\n',
        ),
        (
            "redis://h/0?username=ann&Password=secret&pass%77ord=secret&socket_timeout=soon",
            'agentfx: --redis: "redis://h/0?username=***&Password=***&pass%77ord=***&socket_timeout=soon" is not a URL '
            "redis-py accepts (Invalid value for 'socket_timeout' in connection URL.)\n",
        ),
        (
            "redis://:secret@h/0?sockettimeout=5",
            'agentfx: --redis: "redis://:***@h/0?sockettimeout=5" is not a URL redis-py accepts '
            '(a redis:// URL takes no option "sockettimeout")\n',
        ),
        (
            "redis://h/0?password=secret&ssl_cert_reqs=none",
            'agentfx: --redis: "redis://h/0?password=***&ssl_cert_reqs=none" is not a URL redis-py accepts '
            '(a redis:// URL takes no option "ssl_cert_reqs")\n',
        ),
        (
            "unix://:secret@/tmp/redis.sock?db=0&ssl=true",
            'agentfx: --redis: "unix://:***@/tmp/redis.sock?db=0&ssl=true" is not a URL redis-py accepts '
            '(a unix:// URL takes no option "ssl")\n',
        ),
        (
            "rediss://h/0?ssl_cert_reqs=maybe",
            'agentfx: --redis: "rediss://h/0?ssl_cert_reqs=maybe" is not a URL redis-py accepts '
            "(Invalid SSL Certificate Requirements Flag: maybe)\n",
        ),
        (
            "redis://h/0?protocol=9",
            'agentfx: --redis: "redis://h/0?protocol=9" is not a URL redis-py accepts (protocol must be either 2 or 3)\n',
        ),
        (
            "redis://[::1/0?password=secret",
            'agentfx: --redis takes a redis://, rediss:// or unix:// URL; "redis://[::1/0?password=***" is not one '
            "(Invalid IPv6 URL)\n",
        ),
    ],
)
def test_a_malformed_redis_url_is_a_usage_error_without_its_password(url: str, said: str) -> None:
    assert run("serve", TARGET, "--redis", url) == (2, said)


@pytest.mark.parametrize("path", ["/5x", "/0/1", "/-1", "/db", "//0"])
def test_a_redis_path_that_is_not_a_database_number_is_a_usage_error(path: str) -> None:
    url = f"redis://:secret@127.0.0.1:1{path}"
    said = f'agentfx: --redis: the path of "redis://:***@127.0.0.1:1{path}" names no database; write none, or a number: redis://HOST:PORT/0\n'
    assert run("serve", TARGET, "--redis", url) == (2, said)


def test_an_option_no_connection_takes_is_a_usage_error_over_http_too() -> None:
    # Refused before the port is bound or the program started, not as the application's error.
    url = "redis://127.0.0.1:1/0?sockettimeout=5"
    code, err = run("serve", TARGET, "--transport", "http", "--port", "0", "--redis", url)
    assert (code, err) == (
        2,
        f'agentfx: --redis: "{url}" is not a URL redis-py accepts (a redis:// URL takes no option "sockettimeout")\n',
    )


@pytest.mark.parametrize("scheme", ["redis", "rediss"])
def test_the_options_of_a_redis_url_get_past_the_check(scheme: str) -> None:
    port = free_port()
    options = "socket_timeout=5&health_check_interval=10" + ("&ssl_cert_reqs=none" if scheme == "rediss" else "")
    code, err = run("serve", TARGET, "--redis", f"{scheme}://127.0.0.1:{port}/0?{options}")
    assert (code, err) == (3, f"agentfx: cannot start: the Redis at 127.0.0.1:{port} cannot be reached (Connection refused)\n")


@pytest.mark.parametrize("path", ["", "/", "/0", "/15"])
def test_a_redis_url_with_no_database_or_a_number_gets_past_the_check(path: str) -> None:
    # Nothing listens there: the URL was accepted, and the first load says where it could not connect.
    port = free_port()
    code, err = run("serve", TARGET, "--redis", f"redis://127.0.0.1:{port}{path}")
    assert (code, err) == (3, f"agentfx: cannot start: the Redis at 127.0.0.1:{port} cannot be reached (Connection refused)\n")


@pytest.mark.anyio
async def test_a_redis_error_after_the_first_load_is_the_applications() -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    from agentfx.cli import _FirstLoad  # pyright: ignore[reportPrivateUsage]

    later = RedisConnectionError("lost it later")

    @contextlib.asynccontextmanager
    async def loads(init: object, update: object) -> AsyncGenerator[object]:
        yield init

    program = _FirstLoad(loads, urllib.parse.urlsplit("redis://127.0.0.1:6379/0"))
    with pytest.raises(RedisConnectionError) as raised:
        async with program(1, None) as loaded:
            assert loaded == 1
            raise later
    assert raised.value is later


@pytest.mark.anyio
@pytest.mark.parametrize("url", ["redis://:hunter2@127.0.0.1:6379/0", "redis://127.0.0.1:6379/0?password=hunter2"])
async def test_what_the_namespace_refused_is_said_without_the_password(url: str) -> None:
    from agentfx.cli import _CannotStart, _FirstLoad  # pyright: ignore[reportPrivateUsage]
    from agentfx.redis import RedisProgramError

    @contextlib.asynccontextmanager
    async def refuses(init: object, update: object) -> AsyncGenerator[object]:
        raise RedisProgramError("Redis refused to read ns:model for namespace 'ns': the user hunter2 may not")
        yield  # pragma: no cover - never reached

    with pytest.raises(_CannotStart) as raised:
        async with _FirstLoad(refuses, urllib.parse.urlsplit(url))(1, None):
            pass
    assert str(raised.value) == "cannot start: Redis refused to read ns:model for namespace 'ns': the user *** may not"
