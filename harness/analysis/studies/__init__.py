"""One module per study: what its notebook shows, computed here so notebooks hold no logic.

Each module exposes `analyse(raw_dir, ...)` returning an object whose methods return
things a notebook cell can display (HTML, Markdown, images), or None when the study was
not run, so a notebook over absent results still executes and says "not run".
"""

#: Output metadata key of a study's "not run" note; the report ends the section there.
NOT_RUN_MARKER = "harness_not_run"
#: Output metadata key of an optional section with nothing to show: the report leaves the
#: whole section out (e.g. "imported results" when nothing was imported).
OMIT_MARKER = "harness_omit_section"
