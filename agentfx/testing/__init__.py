"""Test support for agentfx applications: hypothesis payload strategies, a recording host, the law suite."""

from __future__ import annotations

from .laws import LawViolation as LawViolation
from .laws import check_contract as check_contract
from .recording import RecordingHost as RecordingHost
from .strategies import HasInputType as HasInputType
from .strategies import InvalidPayload as InvalidPayload
from .strategies import invalid_payloads as invalid_payloads
from .strategies import valid_payloads as valid_payloads

__all__ = (
    "HasInputType",
    "InvalidPayload",
    "LawViolation",
    "RecordingHost",
    "check_contract",
    "invalid_payloads",
    "valid_payloads",
)
