"""The todo example driven from four agent frameworks, one module each, each with an LLM of your choice."""
