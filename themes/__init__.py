"""Themes: one business domain each — its settings, documents, readers, ingestion, index
storage (embedded or PostgreSQL) and hybrid retrieval."""
