"""Where themes are stored: the two settings the ``themes`` package reads itself.

``VECTOR_BACKEND`` (``embedded``: folders under the data directory, the default;
``postgres``: one PostgreSQL database with pgvector) and ``DATABASE_URL``. They are
read like every other setting (environment, then ``chatitego.toml`` or the file named by
``CHATITEGO_CONFIG``, then the defaults); ``config.settings.AppConfig`` inherits them so
that the README's settings table lists them with the rest. ``themes`` cannot import
``engine``: this module is the part of the configuration it needs.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

VectorBackend = Literal["embedded", "postgres"]


def config_file() -> Path:
    """The TOML configuration file (``CHATITEGO_CONFIG``, else ``chatitego.toml``)."""
    return Path(os.environ.get("CHATITEGO_CONFIG", "chatitego.toml"))


class StoreSettings(BaseSettings):
    """The storage settings (env var = field name in upper case)."""

    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False)

    vector_backend: VectorBackend = Field(
        "embedded",
        description="embedded (folders under the data directory) or postgres (themes, "
        "documents and indexes in the PostgreSQL database at DATABASE_URL)",
    )
    database_url: SecretStr | None = Field(
        None,
        description="PostgreSQL with pgvector for VECTOR_BACKEND=postgres, e.g. "
        "postgresql://user:password@host:5432/chatitego?sslmode=require",
    )
    pg_hnsw_ef_search: int = Field(
        100,
        ge=10,
        le=1000,
        description="postgres: HNSW candidates per vector search (higher: better recall, slower)",
    )

    @model_validator(mode="after")
    def _url_for_postgres(self) -> StoreSettings:
        if self.vector_backend == "postgres" and not self.database_url:
            raise ValueError(
                "VECTOR_BACKEND=postgres needs DATABASE_URL, e.g. "
                "postgresql://user:password@host:5432/chatitego"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = TomlConfigSettingsSource(settings_cls, toml_file=config_file())
        return (init_settings, env_settings, toml)


@lru_cache(maxsize=1)
def get_store_settings() -> StoreSettings:
    """The process-wide storage settings, read once (``cache_clear()`` to read again)."""
    return StoreSettings()
