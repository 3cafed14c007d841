"""One way to turn a typed Python function into a llama-index tool.

Built-in toolkits, theme tools and (later) MCP tools all go through
``tool_from_function`` so the router and the agent see one uniform list.
The function's docstring *is* the tool description the model reads.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from llama_index.core.tools import FunctionTool


def tool_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    return_direct: bool = False,
) -> FunctionTool:
    """Wrap ``fn`` as a ``FunctionTool`` whose description is its docstring."""
    doc = inspect.getdoc(fn)
    if not doc:
        raise ValueError(f"tool function {fn.__name__!r} needs a docstring: it is the description")
    tool_name = name or fn.__name__
    signature = f"{tool_name}{inspect.signature(fn)}"
    return FunctionTool.from_defaults(
        fn=fn,
        name=tool_name,
        description=f"{signature}\n{doc}",
        return_direct=return_direct,
    )
