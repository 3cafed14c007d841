"""Issue 11, configuration: Streamlit hardened, and dependencies pinned past known advisories.

The dependency check is offline on purpose: ``pip-audit`` needs PyPI's per-version JSON
API or OSV, neither reachable from this workplace (tried 2026-12: every one of the 170
pins came back "not found on PyPI", api.osv.dev does not resolve). Where the network
allows, run it too (SECURITY.md):
``pip-audit -r requirements.txt --no-deps --disable-pip``.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.version import Version

from config.settings import AppConfig

ROOT = Path(__file__).resolve().parents[1]
STREAMLIT_CONFIG = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text("utf-8"))
RUN_SH = (ROOT / "run.sh").read_text("utf-8")


def pins() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in (ROOT / "requirements.txt").read_text("utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, pinned = line.partition("==")
            assert sep and pinned, f"requirements.txt: {line!r} is not pinned exactly"
            found[name.strip().lower()] = pinned.strip()
    return found


# --- Streamlit ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("section", "option", "expected"),
    [
        ("server", "enableXsrfProtection", True),
        ("server", "enableCORS", True),
        ("server", "corsAllowedOrigins", []),
        ("server", "xsrfCookieSameSite", "lax"),
        ("server", "enableStaticServing", False),
        ("server", "enableAgentApi", False),
        ("client", "showErrorDetails", "none"),
        ("client", "showErrorLinks", False),
        ("global", "developmentMode", False),
        ("browser", "gatherUsageStats", False),
    ],
)
def test_streamlit_is_configured_hardened(section: str, option: str, expected: object) -> None:
    assert STREAMLIT_CONFIG[section][option] == expected


def test_the_upload_limit_matches_max_upload_mb() -> None:
    default = AppConfig.model_fields["max_upload_mb"].default
    assert STREAMLIT_CONFIG["server"]["maxUploadSize"] == default
    # run.sh passes the configured value (chatitego.toml / MAX_UPLOAD_MB) to both pages.
    assert "get_config as c; print(c().max_upload_mb)" in RUN_SH
    assert '--server.maxUploadSize "$UPLOAD_MB"' in RUN_SH


def test_run_sh_shows_error_details_only_in_development() -> None:
    assert RUN_SH.count("showErrorDetails") == 1
    guard = RUN_SH.index('if [ "${CHATITEGO_MODE:-production}" = "development" ]; then')
    assert guard < RUN_SH.index("--client.showErrorDetails=full") < RUN_SH.index("fi", guard)


def test_run_sh_limits_hosts_on_localhost() -> None:
    assert "--server.allowedHosts localhost --server.allowedHosts 127.0.0.1" in RUN_SH


def test_a_browser_rerun_reaches_the_running_script_as_a_rerun() -> None:
    # With fast reruns a rerun stops the running script (the chat page then records the
    # turn as stopped by the user) instead of raising RerunException, which the page
    # answers by asking the cut question again (tests/test_chat_page.py).
    assert STREAMLIT_CONFIG["runner"]["fastReruns"] is False


def test_streamlit_reads_these_options() -> None:
    from streamlit import config

    for section, options in STREAMLIT_CONFIG.items():
        for option in options:
            assert f"{section}.{option}" in config._config_options_template, option


# --- dependencies ---------------------------------------------------------------------------
# Package -> (first version free of the advisories named, advisories). The fix versions
# are those of the advisories themselves (GitHub Advisory Database / NVD).
KNOWN_ADVISORIES: dict[str, tuple[str, str]] = {
    "streamlit": ("1.37.0", "CVE-2024-42474 path traversal (static files, Windows)"),
    "pypdf": ("6.0.0", "CVE-2025-55197 memory exhaustion (FlateDecode)"),
    "filelock": ("3.20.1", "CVE-2025-68146 TOCTOU symlink race"),
    "cryptography": ("44.0.1", "CVE-2024-12797 vendored OpenSSL; CVE-2024-26130"),
    "starlette": ("0.47.2", "CVE-2024-47874, CVE-2025-54121 multipart DoS"),
    "h11": ("0.16.0", "CVE-2025-43859 request smuggling"),
    "urllib3": ("2.5.0", "CVE-2025-50181, CVE-2025-50182 redirects"),
    "requests": ("2.32.4", "CVE-2024-47081 .netrc credentials leak"),
    "jinja2": ("3.1.6", "CVE-2025-27516 sandbox escape"),
    "python-multipart": ("0.0.18", "CVE-2024-53981 DoS"),
    "aiohttp": ("3.12.14", "CVE-2025-53643 request smuggling"),
    "protobuf": ("6.31.1", "CVE-2025-4565 recursion DoS"),
    "pillow": ("10.3.0", "CVE-2024-28219 buffer overflow"),
    "pyarrow": ("14.0.1", "CVE-2023-47248 deserialisation"),
    "nltk": ("3.9", "CVE-2024-39705 unsafe pickle"),
    "torch": ("2.6.0", "CVE-2025-32434 torch.load RCE"),
    "transformers": ("4.48.0", "CVE-2024-11392/3/4 deserialisation"),
}


def test_every_dependency_is_pinned_and_torch_comes_first() -> None:
    assert len(pins()) > 100
    first = next(
        line.split("#", 1)[0].strip()
        for line in (ROOT / "requirements.in").read_text("utf-8").splitlines()
        if line.split("#", 1)[0].strip()
    )
    assert first == "torch==2.13.0"


@pytest.mark.parametrize("package", list(KNOWN_ADVISORIES))
def test_pinned_versions_are_past_the_known_advisories(package: str) -> None:
    pinned = pins()[package]
    first_safe, advisories = KNOWN_ADVISORIES[package]
    assert Version(pinned) >= Version(first_safe), f"{package}=={pinned}: {advisories}"


@pytest.mark.parametrize("package", ["streamlit", "pypdf", "filelock", "cryptography"])
def test_the_running_versions_are_the_audited_pins(package: str) -> None:
    assert version(package) == pins()[package]


def test_the_cookie_library_is_the_one_its_replacement_was_written_against() -> None:
    # tracer/browser_cookies.py uses only the component of streamlit-cookies-manager-v2
    # (its JavaScript); a new version must be looked at before the pin moves.
    assert pins()["streamlit-cookies-manager-v2"] == "0.3.1"
    assert version("streamlit-cookies-manager-v2") == "0.3.1"
