"""``python -m lambdamart``: the ``lambdamart`` command line, for when the console script is not on PATH."""

import sys

from .cli import main

sys.exit(main())
