"""Chatitego chat page (Streamlit). Not available yet: the chat page issue builds it."""

import streamlit as st

st.set_page_config(page_title="Chatitego", page_icon="💬")
st.title("Chatitego")
st.info(
    "La page de discussion n'est pas encore disponible. En attendant, la discussion "
    "fonctionne dans le terminal : `./run.sh`.\n\n"
    "The chat page is not available yet; meanwhile, chat in the terminal with `./run.sh`."
)
