"""Example applications built on agentfx; the todo app is shared by the test suites."""
