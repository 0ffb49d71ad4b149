"""``python -m harness.worker``: the name the control machine runs on client machines, whose
checkout may be older than the move of its code to `harness.run.worker` (issue 31)."""

import sys

from harness.run.worker import main

if __name__ == "__main__":
    sys.exit(main())
