"""agentfx's benchmark suite: ``python -m benchmarks`` (``--smoke`` for a quick check).

Every figure is a ratio against a baseline measured in the same run, the
median over paired rounds timed in process CPU time (wall-clock time and the
server's CPU time for the server processes), so the figures travel
between machines better than absolute times and load from other processes
does not land on one side of a ratio only. Scenarios:

- ``dispatch``: the runtime's success path against a hand-written floor;
- ``refusals``: each refusal against the success path;
- ``mcp`` and ``validation``: agentfx against the MCP SDK's ``MCPServer`` and
  against pydantic on the same work;
- ``completion``: 1 to 10,000 concurrent pending invocations;
- ``documentation``: ``to_manifest`` of a 200-capability contract;
- ``stdio``, ``http`` and ``cold-start``: ``agentfx serve`` against the SDK's
  ``MCPServer`` (and FastMCP 4) as server processes, driven by one client:
  time and server CPU per call, RSS per open HTTP session, calls beside 500
  idle sessions, and spawn to the first ``tools/list``.

The suite deliberately asserts nothing about timings: it prints PASS/MISS per
target and writes ``benchmarks/results/latest.json``. See docs/performance.md.
"""
