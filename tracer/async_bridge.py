"""Consuming the engine's async stream from Streamlit's synchronous script thread.

The bridge itself lives in ``engine.sync_bridge`` (one for the whole product);
these names stay for the pages and tests that import them from here.
"""

from engine.sync_bridge import background_loop, iterate_sync

__all__ = ["background_loop", "iterate_sync"]
