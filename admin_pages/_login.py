"""The RAG Manager's login: a password (hashed, throttled) or an OIDC provider, and the
help shown while no admin is configured. Nothing else is shown until it lets the admin in."""

from __future__ import annotations

import time
from typing import Any

import streamlit as st

from admin_pages._shared import Tr
from config.settings import get_config
from manager.auth import (
    AdminSession,
    InvalidPasswordHash,
    LoginResult,
    LoginThrottle,
    oidc_user_allowed,
)


@st.cache_resource
def _throttle() -> LoginThrottle:
    return LoginThrottle()


def _secret(section: str, key: str | None = None) -> Any:
    """A value of ``.streamlit/secrets.toml``, or None (no file is not an error)."""
    try:
        value: Any = st.secrets.get(section)
        if key is not None:
            value = value.get(key) if hasattr(value, "get") else None
        return value
    except Exception:  # noqa: BLE001 - a missing or broken secrets file means "not set"
        return None


def _client_key() -> str:
    """Who is trying to log in, for the throttle: the connection's address (the same for
    every tab of a browser). Streamlit gives None on loopback: local users share one key."""
    try:
        address = st.context.ip_address
    except Exception:  # noqa: BLE001 - no client context: one shared key
        address = None
    return address if isinstance(address, str) and address else "local"


def _password_hash() -> str | None:
    configured = get_config().admin_password_hash
    if configured is not None and configured.get_secret_value().strip():
        return configured.get_secret_value()
    value = _secret("admin_password_hash")
    return value if isinstance(value, str) and value.strip() else None


def access_granted(t: Tr) -> bool:
    """Render the login (or the configuration help) unless a live admin session exists."""
    config = get_config()
    password_hash = _password_hash()
    oidc = _secret("auth") is not None
    session: AdminSession = st.session_state.setdefault("admin", AdminSession())
    now = time.time()
    if session.is_active(now, config.admin_session_minutes):
        session.touch(now)
        return True

    st.title(t("page_title"))
    if password_hash is None and not oidc:
        st.warning(t("not_configured"))
        st.markdown(t("how_to_configure"))
        st.code(".venv/bin/python -m manager hash-password", language="bash")
        st.markdown(t("how_to_configure_after"))
        return False
    if session.expired(now, config.admin_session_minutes):
        session.close()
        st.info(t("expired", minutes=config.admin_session_minutes))

    st.subheader(t("login_title"))
    if oidc and _oidc_login(t, session, now):
        return True
    if password_hash is not None:
        with st.form("login"):
            password = st.text_input(t("password"), type="password")
            submitted = st.form_submit_button(t("login"))
        if submitted:
            try:
                outcome = _throttle().attempt(password, password_hash, client=_client_key())
            except InvalidPasswordHash as exc:
                st.error(t("bad_hash", error=exc))
                return False
            if outcome.result is LoginResult.OK:
                session.open("admin", now)
                st.rerun()
            elif outcome.result is LoginResult.THROTTLED:
                st.error(t("throttled", seconds=int(outcome.retry_after_s) + 1))
            else:
                st.error(t("wrong_password"))
                if outcome.retry_after_s:
                    st.warning(t("throttled", seconds=int(outcome.retry_after_s) + 1))
    return False


def oidc_logged_in() -> bool:
    # st.user has no "is_logged_in" without an [auth] section (seen: logout crashed with
    # AttributeError, issue 11 finding 6): read it as a mapping key.
    return bool(st.user.get("is_logged_in", False))


def _oidc_login(t: Tr, session: AdminSession, now: float) -> bool:
    user = st.user
    if not oidc_logged_in():
        if st.button(t("login_oidc")):
            st.login()
        return False
    email = user.get("email")
    allowed = _secret("manager", "admin_emails") or []
    if oidc_user_allowed(email if isinstance(email, str) else None, list(allowed)):
        session.open(str(email), now)
        return True
    st.error(t("oidc_refused", email=email or "?"))
    if st.button(t("logout")):
        st.logout()
    return False
