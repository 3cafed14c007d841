"""``python -m manager``: the RAG Manager's command line (see ``manager.cli``)."""

import sys

from manager.cli import main

sys.exit(main())
