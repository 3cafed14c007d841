"""The RAG Manager's pages (one file per page, run by ``st.navigation`` in ``rag_manager.py``)
and their private Streamlit helpers (``_*.py``).

Not named ``pages/``: that name is Streamlit's automatic multipage convention, which
``st.navigation`` replaces (Streamlit warns when both are present), and the helper modules
here are not pages.
"""
