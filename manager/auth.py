"""Admin authentication: password hashes, login throttling and session expiry.

A hash is one self-describing line, ``scrypt$<n>$<r>$<p>$<salt b64>$<hash b64>``, made by
``python -m manager hash-password`` and put in ``chatitego.toml``
(``admin_password_hash = "..."``) or the ``ADMIN_PASSWORD_HASH`` environment variable.
Checks are constant-time (``hmac.compare_digest``). Failed logins are throttled for the
whole process, not per browser session (a new tab must not reset the count): after
``FREE_ATTEMPTS`` failures each new attempt waits an exponentially growing delay. A
session expires after a period without activity.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import Enum

SCHEME = "scrypt"
# scrypt cost: n=2**15, r=8 takes ~50-100 ms and 32 MiB, a sound 2024+ choice for a
# single admin login; the parameters are stored in the hash so they can be raised later.
DEFAULT_N = 2**15
DEFAULT_R = 8
DEFAULT_P = 1
SALT_BYTES = 16
KEY_BYTES = 32
_MAX_N = 2**20  # refuse absurd parameters from a tampered configuration (memory bomb)
FREE_ATTEMPTS = 5
FIRST_DELAY_S = 5.0
MAX_DELAY_S = 15 * 60.0


class InvalidPasswordHash(ValueError):
    """The configured hash is not a line made by ``python -m manager hash-password``."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=length, maxmem=256 * 2**20
    )


def hash_password(
    password: str, *, n: int = DEFAULT_N, r: int = DEFAULT_R, p: int = DEFAULT_P
) -> str:
    """The line to configure as ``admin_password_hash`` for ``password``."""
    if not password:
        raise ValueError("the admin password must not be empty")
    salt = secrets.token_bytes(SALT_BYTES)
    key = _scrypt(password, salt, n, r, p, KEY_BYTES)
    return f"{SCHEME}${n}${r}${p}${_b64(salt)}${_b64(key)}"


@dataclass(frozen=True)
class _Parsed:
    n: int
    r: int
    p: int
    salt: bytes
    key: bytes


def parse_hash(encoded: str) -> _Parsed:
    """Split and check a configured hash; raises ``InvalidPasswordHash`` saying what to do."""
    fix = "make a new one with 'python -m manager hash-password'"
    parts = encoded.strip().split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        raise InvalidPasswordHash(f"admin_password_hash is not a {SCHEME} hash line: {fix}")
    try:
        n, r, p = (int(x) for x in parts[1:4])
        salt = base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
    except (ValueError, binascii.Error):
        raise InvalidPasswordHash(f"admin_password_hash is damaged: {fix}") from None
    if not (1 < n <= _MAX_N and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16):
        raise InvalidPasswordHash(f"admin_password_hash has unusable scrypt parameters: {fix}")
    if len(salt) < 8 or len(key) < 16:
        raise InvalidPasswordHash(f"admin_password_hash is too short: {fix}")
    return _Parsed(n, r, p, salt, key)


def verify_password(password: str, encoded: str) -> bool:
    """True when ``password`` matches ``encoded`` (constant-time comparison)."""
    parsed = parse_hash(encoded)
    candidate = _scrypt(password, parsed.salt, parsed.n, parsed.r, parsed.p, len(parsed.key))
    return hmac.compare_digest(candidate, parsed.key)


class LoginResult(Enum):
    """What one login attempt gave."""

    OK = "ok"
    WRONG = "wrong"
    THROTTLED = "throttled"


@dataclass(frozen=True)
class LoginOutcome:
    result: LoginResult
    retry_after_s: float = 0.0


class LoginThrottle:
    """Process-wide count of failed logins; thread-safe (Streamlit sessions are threads)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.failures = 0
        self._blocked_until = 0.0

    def wait_s(self) -> float:
        """Seconds before the next attempt is accepted (0 = now)."""
        with self._lock:
            return max(0.0, self._blocked_until - self._clock())

    def attempt(self, password: str, encoded: str) -> LoginOutcome:
        """Check ``password`` unless throttled; records the failure or resets on success."""
        with self._lock:
            wait = self._blocked_until - self._clock()
            if wait > 0:
                return LoginOutcome(LoginResult.THROTTLED, wait)
        ok = verify_password(password, encoded)
        with self._lock:
            if ok:
                self.failures = 0
                self._blocked_until = 0.0
                return LoginOutcome(LoginResult.OK)
            self.failures += 1
            extra = self.failures - FREE_ATTEMPTS
            if extra >= 0:
                delay = min(MAX_DELAY_S, FIRST_DELAY_S * 2**extra)
                self._blocked_until = self._clock() + delay
                return LoginOutcome(LoginResult.WRONG, delay)
            return LoginOutcome(LoginResult.WRONG)


@dataclass
class AdminSession:
    """One browser session's login state (kept in Streamlit's session state)."""

    user: str | None = None
    last_activity: float = 0.0

    def is_active(self, now: float, minutes: int) -> bool:
        """Logged in, and active within the last ``minutes``."""
        return self.user is not None and now - self.last_activity <= minutes * 60

    def expired(self, now: float, minutes: int) -> bool:
        """Was logged in but has been idle too long (the page says so)."""
        return self.user is not None and not self.is_active(now, minutes)

    def open(self, user: str, now: float) -> None:
        self.user = user
        self.last_activity = now

    def touch(self, now: float) -> None:
        self.last_activity = now

    def close(self) -> None:
        self.user = None
        self.last_activity = 0.0


def oidc_user_allowed(email: str | None, allowed: Collection[str]) -> bool:
    """An identity-provider login opens the page only for a listed e-mail (fail closed:
    an empty list admits nobody, since any account of the provider could sign in)."""
    if not email:
        return False
    wanted = email.strip().casefold()
    return any(wanted == a.strip().casefold() for a in allowed if a.strip())
