"""``python -m harness.report``: `harness.report.build.main`."""

from harness.report.build import main

raise SystemExit(main())
