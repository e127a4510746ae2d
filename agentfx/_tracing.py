"""Optional OpenTelemetry spans around dispatch.

Nothing here runs unless ``opentelemetry-api`` is installed *and* a tracer
provider has been configured (or a tracer was passed to ``bind``): with
tracing off, the runtime does no span work at all. Tracing never changes a
dispatch: a tracer, span or processor that raises is reported here, through
:func:`span_failed`, and the dispatch runs on as if untraced.
"""

from __future__ import annotations

import logging
import os
from typing import Any

try:
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised only without the extra
    _trace = None

__all__ = ["ERROR_STATUS", "active_tracer", "span_failed"]

ERROR_STATUS: Any = None if _trace is None else _trace.Status(_trace.StatusCode.ERROR)
"""The status of a failed dispatch's span, made once (a Status is immutable); ``None``
without ``opentelemetry-api``, when a duck-typed tracer's span gets no status."""

_logger = logging.getLogger("agentfx.tracing")
_told: set[tuple[str, type[BaseException]]] = set()

_cached: tuple[object, Any] | None = None
# A provider named in the environment is loaded by the public call on first use.
_environment_provider_usable = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


def _give_up_on_environment() -> None:
    global _environment_provider_usable
    if _environment_provider_usable:
        _environment_provider_usable = False
        logging.getLogger("agentfx").warning(
            "OTEL_PYTHON_TRACER_PROVIDER names a tracer provider that cannot be loaded; agentfx traces nothing"
        )
_UNKNOWN: Any = object()


def span_failed(stage: str, error: Exception) -> None:
    """Log that the dispatch span could not ``stage`` (start, annotate, end): once per stage and exception type.

    Only the exception's type is named: its text may repeat what the span was
    given, which is the caller's (an invocation id, a capability name).
    """
    cause = (stage, type(error))
    if cause not in _told:
        _told.add(cause)
        _logger.error(
            "tracing could not %s a dispatch span (%s raised); the dispatch is unaffected. Logged once per cause",
            stage,
            type(error).__name__,
        )


def active_tracer() -> Any:
    """The agentfx tracer of the configured global provider, or ``None`` when tracing is off."""
    global _cached
    if _trace is None:
        return None
    # The global provider slot is read directly: ``get_tracer_provider()`` consults
    # the process environment on every call while none is set, which would put an
    # environment lookup on every dispatch with tracing off.
    # A release without that private slot falls back to the public call.
    try:
        provider = _trace._TRACER_PROVIDER  # pyright: ignore[reportPrivateUsage]
    except AttributeError:
        provider = _UNKNOWN
    if provider is None and not _environment_provider_usable:
        return None  # the common case, tracing off, first
    if provider is _UNKNOWN or provider is None:
        try:
            provider = _trace.get_tracer_provider()
        except Exception:
            # A provider the environment names but cannot load must not break
            # dispatch: tracing stays off, and is not retried on every call.
            _give_up_on_environment()
            return None
    if provider is None or isinstance(provider, _trace.ProxyTracerProvider | _trace.NoOpTracerProvider):
        return None
    if _cached is None or _cached[0] is not provider:
        _cached = (provider, provider.get_tracer("agentfx"))
    return _cached[1]
