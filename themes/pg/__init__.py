"""The PostgreSQL + pgvector backend (``VECTOR_BACKEND=postgres``, ``DATABASE_URL``).

Everything a theme keeps lives in the database: settings and system prompt, original
documents, chunks with their embeddings and full-text vectors, the docstore and the
published index version. Any number of app processes (replicas) pointed at one database
see each other's changes at their next interaction.
"""
