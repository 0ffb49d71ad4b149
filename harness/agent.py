"""``python -m harness.agent``: the name the control machine runs on client machines, whose
checkout may be older than the move of its code to `harness.run.agent` (issue 31)."""

import sys

from harness.run.agent import main

if __name__ == "__main__":
    sys.exit(main())
