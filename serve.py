"""``streamlit run PAGE [flags]``, with the models warming up in the same process first.

    .venv/bin/python serve.py chatitego.py --server.port 8501

With ``CHATITEGO_WARM_THEME`` set (``./run.sh`` sets it for the chat page), the
models load and that theme's stable prompt is read by the local model in a
background thread while Streamlit starts: the page finds them ready.
"""

from __future__ import annotations

import logging
import os
import sys


def main() -> None:
    theme = os.environ.get("CHATITEGO_WARM_THEME", "").strip()
    if theme:
        from engine.warmup import warm_up_in_background

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        warm_up_in_background(theme)
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", *sys.argv[1:]]
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
