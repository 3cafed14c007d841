"""Model loading: embeddings (router, RAG) and the embedded local LLM."""
