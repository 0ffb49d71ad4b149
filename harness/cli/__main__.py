"""`python -m harness.cli ...`, as the `harness` script."""

import sys

from harness.cli import main

sys.exit(main())
