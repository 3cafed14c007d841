"""Entry point of ``python -m themes``."""

import sys

from themes.cli import main

sys.exit(main())
