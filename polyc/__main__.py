"""`python -m polyc ...`: the polyc command line (see `polyc.cli`)."""
import sys

from .cli import main

sys.exit(main())
