"""Admin authentication: password hashes, login throttling and session expiry.

A hash is one self-describing line, ``scrypt$<n>$<r>$<p>$<salt b64>$<hash b64>``, made by
``python -m manager hash-password`` and put in ``chatitego.toml``
(``admin_password_hash = "..."``) or the ``ADMIN_PASSWORD_HASH`` environment variable.
Checks are constant-time (``hmac.compare_digest``). Failed logins are throttled per
client address, not per browser session (a new tab must not reset the count), with a
global pace over all clients that slows a crowd down without locking anyone out
(``LoginThrottle``). A session expires after a period without activity.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
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
FREE_ATTEMPTS = 5  # failures of one client before it must wait
FIRST_DELAY_S = 5.0
MAX_DELAY_S = 5 * 60.0
FAILURE_MEMORY_S = 15 * 60.0  # a failure older than this no longer counts
GLOBAL_CHECKS_PER_S = 2.0  # password checks per second over all clients (scrypt ~50-100 ms)
MAX_QUEUE_S = 10.0  # longest wait for a turn under the global pace before "retry later"
MAX_CLIENTS = 10_000  # clients remembered (oldest idle ones forgotten first)


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


@dataclass
class _Client:
    failures: deque[float] = field(default_factory=deque)  # times of the recent failures
    blocked_until: float = 0.0
    checking: bool = False  # a password check of this client is running


class LoginThrottle:
    """Failed-login throttling; thread-safe (Streamlit sessions are threads).

    Per client (``client``: its address, the same for every tab and session of a browser,
    so a new tab does not reset it): one password check at a time, ``FREE_ATTEMPTS``
    failures free, then a delay doubling from ``FIRST_DELAY_S`` up to ``MAX_DELAY_S``;
    a failure is forgotten after ``FAILURE_MEMORY_S``. Over all clients, checks are
    spaced by ``1 / checks_per_s``: a crowd of clients is slowed down (each waits its
    turn, at most ``MAX_QUEUE_S``), never locked out, and one client's failures never
    lock out another (seen: one process-wide count let anyone lock the admin out for
    15 min, and 12 tabs at once got 11 checks; issue 11 finding 7).
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        checks_per_s: float = GLOBAL_CHECKS_PER_S,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._spacing_s = 1.0 / checks_per_s
        self._lock = threading.Lock()
        self._clients: OrderedDict[str, _Client] = OrderedDict()
        self._next_check_at = 0.0

    def failures(self, client: str = "") -> int:
        """Recent failures of ``client`` (those not yet forgotten)."""
        with self._lock:
            return len(self._client(client, self._clock()).failures)

    def wait_s(self, client: str = "") -> float:
        """Seconds before ``client``'s next attempt is accepted (0 = now)."""
        with self._lock:
            now = self._clock()
            return max(0.0, self._client(client, now).blocked_until - now)

    def attempt(self, password: str, encoded: str, client: str = "") -> LoginOutcome:
        """Check ``password`` unless throttled; records the failure or resets on success."""
        admitted = self._admit(client)
        if isinstance(admitted, LoginOutcome):
            return admitted
        state, wait = admitted
        try:
            if wait > 0:
                self._sleep(wait)  # the global pace: a crowd waits its turn
            ok = verify_password(password, encoded)
        finally:
            with self._lock:
                state.checking = False
        return self._record(state, ok)

    def _admit(self, client: str) -> LoginOutcome | tuple[_Client, float]:
        """Reserve a check for ``client`` (and its place in the global pace), or refuse."""
        with self._lock:
            now = self._clock()
            state = self._client(client, now)
            if state.checking:
                return LoginOutcome(LoginResult.THROTTLED, self._spacing_s)
            if state.blocked_until > now:
                return LoginOutcome(LoginResult.THROTTLED, state.blocked_until - now)
            start = max(now, self._next_check_at)
            if start - now > MAX_QUEUE_S:
                return LoginOutcome(LoginResult.THROTTLED, start - now - MAX_QUEUE_S)
            self._next_check_at = start + self._spacing_s
            state.checking = True
            return state, start - now

    def _record(self, state: _Client, ok: bool) -> LoginOutcome:
        with self._lock:
            now = self._clock()
            if ok:
                state.failures.clear()
                state.blocked_until = 0.0
                return LoginOutcome(LoginResult.OK)
            state.failures.append(now)
            extra = len(state.failures) - FREE_ATTEMPTS
            if extra < 0:
                return LoginOutcome(LoginResult.WRONG)
            delay = min(MAX_DELAY_S, FIRST_DELAY_S * 2**extra)
            state.blocked_until = now + delay
            return LoginOutcome(LoginResult.WRONG, delay)

    def _client(self, client: str, now: float) -> _Client:
        """``client``'s state, its old failures forgotten (call with the lock held)."""
        state = self._clients.pop(client, None) or _Client()
        self._clients[client] = state  # most recently seen last
        while state.failures and now - state.failures[0] > FAILURE_MEMORY_S:
            state.failures.popleft()
        while len(self._clients) > MAX_CLIENTS:
            oldest, old_state = next(iter(self._clients.items()))
            if old_state.checking or old_state.blocked_until > now:
                break  # never forget a client that is being checked or is blocked
            del self._clients[oldest]
        return state


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
