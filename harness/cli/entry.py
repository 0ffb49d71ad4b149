"""`harness`'s entry point: parse, run the subcommand, and turn the kit's errors and
signals into one line and an exit code."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence

from harness.cli import exits
from harness.cli.exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE
from harness.cli.parser import build_parser
from harness.errors import HarnessError, SpecError
from harness.text import SafeStream


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: object = None, line: str | None = None) -> None:
    """Warnings (e.g. a corrupt run skipped) as one line each, without source lines."""
    print(f"warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    # Names, versions and errors from servers, manifests and imported files reach these
    # streams: control characters in them are shown, never obeyed (`harness.text`).
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)  # type: ignore[assignment]
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    exits.current.interrupts = None
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return int(args.func(args))
        except BrokenPipeError:
            # `harness list | head`: the reader left. Python's documented way: point
            # stdout at devnull so the interpreter's final flush does not fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
        except SpecError as exc:
            print("\n".join(f"error: {p}" for p in exc.problems), file=sys.stderr)
            return EXIT_USAGE
        except HarnessError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            terminated = exits.terminated()
            what = "terminated (SIGTERM)" if terminated else "interrupted"
            print(f"{what}: servers and clients stopped; the run in progress was written "
                  "as partial (or, if its measurement had ended, as it was). Continue with "
                  "--resume.", file=sys.stderr)
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
        except BaseException as exc:
            from harness.run.interrupts import StopNow

            if not isinstance(exc, StopNow):
                raise
            terminated = exits.terminated()
            print(f"{'terminated (SIGTERM)' if terminated else 'interrupted'} twice: stopped "
                  "at once. Records not written yet stay on the client machines (see the "
                  "lines above); `harness run SPEC --resume` or `harness cleanup SPEC` "
                  "writes them and stops anything left running.", file=sys.stderr)
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
