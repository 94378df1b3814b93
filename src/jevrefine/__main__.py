"""`python -m jevrefine`: the same as the `jevrefine` command."""

import sys

from .cli import main

sys.exit(main())
