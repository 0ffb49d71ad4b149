"""``python -m harness.workerctl``: the name the control machine runs on client machines, whose
checkout may be older than the move of its code to `harness.run.workerctl` (issue 31)."""

import sys

from harness.run.workerctl import main

if __name__ == "__main__":
    sys.exit(main())
