"""`python -m shell`: the same as `kudusql shell` (see shell/main.py)."""

import sys

from shell.main import main

sys.exit(main())
