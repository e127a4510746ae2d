"""The benchmark suite's smoke mode runs with the tests, so the suite cannot rot.

Nothing here asserts a timing: a figure may PASS or MISS. What is checked is
that every scenario runs to completion and reports every figure, with a
finite ratio, a verdict for every target, and the JSON record.
"""

from __future__ import annotations

import logging
import math
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from benchmarks.cli import SCENARIOS, main
from benchmarks.harness import Row, median_ratio

ROOT = Path(__file__).resolve().parent.parent

_SCENARIO_NAMES = {
    "dispatch overhead",
    "refusal paths",
    "MCP peers",
    "validation peers",
    "completion at scale",
    "documentation",
    "confirmation",
    "framework adapters",
    "stdio peers",
    "HTTP peers",
    "cold start",
    "redis program",
}

_TARGETS = {
    ("dispatch overhead", "messages.dispatch (FutureResult)"),
    ("refusal paths", "unknown capability"),
    ("refusal paths", "unavailable"),
    ("refusal paths", "invalid input"),
    ("refusal paths", "unauthorized"),
    ("MCP peers", "agentfx.mcp.server (runtime adapter)"),
    ("confirmation", "Confirm, confirmed out of band"),
    ("confirmation", "Confirm, asked and approved"),
    ("confirmation", "Confirm, asked and declined"),
    ("confirmation", "Confirm, nobody to ask"),
    ("stdio peers", "agentfx serve, sequential: time per call"),
    ("HTTP peers", "agentfx serve, 1 client: time per call"),
    ("HTTP peers", "agentfx serve, RSS per open session"),
}


class Record(msgspec.Struct):
    mode: str
    rows: list[Row]
    targets: list[str]


def _record(path: Path) -> Record:
    return msgspec.json.decode(path.read_bytes(), type=Record)


# Every scenario runs, served peers in their own processes included: on a loaded
# machine that outgrows the suite's per-test default.
@pytest.mark.timeout(240)
def test_smoke_run_reports_every_figure_with_a_verdict_per_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "smoke.json"

    assert main(["--smoke", "--output", str(output)]) == 0

    record = _record(output)
    assert record.mode == "smoke"
    assert len(SCENARIOS) == len(_SCENARIO_NAMES)
    assert {r.scenario for r in record.rows} == _SCENARIO_NAMES
    for r in record.rows:
        assert math.isfinite(r.ratio) and r.ratio > 0, r
        assert r.rounds >= 1, r
        assert (r.verdict is None) == (r.target is None), r
    targeted = {(r.scenario, r.name) for r in record.rows if r.target is not None}
    assert _TARGETS <= targeted
    # The completion targets name the largest N the run used, so they are matched by shape.
    assert any(r.scenario == "completion at scale" and r.unit == "B" and r.target is not None for r in record.rows)
    assert any(
        r.scenario == "completion at scale" and r.name.startswith("keyed") and r.target is not None and r.unit == "us"
        for r in record.rows
    )
    # The served contenders run as processes: agentfx serve, MCPServer and (installed with the
    # test extra) FastMCP 4, each measured against MCPServer over every path.
    served = [r for r in record.rows if r.scenario in {"stdio peers", "HTTP peers", "cold start"}]
    for contender in ("agentfx serve", "FastMCP 4"):
        assert any(r.name.startswith(contender) and r.baseline.startswith("MCPServer (mcp 2.3)") for r in served)
    idle = [r for r in served if "idle sessions" in r.name]
    assert {r.name.split(",")[0] for r in idle} == {"agentfx serve", "MCPServer", "FastMCP 4"}
    assert any(r.target is not None and r.name.startswith("agentfx serve") for r in idle)
    assert any(r.scenario == "stdio peers" and "requests in flight" in r.name and r.target is not None for r in served)
    assert any(r.scenario == "HTTP peers" and "concurrent clients" in r.name and r.target is not None for r in served)
    printed = capsys.readouterr().out
    assert len(record.targets) == len(targeted)
    for line in record.targets:
        assert line.startswith(("PASS  ", "MISS  "))
        assert line in printed
    for r in record.rows:
        assert f"| {r.scenario} | {r.name} | {r.baseline} |" in printed


def test_only_runs_the_named_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "only.json"

    assert main(["--smoke", "--only", "validation", "--output", str(output)]) == 0

    assert {r.scenario for r in _record(output).rows} == {"validation peers"}
    capsys.readouterr()


def test_on_trio_the_framework_adapters_run_on_asyncio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The frameworks' own tool loops start asyncio tasks; the rest runs on trio.
    output = tmp_path / "trio.json"

    assert main(["--smoke", "--backend", "trio", "--only", "frameworks", "--only", "refusals", "--output", str(output)]) == 0

    assert {r.scenario for r in _record(output).rows} == {"framework adapters", "refusal paths"}
    progress = capsys.readouterr().err
    assert "running frameworks (on asyncio: frameworks needs it) ..." in progress
    assert "running refusals ..." in progress


def test_the_module_runs_as_a_command(tmp_path: Path) -> None:
    output = tmp_path / "command.json"

    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "benchmarks", "--smoke", "--only", "dispatch", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert "Targets:" in done.stdout
    assert {r.scenario for r in _record(output).rows} == {"dispatch overhead"}


def test_a_ratio_is_the_median_of_paired_rounds() -> None:
    # Pairing matters: the median of per-round ratios, not a ratio of medians.
    # Here the ratio of the medians would be 1.0.
    ratio, (low, high) = median_ratio([2.0, 3.0, 100.0], [1.0, 3.0, 10.0])

    assert ratio == 2.0
    assert (low, high) == (1.5, 6.0)


def test_a_scenario_that_configures_logging_leaves_the_root_logger_as_it_found_it() -> None:
    # The in-process MCP scenario builds an MCPServer, which installs a Rich
    # handler at INFO on a root logger that has none; the HTTP scenarios after
    # it would then time the logging of every request their client makes. In
    # a process of its own: under pytest the root logger already has handlers.
    script = (
        "import logging; from benchmarks.cli import run; from benchmarks.harness import SMOKE; "
        "run(SMOKE, ['mcp'], progress=False); root = logging.getLogger(); "
        "print(root.level, len(root.handlers), logging.getLogger('httpx').isEnabledFor(logging.INFO))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=50, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(logging.WARNING), "0", "False"]
