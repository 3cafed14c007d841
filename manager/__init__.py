"""The RAG Manager's library: everything ``rag_manager.py`` does besides rendering.

Admin authentication (``auth``), upload staging (``uploads``), document and chunk views
(``documents``), regression questions (``regression``), ingestion batches and other
admin operations (``operations``), and the page's strings (``i18n``). Never imports
streamlit: the page is glue.
"""
