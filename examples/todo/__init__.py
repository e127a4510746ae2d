"""The todo application: a small Elm program and the agent contract it exposes."""
