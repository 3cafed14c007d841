"""The bench's baseline page: a bare Streamlit chat that streams the same text, no engine.

Run by ``bench.chat_page``: answers each prompt with the next text of the
JSON file named by ``BENCH_SCRIPT``, in 4-character chunks via st.write_stream.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import streamlit as st

script = json.loads(Path(os.environ["BENCH_SCRIPT"]).read_text(encoding="utf-8"))
turn = st.session_state.setdefault("turn", 0)
for role, text in st.session_state.setdefault("messages", []):
    st.chat_message(role).markdown(text)


def chunks(text: str) -> Iterator[str]:
    for i in range(0, len(text), 4):
        yield text[i : i + 4]


if prompt := st.chat_input("Question"):
    st.chat_message("user").markdown(prompt)
    answer = script[turn % len(script)].split("Answer: ", 1)[1]
    with st.chat_message("assistant"):
        st.write_stream(chunks(answer))
    st.session_state.messages += [("user", prompt), ("assistant", answer)]
    st.session_state.turn = turn + 1
