"""``python -m dpaudit.cli``: the ``dpaudit`` console script."""

import sys

from dpaudit.cli import main

sys.exit(main())
