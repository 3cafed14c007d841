"""Models: the LLMs (local llama.cpp, Mistral, OpenAI-compatible), embeddings, GGUF install."""

import os

# llama.cpp (and torch) run their threads with OpenMP, whose barriers spin while
# waiting. On a machine whose cores other processes also use (CI, a shared
# server), a spinning thread steals the core its partner needs and generation
# collapsed (median 1.7 tok/s over 8 runs on 2 busy cores, 3.7 with PASSIVE).
# libgomp reads this once, when loaded: set here, before torch or llama_cpp are
# imported. An explicit OMP_WAIT_POLICY=ACTIVE still wins (a dedicated machine).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
