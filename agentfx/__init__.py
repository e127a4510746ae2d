"""agentfx: expose chosen Messages of an Elm-architecture application to AI agents."""
