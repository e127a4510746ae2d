"""Run the benchmark suite: ``python -m benchmarks`` (``--smoke`` for the quick check)."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
