"""``python -m spf``: the same as the ``spf`` command."""
import sys

from .cli import main

sys.exit(main())
