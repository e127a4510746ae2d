"""The orders application: a shop's order desk and the agent contract it exposes."""
