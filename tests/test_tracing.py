"""OpenTelemetry spans around dispatch, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import textwrap
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import agentfx
from agentfx._tracing import active_tracer
from tests.support import (
    AppAgent,
    Message,
    Model,
    NoInput,
    ReceivedTodos,
    RequestedCreateTodo,
    RequestedDeleteTodo,
    User,
    fixed_clock,
    recorder,
)

ROOT = Path(__file__).resolve().parents[1]


def traced(model: Model | None = None, principal: User | None = None, audit: agentfx.AuditSink | None = None) -> tuple[agentfx.AgentRuntime[Model, User], InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runtime = agentfx.bind(AppAgent, host=recorder(model, principal=principal).host, audit=audit, tracer=provider.get_tracer("tests"))
    return runtime, exporter


def only_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    [span] = exporter.get_finished_spans()
    assert span.name == "Agent.dispatch"
    return span


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.mark.anyio
async def test_a_dispatch_runs_in_one_span_with_agent_and_gen_ai_attributes() -> None:
    runtime, exporter = traced()
    await runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"}, agentfx.Invocation(id="call-1", transport="mcp"))
    span = only_span(exporter)
    assert attributes(span) == {
        "agent.capability": "requested_create_todo",
        "agent.transport": "mcp",
        "agent.invocation": "call-1",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "requested_create_todo",
        "gen_ai.tool.call.id": "call-1",
    }
    assert span.status.status_code is StatusCode.UNSET


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("target", "payload", "model", "principal", "capability", "error"),
    [
        (ReceivedTodos, {}, None, None, "ReceivedTodos", "AgentUnknownCapabilityError"),
        ("no_such", {}, None, None, "no_such", "AgentUnknownCapabilityError"),
        ("delete_selected_todo", {}, Model(), None, "delete_selected_todo", "AgentCapabilityUnavailableError"),
        (RequestedCreateTodo, {"title": 1}, None, None, "requested_create_todo", "AgentInvalidInputError"),
        ("rename_todo", {"id": "a", "title": "b"}, None, User("u"), "rename_todo", "AgentAuthorizationError"),
    ],
)
async def test_refusals_are_spans_too_with_their_failure_tag(
    target: Any, payload: object, model: Model | None, principal: User | None, capability: str, error: str
) -> None:
    runtime, exporter = traced(model, principal)
    await runtime.messages.dispatch(target, payload, agentfx.Invocation(id="call-2"))
    span = only_span(exporter)
    attrs = attributes(span)
    assert attrs["agent.capability"] == attrs["gen_ai.tool.name"] == capability
    assert attrs["agent.invocation"] == attrs["gen_ai.tool.call.id"] == "call-2"
    assert attrs["agent.transport"] == "in-app"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["error.type"] == error
    assert span.status.status_code is StatusCode.ERROR


@pytest.mark.anyio
async def test_a_cancelled_invocation_span() -> None:
    runtime, exporter = traced()
    controller = agentfx.AbortController()
    controller.abort()
    await runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"}, agentfx.Invocation(signal=controller.signal))
    assert attributes(only_span(exporter))["error.type"] == "AgentCancelledError"


@pytest.mark.anyio
async def test_a_defect_span_and_audit_both_say_agent_defect() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    log = agentfx.audit_log(clock=fixed_clock)

    def boom(model: Model) -> bool:
        raise RuntimeError("bug")

    defn = agentfx.define(agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", available=boom)))
    runtime = agentfx.bind(defn, host=recorder().host, audit=log, tracer=provider.get_tracer("tests"))
    with pytest.raises(RuntimeError):
        await runtime.messages.dispatch(RequestedDeleteTodo, {"id": "x"}, agentfx.Invocation(id="c"))
    span = only_span(exporter)
    assert attributes(span)["error.type"] == "AgentDefect"
    assert attributes(span)["agent.capability"] == "requested_delete_todo"
    assert span.status.status_code is StatusCode.ERROR
    assert [e.outcome for e in log.entries()] == ["AgentDefect"]


@pytest.mark.anyio
async def test_an_interrupted_dispatch_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def authorize(req: Any) -> bool:
        await anyio.sleep_forever()
        return True

    defn = agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(
                RequestedDeleteTodo,
                "Delete",
                input=NoInput,
                to_message=lambda _, ctx: RequestedDeleteTodo("x"),
                authorize=authorize,
            ),
        )
    )
    runtime = agentfx.bind(defn, host=recorder().host, tracer=provider.get_tracer("tests"))
    with anyio.move_on_after(0.01):
        await runtime.messages.dispatch(RequestedDeleteTodo, {})
    assert attributes(only_span(exporter))["error.type"] == "interrupted"


class Stop(BaseException):
    pass


@pytest.mark.anyio
async def test_a_base_exception_is_interrupted_in_both_span_and_audit() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    log = agentfx.audit_log(clock=fixed_clock)

    def stop(model: Model) -> bool:
        raise Stop

    defn = agentfx.define(agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", available=stop)))
    runtime = agentfx.bind(defn, host=recorder().host, audit=log, tracer=provider.get_tracer("tests"))
    with pytest.raises(Stop):
        await runtime.messages.dispatch(RequestedDeleteTodo, {"id": "x"})
    assert attributes(only_span(exporter))["error.type"] == "interrupted"
    assert [e.outcome for e in log.entries()] == ["interrupted"]


@pytest.mark.anyio
async def test_one_span_per_dispatch_with_tracing_and_audit_together() -> None:
    log = agentfx.audit_log(clock=fixed_clock)
    runtime, exporter = traced(audit=log)
    for n in range(3):
        await runtime.messages.dispatch(RequestedCreateTodo, {"title": str(n)}, agentfx.Invocation(id=f"c{n}"))
    spans = exporter.get_finished_spans()
    assert [attributes(s)["agent.invocation"] for s in spans] == ["c0", "c1", "c2"]
    assert [e.invocation for e in log.entries()] == ["c0", "c1", "c2"]


# Tracing never changes a dispatch


class BrokenProcessor(SpanProcessor):
    def __init__(self, where: str) -> None:
        self.where = where

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.where == "start":
            raise RuntimeError("on_start saw hunter2")

    def on_end(self, span: ReadableSpan) -> None:
        if self.where == "end":
            raise RuntimeError("on_end saw hunter2")


class RefusingSpan:
    def set_attribute(self, key: str, value: object) -> None:
        raise ValueError(f"attribute limit: {value}")

    def set_status(self, status: object) -> None:
        raise ValueError("no status")


class RefusingSpanTracer:
    @contextlib.contextmanager
    def start_as_current_span(self, name: str, **options: object) -> Generator[RefusingSpan]:
        yield RefusingSpan()


class RaisingTracer:
    def start_as_current_span(self, name: str, **options: object) -> object:
        raise RuntimeError("tracer saw hunter2")


class ScopelessTracer:
    def start_as_current_span(self, name: str, **options: object) -> object:
        return object()  # not a context manager


def sdk_tracer(where: str) -> Any:
    provider = TracerProvider()
    provider.add_span_processor(BrokenProcessor(where))
    return provider.get_tracer("tests")


BROKEN_TRACERS: dict[str, tuple[Callable[[], Any], set[tuple[str, str]]]] = {
    "on_start raises": (lambda: sdk_tracer("start"), {("start", "RuntimeError")}),
    "on_end raises": (lambda: sdk_tracer("end"), {("end", "RuntimeError")}),
    "set_attribute raises": (RefusingSpanTracer, {("annotate", "ValueError")}),
    "start_as_current_span raises": (RaisingTracer, {("start", "RuntimeError")}),
    "no context manager": (ScopelessTracer, {("start", "AttributeError")}),
}


def _defective(model: Model) -> bool:
    raise RuntimeError("bug")


def _outcomes_of(tracer: Any) -> tuple[list[object], list[object], list[agentfx.AuditEntry]]:
    """Every kind of ending, dispatched twice each: outcomes (or what was raised), Messages sent, audit entries."""
    rec = recorder(principal=User("ada"))
    log = agentfx.audit_log(clock=fixed_clock, include_input=True)
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=log, tracer=tracer)
    defect = agentfx.define(agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", available=_defective)))
    broken = agentfx.bind(defect, host=rec.host, audit=log, tracer=tracer)
    outcomes: list[object] = []

    async def main() -> None:
        for n in range(2):
            for target, payload in ((RequestedCreateTodo, {"title": "hunter2"}), ("no_such", {}), ("rename_todo", {"id": "a", "title": "b"})):
                outcomes.append(await runtime.messages.dispatch(target, payload, agentfx.Invocation(id=f"c{n}")))
                assert trace.get_current_span() is trace.INVALID_SPAN  # no span left current
            try:
                await broken.messages.dispatch(RequestedDeleteTodo, {"id": "x"}, agentfx.Invocation(id=f"d{n}"))
            except RuntimeError as exc:
                outcomes.append(("raised", str(exc)))

    anyio.run(main)
    return outcomes, list(rec.dispatched), log.entries()


@pytest.mark.parametrize("broken", list(BROKEN_TRACERS))
def test_a_tracer_that_fails_changes_nothing_and_is_logged_once_by_type(
    broken: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentfx import _tracing

    monkeypatch.setattr(_tracing, "_told", set[tuple[str, type[BaseException]]]())
    make, causes = BROKEN_TRACERS[broken]
    untraced = _outcomes_of(None)
    with caplog.at_level(logging.ERROR, logger="agentfx.tracing"):
        traced_outcomes = _outcomes_of(make())
    assert traced_outcomes == untraced
    assert ("raised", "bug") in untraced[0]
    logged = [record.getMessage() for record in caplog.records if record.name == "agentfx.tracing"]
    assert logged == [
        f"tracing could not {stage} a dispatch span ({kind} raised); the dispatch is unaffected. Logged once per cause"
        for stage, kind in sorted(causes)
    ]
    assert "hunter2" not in caplog.text


def test_a_duck_typed_tracer_without_opentelemetry_installed_sees_refusals_without_a_status() -> None:
    program = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
        import contextlib
        import anyio, msgspec, agentfx

        class Ping(msgspec.Struct, tag=True):
            pass

        class Span:
            def __init__(self):
                self.attributes, self.statuses = {}, []
            def set_attribute(self, key, value):
                self.attributes[key] = value
            def set_status(self, status):
                self.statuses.append(status)

        spans = []
        class Tracer:
            @contextlib.contextmanager
            def start_as_current_span(self, name, **options):
                spans.append(Span())
                yield spans[-1]

        definition = agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping", authorize=lambda request: False)))
        runtime = agentfx.bind(definition, host=agentfx.Host(model=lambda: None, dispatch=lambda m: None), tracer=Tracer())

        async def main():
            return await runtime.messages.attempt("ping", {})

        print(type(anyio.run(main)).__name__, spans[0].attributes["error.type"], spans[0].statuses)
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "AgentAuthorizationError AgentAuthorizationError []"


def test_no_tracer_without_a_configured_provider() -> None:
    assert active_tracer() is None


def test_without_the_private_provider_slot_the_public_call_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry import trace

    from agentfx import _tracing

    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    monkeypatch.delattr(trace, "_TRACER_PROVIDER")
    monkeypatch.setattr(_tracing, "_cached", None)
    assert active_tracer() is None
    provider = TracerProvider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    tracer = active_tracer()
    assert tracer is not None
    assert active_tracer() is tracer


@pytest.mark.anyio
async def test_without_a_tracer_no_span_work_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("span work with tracing off")

    from agentfx import runtime as runtime_module

    monkeypatch.setattr(runtime_module, "_name_span", forbidden)
    monkeypatch.setattr(runtime_module, "_set_error_status", forbidden)
    rt = agentfx.bind(AppAgent, host=recorder().host)
    await rt.messages.dispatch(ReceivedTodos, {})
    await rt.messages.dispatch(RequestedCreateTodo, {"title": "a"})


def test_the_global_provider_is_detected_in_a_fresh_process() -> None:
    script = textwrap.dedent(
        """
        import anyio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        import agentfx
        from agentfx._tracing import active_tracer
        from tests.support import AppAgent, RequestedCreateTodo, recorder

        assert active_tracer() is None
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        assert active_tracer() is not None
        runtime = agentfx.bind(AppAgent, host=recorder().host)

        async def main():
            await runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"}, agentfx.Invocation(id="g1"))

        anyio.run(main)
        [span] = exporter.get_finished_spans()
        print(span.name, span.attributes["agent.invocation"])
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Agent.dispatch g1"


