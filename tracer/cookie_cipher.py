"""Sealing the chat page's cookie values with a key only the server knows.

The key is derived here from the cookie password (``tracer.cookie_secret``) with
parameters fixed in this module. The browser sends nothing that the derivation
reads: the cookie library used before took its salt and iteration count from a
cookie, so a forged one could ask the server for 10^11 PBKDF2 rounds (a hang), a
negative count (an exception on every load) or 4·10^8 (90 s of CPU per page
load), issue 11 finding 5. A value that does not open (another key, tampered,
oversized, not a token at all) reads as absent: the page starts a fresh
conversation.
"""

from __future__ import annotations

import base64
import logging
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

logger = logging.getLogger(__name__)

KDF_SALT = b"chatitego.cookie.v2"  # the password is per installation; the salt need not be
KDF_ITERATIONS = 600_000  # OWASP 2023 for PBKDF2-HMAC-SHA256; once per process and password
MAX_SEALED_CHARS = 4096  # a browser keeps no larger cookie: anything longer is not ours


@lru_cache(maxsize=4)
def _fernet(password: str) -> Fernet:
    kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=KDF_SALT, iterations=KDF_ITERATIONS)
    return Fernet(base64.urlsafe_b64encode(kdf.derive(password.encode("utf-8"))))


class CookieCipher:
    """Authenticated encryption (Fernet: AES-128-CBC + HMAC-SHA256) of cookie values."""

    def __init__(self, password: str) -> None:
        if not password:
            raise ValueError("the cookie password must not be empty")
        self._fernet = _fernet(password)

    def seal(self, value: str) -> str:
        """The value encrypted and signed, as URL-safe text."""
        return self._fernet.encrypt(value.encode("utf-8")).decode("ascii")

    def open(self, sealed: str | None) -> str | None:
        """The value, or None when ``sealed`` is not a token of this key."""
        if not sealed or len(sealed) > MAX_SEALED_CHARS:
            return None
        try:
            return self._fernet.decrypt(sealed.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError, ValueError, TypeError):
            logger.info("a cookie value did not open with this installation's key; ignored")
            return None
