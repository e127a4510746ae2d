"""``python -m benchmarks``: run the scenarios, print the table and the targets, write JSON.

Each scenario runs in its own event loop, after a full collection and a
``gc.freeze()``: whatever an earlier scenario left on the heap is then out of
reach of the collector, so it cannot tax a later scenario's collections.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from contextlib import contextmanager
from pathlib import Path

import anyio

from .completion import completion_at_scale
from .confirmation import confirmation_paths
from .dispatch import dispatch_overhead, refusal_paths
from .frameworks import framework_adapters
from .documentation import manifest_at_size
from .harness import FULL, SMOKE, Config, Row
from .peers import mcp_servers, validation
from .redis_program import redis_program
from .report import markdown_table, target_lines, write_json
from .transports import cold_start, http_peers, stdio_peers

__all__ = ["RESULTS", "SCENARIOS", "main", "run"]

Scenario = Callable[[Config], Awaitable[list[Row]]]

SCENARIOS: dict[str, Scenario] = {
    "dispatch": dispatch_overhead,
    "mcp": mcp_servers,
    "validation": validation,
    "documentation": manifest_at_size,
    "completion": completion_at_scale,
    "refusals": refusal_paths,
    "confirmation": confirmation_paths,
    "frameworks": framework_adapters,
    "stdio": stdio_peers,
    "http": http_peers,
    "cold-start": cold_start,
    "redis": redis_program,
}
"""Every scenario, in the order the suite runs them."""

ASYNCIO_ONLY = frozenset({"frameworks"})
"""Scenarios that run on asyncio whatever ``--backend`` says: the frameworks' own tool loops use asyncio's tasks."""

RESULTS = Path(__file__).parent / "results"
"""Where results are written by default (not under version control)."""


def run(config: Config, names: Sequence[str], *, backend: str = "asyncio", progress: bool = True) -> list[Row]:
    """Run the named scenarios in suite order; every row they report."""
    rows: list[Row] = []
    for name, scenario in SCENARIOS.items():
        if name not in names:
            continue
        on = "asyncio" if name in ASYNCIO_ONLY else backend
        if progress:
            kept = f" (on asyncio: {name} needs it)" if on != backend else ""
            print(f"running {name}{kept} ...", file=sys.stderr, flush=True)
        gc.collect()
        gc.freeze()
        try:
            with _logging_kept():
                rows.extend(anyio.run(scenario, config, backend=on))
        finally:
            gc.unfreeze()
    return rows


@contextmanager
def _logging_kept() -> Generator[None]:
    """Run a scenario, then put the root logger back as it was.

    Building an ``MCPServer`` in process (the ``mcp`` scenario) configures the
    root logger: a Rich handler at INFO. Left so, every request a later
    scenario's HTTP client makes would be logged, formatted and printed, and
    that time would be measured for every contender alike, diluting each
    ratio towards 1 and widening its spread.
    """
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite from the command line; 0 once every scenario completed, PASS or MISS."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="agentfx benchmarks: every figure is a median ratio against a baseline measured in the same run.",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes and two rounds: checks the suite runs, measures nothing")
    parser.add_argument("--only", action="append", choices=list(SCENARIOS), help="run only this scenario (repeatable)")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio", help="the event loop (default: asyncio)")
    parser.add_argument("--output", type=Path, default=None, help="the JSON file (default: benchmarks/results/latest.json, smoke.json with --smoke)")
    args = parser.parse_args(argv)
    config = SMOKE if args.smoke else FULL
    names: list[str] = args.only or list(SCENARIOS)
    output: Path = args.output or RESULTS / ("smoke.json" if args.smoke else "latest.json")
    started = time.perf_counter()
    rows = run(config, names, backend=args.backend)
    elapsed = time.perf_counter() - started
    print(markdown_table(rows))
    print()
    print("Targets:")
    for line in target_lines(rows):
        print(f"  {line}")
    write_json(output, config=config, rows=rows, elapsed=elapsed, cpus=os.cpu_count())
    print(f"\n{len(rows)} figures in {elapsed:.0f} s ({config.mode}); JSON written to {output}")
    return 0
