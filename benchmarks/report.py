"""The suite's output: a Markdown table on stdout, PASS/MISS per target, and a JSON record.

The table is Markdown so the same text reads in a terminal and pastes into
``docs/performance.md``. This module deliberately knows nothing of how a
figure was measured: it formats :class:`~benchmarks.harness.Row` values.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import msgspec

from .harness import Config, Row

__all__ = ["environment", "markdown_table", "target_lines", "write_json"]

_PACKAGES = ("agentfx", "msgspec", "returns", "anyio", "mcp", "pydantic", "opentelemetry-api")


def _amount(value: float, unit: str) -> str:
    """A measured value with its unit.

    >>> _amount(5.678, "us"), _amount(7730.6, "B"), _amount(1234.5, "us"), _amount(473.14, "ms")
    ('5.68 µs', '7,731 B', '1,234 µs', '473 ms')
    """
    if unit == "B":
        return f"{value:,.0f} B"
    if unit == "ms":
        return f"{value:,.0f} ms"
    if value >= 100:
        return f"{value:,.0f} µs"
    return f"{value:.2f} µs"


def _ratio(value: float) -> str:
    return f"{value:.2f}×"


def _target(r: Row) -> str:
    if r.target is None:
        return ""
    limit = f"≤ {_ratio(r.target)}" if r.target_on == "ratio" else f"≤ {_amount(r.target, r.unit)}"
    return f"{limit} {r.verdict}"


def markdown_table(rows: Sequence[Row]) -> str:
    """Every row as one Markdown table, in the order measured."""
    header = (
        "| Scenario | Measured | Against | Ratio (median) | Ratio IQR | Measured value | Baseline value | Target |",
        "|---|---|---|---:|---:|---:|---:|---|",
    )
    lines = [*header]
    for r in rows:
        low, high = r.ratio_iqr
        lines.append(
            f"| {r.scenario} | {r.name} | {r.baseline} | {_ratio(r.ratio)} | {low:.2f}–{high:.2f} "
            f"| {_amount(r.value, r.unit)} | {_amount(r.baseline_value, r.unit)} | {_target(r)} |"
        )
    return "\n".join(lines)


def target_lines(rows: Sequence[Row]) -> list[str]:
    """One ``PASS``/``MISS`` line per target."""
    lines: list[str] = []
    for r in rows:
        if r.target is None or r.verdict is None:
            continue
        if r.target_on == "ratio":
            measured, limit = _ratio(r.ratio), _ratio(r.target)
            against = f" {r.baseline}"
        else:
            measured, limit = _amount(r.value, r.unit), _amount(r.target, r.unit)
            against = ""
        lines.append(f"{r.verdict}  {r.scenario}: {r.name}: {measured} (target ≤ {limit}{against})")
    return lines


def environment() -> dict[str, Any]:
    """Where the figures were measured."""
    versions: dict[str, str] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": versions,
    }


def write_json(path: Path, *, config: Config, rows: Sequence[Row], elapsed: float, cpus: int | None) -> None:
    """Write the run's record: environment, configuration, every row and every target's verdict."""
    record: dict[str, Any] = {
        "mode": config.mode,
        "elapsed_seconds": round(elapsed, 2),
        "cpus": cpus,
        "environment": environment(),
        "config": config,
        "rows": list(rows),
        "targets": target_lines(rows),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n")
