"""Chatitego RAG Manager page (Streamlit). Not available yet: its issue builds it."""

import streamlit as st

st.set_page_config(page_title="Chatitego — RAG Manager", page_icon="🗂️")
st.title("RAG Manager")
st.info(
    "Le gestionnaire de thèmes et de documents n'est pas encore disponible.\n\n"
    "The theme and document manager is not available yet."
)
