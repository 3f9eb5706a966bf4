"""`python -m kudusql ...` is the `kudusql` command (kudusql/cli.py)."""

import sys

from kudusql.cli import main

sys.exit(main())
