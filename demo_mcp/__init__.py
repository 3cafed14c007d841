"""Small MCP servers written for the demo theme (run as separate processes, over stdio)."""
