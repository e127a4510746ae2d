"""Documentation at size: ``to_manifest`` of a contract of 200 capabilities.

The baseline is ``msgspec.json.schema_components`` of the same 200 Message
types: the JSON Schemas a hand-written server would have to produce to
advertise the same tools, from the same library agentfx builds on. The
manifest carries strictly more (closed schemas with the tag removed, names,
descriptions, availability, authorization, completion), so the ratio says
what documenting a contract costs over describing its types at all.

Two more rows put the figure in context: writing the manifest out
(``json.dumps(..., indent=2)``, what ``agentfx manifest`` does next), and
declaring the contract (``expose`` + ``define``, paid once at import, where
every input schema is generated and checked).

This module deliberately knows nothing of runtimes: documentation never reads a Model.
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any

import msgspec

import agentfx

from .harness import Config, Row, SyncOp, compare_sync, row

__all__ = ["contract_of", "manifest_at_size"]


class Tag(msgspec.Struct, frozen=True):
    label: Annotated[str, msgspec.Meta(min_length=1, max_length=40)]
    color: str | None = None


class Done(msgspec.Struct, frozen=True, tag=True):
    id: str


def _message_class(i: int) -> type[msgspec.Struct]:
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = [
        ("title", Annotated[str, msgspec.Meta(min_length=1, max_length=200)]),
        ("count", int, 0),
    ]
    if i % 2:
        fields.append(("tags", tuple[Tag, ...], ()))
    if i % 3 == 0:
        fields.append(("due", str | None, None))
    return msgspec.defstruct(f"Requested{i:03d}", fields, tag=True, frozen=True, module=__name__)


def _either(left: Any, right: Any) -> Any:
    return left | right


def _open(model: object) -> bool:
    return True


def _allow(request: agentfx.AuthorizationRequest[Any, Any, Any]) -> bool:
    return True


def contract_of(size: int) -> tuple[agentfx.Definition[Any, Any], list[type[msgspec.Struct]]]:
    """A contract of ``size`` capabilities over as many Message classes, and those classes.

    Every second capability is model-dependent, every third authorized, every
    fifth declares a completion.
    """
    classes = [_message_class(i) for i in range(size)]
    union = functools.reduce(_either, [*classes, Done])
    variants = [
        agentfx.variant(
            cls,
            f"Capability number {i}: does one thing to the Model",
            available=_open if i % 2 == 0 else None,
            authorize=_allow if i % 3 == 0 else None,
            completion=agentfx.Completion(success=Done, timeout=10) if i % 5 == 0 else None,
        )
        for i, cls in enumerate(classes)
    ]
    return agentfx.define(agentfx.expose(union, *variants)), classes


async def manifest_at_size(config: Config) -> list[Row]:
    """``to_manifest`` of a large contract, as a multiple of msgspec describing the same types."""
    size = config.capabilities
    definition, classes = contract_of(size)
    manifest = agentfx.to_manifest(definition)
    if len(manifest["capabilities"]) != size:
        raise AssertionError("the manifest does not list every capability")
    schema_components = msgspec.json.schema_components

    def declare() -> object:
        return contract_of(size)

    ops: dict[str, SyncOp] = {
        "schema_components": lambda: schema_components(classes),
        "to_manifest": lambda: agentfx.to_manifest(definition),
        "json.dumps": lambda: json.dumps(manifest, indent=2),
        "declare": declare,
    }
    calls = max(1, config.calls // 1000)
    series = compare_sync(ops, calls=calls, rounds=config.rounds)
    scenario = "documentation"
    base = f"msgspec.json.schema_components of the {size} Message types"
    return [
        row(scenario, f"to_manifest, {size} capabilities", base, series["to_manifest"], series["schema_components"]),
        row(
            scenario,
            f"to_manifest, {size} capabilities",
            "json.dumps(manifest, indent=2)",
            series["to_manifest"],
            series["json.dumps"],
        ),
        row(scenario, f"expose + define, {size} capabilities", base, series["declare"], series["schema_components"]),
    ]
