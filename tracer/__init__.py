"""The chat page's library: painting a turn from the engine's events, the conversation,
its cookies, preferences, export, and the turn flow across reruns."""