def test_a_tracer_provider_named_in_the_environment_turns_tracing_on() -> None:
    import os
    import subprocess
    import sys

    program = "from agentfx._tracing import active_tracer; print(active_tracer() is not None)"
    env = {**os.environ, "OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True, timeout=30)
    assert done.stdout.strip() == "True"


def test_a_tracer_provider_the_environment_names_but_cannot_load_leaves_dispatch_working() -> None:
    import os
    import subprocess
    import sys

    program = (
        "import anyio, msgspec, agentfx\n"
        "class Ping(msgspec.Struct, tag=True):\n"
        "    pass\n"
        "log = agentfx.audit_log()\n"
        "runtime = agentfx.bind(agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, 'Ping'))),\n"
        "    host=agentfx.Host(model=lambda: None, dispatch=lambda m: None), audit=log)\n"
        "async def main():\n"
        "    for _ in range(2):\n"
        "        await runtime.messages.call(Ping, {})\n"
        "anyio.run(main)\n"
        "print([e.outcome for e in log.entries()])\n"
    )
    env = {**os.environ, "OTEL_PYTHON_TRACER_PROVIDER": "no_such_provider"}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True, timeout=30)
    assert done.stdout.strip() == "['dispatched', 'dispatched']"
    assert done.stderr.count("cannot be loaded") == 1
