"""``python -m graph_engine.tools``: the same as the ``graph-engine`` command."""

import sys

from .cli import main

sys.exit(main())
