"""How a slow model load reports its progress (assembling the packaged GGUF parts, loading)."""

from __future__ import annotations

from collections.abc import Callable

# (stage, done, total): stage is "assemble" (joining the packaged GGUF parts) or "load".
Progress = Callable[[str, int, int], None]
