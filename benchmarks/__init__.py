"""agentfx's benchmark suite: ``python -m benchmarks`` (``--smoke`` for a quick check).

Every figure is a ratio against a baseline measured in the same run, the
median over paired rounds timed in process CPU time, so the figures travel
between machines better than absolute times and load from other processes
does not land on one side of a ratio only. Scenarios:

- ``dispatch``: the runtime's success path against a hand-written floor;
- ``refusals``: each refusal against the success path;
- ``mcp`` and ``validation``: agentfx against the MCP SDK's ``MCPServer`` and
  against pydantic on the same work;
- ``completion``: 1 to 10,000 concurrent pending invocations;
- ``documentation``: ``to_manifest`` of a 200-capability contract.

The suite deliberately asserts nothing about timings: it prints PASS/MISS per
target and writes ``benchmarks/results/latest.json``. See docs/performance.md.
"""
