"""The agent card: a contract as an A2A ``AgentCard``, one skill per capability.

This layer owns the card's shape: which skill stands for which capability
(id = the capability name), the tags that say what a client cannot see in
advance (``model-dependent``, ``authorized``), and the card extension
``urn:agentfx:a2a:skill-input-schema:v1`` that carries each skill's input
schema, since an A2A skill has no schema of its own.

That extension's ``params`` is a protobuf ``Struct``, whose numbers are
doubles, and the SDK serves it through ``MessageToDict``: a float in a schema
is served as itself and an integer below 2**53 in magnitude as the same
number written as a double (a ``minLength`` of 2 as ``2.0``, which a client
reads as the integer, as this adapter reads a whole double in a data part),
but a larger integer would be rounded (2**53 + 1 served as 2**53), so the card
would admit inputs the decoder refuses and refuse ones it accepts. Such a
schema is refused when the card is built, with a :class:`ContractError`
naming the capability, the number and where it is in the schema: every card
says exactly what decoding accepts.

The card is a pure function of the contract and the arguments: it never reads
a Model and is byte-identical across runs, so it can be committed and checked
for drift like the manifest. It deliberately knows nothing of dispatch or of
the server that serves it.
"""

from __future__ import annotations

from typing import Any, cast

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol
from google.protobuf import json_format

from ..contract import Definition, check_definition
from ..errors import ContractError
from ..docs import MessageDescriptor, messages

__all__ = ["SKILL_INPUT_SCHEMA_EXTENSION", "agent_card", "card_json"]

SKILL_INPUT_SCHEMA_EXTENSION = "urn:agentfx:a2a:skill-input-schema:v1"
"""The URI of the card extension whose ``params.skills[<skill id>]`` is that skill's input JSON Schema."""

MODEL_DEPENDENT_TAG = "model-dependent"
"""The tag of a skill that exists only in some Model states."""

AUTHORIZED_TAG = "authorized"
"""The tag of a skill that runs an authorization check before dispatching."""

MAY_CONFIRM_TAG = "may-confirm"
"""The tag of a skill declared ``may_confirm``: its task may stop in ``input-required`` for a person's answer."""

_JSON = "application/json"
_TEXT = "text/plain"

_EXACT = 2**53
"""From this magnitude a double is not one integer's: 2**53 + 1 is served as 2**53."""


def _inexact(value: object, at: str) -> tuple[int, str] | None:
    """The first integer in ``value`` a double cannot carry as that integer alone, and its JSON Pointer, if any."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, at or "/") if abs(value) >= _EXACT else None
    if isinstance(value, dict):
        items = cast("dict[str, object]", value).items()
        pairs = ((k.replace("~", "~0").replace("/", "~1"), v) for k, v in items)
    elif isinstance(value, list):
        pairs = ((str(i), v) for i, v in enumerate(cast("list[object]", value)))
    else:
        return None
    for key, item in pairs:
        found = _inexact(item, f"{at}/{key}")
        if found is not None:
            return found
    return None


def _check_exact(descriptor: MessageDescriptor) -> None:
    found = _inexact(descriptor.input_schema, "")
    if found is not None:
        number, at = found
        raise ContractError(
            f'agent_card(): the input schema of "{descriptor.name}" holds the integer {number} (at {at}), '
            "which an A2A card cannot carry: its schemas are protobuf Struct values, whose numbers are doubles, "
            "exact only below 2**53 in magnitude. Keep the input's bounds, literals and defaults within that range "
            "to serve this capability over A2A"
        )


def _skill(descriptor: MessageDescriptor) -> AgentSkill:
    # The Message tag comes first, so every skill has a tag (the spec
    # requires one) and a client can tell what each skill sends.
    tags = [descriptor.tag]
    if descriptor.model_dependent:
        tags.append(MODEL_DEPENDENT_TAG)
    if descriptor.requires_authorization:
        tags.append(AUTHORIZED_TAG)
    if descriptor.may_confirm:
        tags.append(MAY_CONFIRM_TAG)
    return AgentSkill(
        id=descriptor.name,
        name=descriptor.title or descriptor.name,
        description=descriptor.description,
        tags=tags,
        input_modes=[_JSON],
        output_modes=[_JSON, _TEXT],
    )


def agent_card(definition: Definition[Any, Any], *, name: str, description: str, url: str, version: str) -> AgentCard:
    """The A2A agent card of a contract.

    One skill per capability, in declaration order: id = the capability name,
    name = its title (else the name), its description, and tags naming the
    Message it sends, then ``model-dependent`` (``available`` declared),
    ``authorized`` (``authorize`` declared) and ``may-confirm``
    (``may_confirm`` declared). The input schemas travel in the
    card extension :data:`SKILL_INPUT_SCHEMA_EXTENSION`, under
    ``params.skills[<skill id>]``, their numbers as doubles: an integer of
    magnitude 2**53 or more in a schema (a bound, a literal, a default),
    which a double would round, is refused.

    The card lists the JSON-RPC interface at ``url`` twice, for A2A 1.0 and
    for 0.3, which :func:`agentfx.a2a.a2a_app` serves on the same endpoint.
    It advertises streaming (the SDK streams task events) and no push
    notifications.

    Args:
        definition: The contract, from ``define``.
        name: The agent's name, for people.
        description: What the agent does, for people and agents.
        url: The JSON-RPC endpoint clients call, ending in ``/a2a`` when
            served by :func:`agentfx.a2a.a2a_app`.
        version: The agent's own version (not the protocol's).

    Raises:
        ContractError: ``definition`` is not a contract, or an input schema
            holds an integer of magnitude 2**53 or more.

    >>> import msgspec, agentfx
    >>> class Pinged(msgspec.Struct, tag=True):
    ...     pass
    >>> card = agent_card(agentfx.define(agentfx.expose(Pinged, agentfx.variant(Pinged, "Ping the app"))),
    ...                   name="pings", description="Pings", url="http://127.0.0.1:8000/a2a", version="1.0.0")
    >>> [(skill.id, list(skill.tags)) for skill in card.skills]
    [('pinged', ['Pinged'])]
    >>> card_json(card)["capabilities"]["extensions"][0]["params"]["skills"]["pinged"]["additionalProperties"]
    False
    """
    descriptors = messages(check_definition("agent_card()", definition))
    for descriptor in descriptors:
        _check_exact(descriptor)
    extension = AgentExtension(
        uri=SKILL_INPUT_SCHEMA_EXTENSION,
        description=(
            "params.skills maps each skill id to the JSON Schema of its input. Send one data part "
            '{"skill": <skill id>, "input": <an object matching that schema>}, or the same object as '
            "JSON text in one text part of media type application/json, whose numbers are read exactly."
        ),
        required=False,
    )
    json_format.ParseDict({"skills": {d.name: d.input_schema for d in descriptors}}, extension.params)
    return AgentCard(
        name=name,
        description=description,
        version=version,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=PROTOCOL_VERSION_1_0),
            AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=PROTOCOL_VERSION_0_3),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False, extensions=[extension]),
        default_input_modes=[_JSON],
        default_output_modes=[_JSON, _TEXT],
        skills=[_skill(d) for d in descriptors],
    )


def card_json(card: AgentCard) -> dict[str, Any]:
    """The card exactly as served at ``/.well-known/agent-card.json``.

    The A2A 1.0 fields, with the SDK's 0.3 fields (``url``,
    ``preferredTransport``, ``protocolVersion``, ...) merged in so a 0.3
    client reads the same card. Map keys are in no fixed order: compare or
    commit it through ``json.dumps(..., sort_keys=True)``.
    """
    return agent_card_to_dict(card)
