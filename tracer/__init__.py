"""StreamlitChatTracer: rebuilds and decorates ReAct blocks in the chat page (in progress)."""
