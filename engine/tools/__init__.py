"""Tools offered to the agent: every tool, built-in or not, is a typed function."""

from engine.tools.registry import tool_from_function

__all__ = ["tool_from_function"]
