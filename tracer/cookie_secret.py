"""The key of the chat page's encrypted cookie: from configuration, never hard-coded.

``COOKIE_PASSWORD`` (or ``cookie_password`` in chatitego.toml) wins; without
it a random key is made once per installation and kept, readable by its owner
only, in ``<data_dir>/.secrets/cookie_password``, so reloads and restarts can
still read the cookies written before.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from config.settings import AppConfig

SECRET_FILE = Path(".secrets") / "cookie_password"


def cookie_password(config: AppConfig) -> str:
    """The configured key, else this installation's generated one."""
    if config.cookie_password is not None and config.cookie_password.get_secret_value():
        return config.cookie_password.get_secret_value()
    path = Path(config.data_dir) / SECRET_FILE
    if path.is_file():
        existing = path.read_text(encoding="utf-8").strip()
        if existing:
            return existing
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    generated = secrets.token_urlsafe(32)
    try:
        # O_EXCL: two first requests at once must agree on one key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip() or generated
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(generated)
    return generated
