"""Replacing a file's content so that a reader, or a power cut, never sees half of it.

The one way every part of Chatitego writes a small file in place (theme settings, the
published-version pointer, the ledger, a fetched document): write a temporary file in the
same folder, fsync it, ``os.replace`` it over the target, then fsync the folder, because a
rename is only durable once the folder that holds the name is synced.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path


def fsync_path(path: Path) -> None:
    """fsync a file or a folder (a rename is only durable once its folder is synced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _no_checkpoint(step: str) -> None:
    pass


def atomic_write(
    path: Path,
    content: str | bytes,
    *,
    mode: int | None = None,
    temp_path: Path | None = None,
    checkpoint: Callable[[str], None] = _no_checkpoint,
) -> None:
    """Replace ``path``'s content with ``content`` (text is written as UTF-8), atomically and
    durably; on failure the target is untouched and the temporary file removed.

    ``mode``: the file's permissions (default: as ``open`` creates files, under the umask).
    ``temp_path``: a fixed temporary name in the same folder, for a caller that cleans up
    its own leftovers after a crash; by default a unique hidden name, so that two writers
    never share one. ``checkpoint`` is called with "written" (temporary file synced) and
    "replaced" (renamed, folder not yet synced), for crash tests.
    """
    path = Path(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    temporary = temp_path or path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    if temp_path is None:
        flags |= os.O_EXCL
    fd = os.open(temporary, flags, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        checkpoint("written")
        # os.replace swaps the directory entry: a link at the target is replaced, not
        # followed, and readers see the old content or the new, never a mix.
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    checkpoint("replaced")
    fsync_path(path.parent)
