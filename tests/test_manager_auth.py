"""manager.auth and ``python -m manager hash-password``: hashes, throttling, sessions."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from manager import auth, cli
from manager.auth import (
    AdminSession,
    InvalidPasswordHash,
    LoginResult,
    LoginThrottle,
    hash_password,
    oidc_user_allowed,
    parse_hash,
    verify_password,
)

ROOT = Path(__file__).resolve().parents[1]
# Cheap parameters: the format and the checks are the same, the tests stay fast.
FAST = {"n": 2**10, "r": 8, "p": 1}


def test_hash_is_self_describing_and_salted() -> None:
    first = hash_password("s3cret-pass", **FAST)
    second = hash_password("s3cret-pass", **FAST)
    scheme, n, r, p, salt, key = first.split("$")
    assert (scheme, n, r, p) == ("scrypt", "1024", "8", "1")
    assert salt and key
    assert first != second  # a fresh salt each time


def test_default_parameters_are_the_strong_ones() -> None:
    assert hash_password("s3cret-pass").split("$")[1] == str(auth.DEFAULT_N)


def test_verify_accepts_the_password_and_nothing_else() -> None:
    line = hash_password("s3cret-pass", **FAST)
    assert verify_password("s3cret-pass", line)
    assert not verify_password("s3cret-pasS", line)
    assert not verify_password("", line)
    assert verify_password("s3cret-pass", f"  {line}\n")  # pasted with spaces


def test_comparison_is_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = auth.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    verify_password("x", hash_password("s3cret-pass", **FAST))
    assert len(calls) == 1


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "plain-password",
        "bcrypt$10$abc",
        "scrypt$1024$8$1$not base64!$AAAA",
        "scrypt$1000$8$1$AAAAAAAAAAAAAAAAAAAAAA==$" + "A" * 44,  # n not a power of two
        "scrypt$1048576000$8$1$AAAAAAAAAAAAAAAAAAAAAA==$" + "A" * 44,  # memory bomb
        "scrypt$1024$8$1$AAAA$" + "A" * 44,  # salt too short
    ],
)
def test_unusable_hashes_are_refused_with_the_fix(bad: str) -> None:
    with pytest.raises(InvalidPasswordHash, match="python -m manager hash-password"):
        parse_hash(bad)


def test_empty_password_cannot_be_hashed() -> None:
    with pytest.raises(ValueError):
        hash_password("")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_throttle_slows_down_after_repeated_failures() -> None:
    line = hash_password("s3cret-pass", **FAST)
    clock = Clock()
    throttle = LoginThrottle(clock)
    for _ in range(auth.FREE_ATTEMPTS - 1):
        assert throttle.attempt("wrong", line).result is LoginResult.WRONG
        assert throttle.wait_s() == 0
    outcome = throttle.attempt("wrong", line)
    assert outcome.result is LoginResult.WRONG and outcome.retry_after_s == auth.FIRST_DELAY_S
    # While blocked even the right password is not checked.
    blocked = throttle.attempt("s3cret-pass", line)
    assert blocked.result is LoginResult.THROTTLED and blocked.retry_after_s > 0
    clock.now += auth.FIRST_DELAY_S + 0.1
    again = throttle.attempt("wrong", line)
    assert again.retry_after_s == 2 * auth.FIRST_DELAY_S  # doubles
    clock.now += 100
    assert throttle.attempt("s3cret-pass", line).result is LoginResult.OK
    assert throttle.failures == 0 and throttle.wait_s() == 0


def test_throttle_delay_is_capped() -> None:
    line = hash_password("s3cret-pass", **FAST)
    clock = Clock()
    throttle = LoginThrottle(clock)
    outcome = None
    for _ in range(40):
        clock.now += auth.MAX_DELAY_S + 1
        outcome = throttle.attempt("wrong", line)
    assert outcome is not None and outcome.retry_after_s == auth.MAX_DELAY_S


def test_session_expires_after_inactivity() -> None:
    session = AdminSession()
    assert not session.is_active(0, 30) and not session.expired(0, 30)
    session.open("admin", 100.0)
    assert session.is_active(100.0 + 29 * 60, 30)
    session.touch(100.0 + 29 * 60)
    assert session.is_active(100.0 + 58 * 60, 30)  # activity extends it
    assert session.expired(100.0 + 29 * 60 + 31 * 60, 30)
    session.close()
    assert not session.is_active(100.0, 30) and not session.expired(10**9, 30)


def test_oidc_admits_only_listed_emails() -> None:
    assert oidc_user_allowed("Admin@Example.com", ["admin@example.com"])
    assert not oidc_user_allowed("other@example.com", ["admin@example.com"])
    assert not oidc_user_allowed("admin@example.com", [])  # no list: nobody
    assert not oidc_user_allowed(None, ["admin@example.com"])
    assert not oidc_user_allowed("", [""])


def test_cli_prints_a_hash_line_that_verifies(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("correct horse battery\n"))
    assert cli.main(["hash-password", "--stdin"]) == 0
    out = capsys.readouterr().out
    toml_line = next(line for line in out.splitlines() if line.startswith("admin_password_hash"))
    value = toml_line.split('"')[1]
    assert verify_password("correct horse battery", value)
    assert f"ADMIN_PASSWORD_HASH='{value}'" in out


def test_cli_refuses_mismatched_or_short_passwords(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = iter(["first-password", "second-password"])
    monkeypatch.setattr(cli.getpass, "getpass", lambda prompt: next(answers))
    assert cli.main(["hash-password"]) == 1
    assert "differ" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", io.StringIO("short\n"))
    assert cli.main(["hash-password", "--stdin"]) == 1
    assert "at least" in capsys.readouterr().err


def test_python_dash_m_manager_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "manager", "hash-password", "--stdin"],
        input="correct horse battery\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert 'admin_password_hash = "scrypt$' in done.stdout
