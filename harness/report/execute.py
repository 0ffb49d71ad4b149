"""Executing the notebooks: a kernel that runs this interpreter, and papermill with
retries where a kernel dies before it starts (`harness.report.build` assembles them)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness import paths

KERNEL_NAME = "kvbench-harness"
_NOTEBOOK_TIMEOUT_S = 600


@contextmanager
def venv_kernel(log: Path | None = None) -> Iterator[str]:
    """A kernelspec that runs this interpreter, found first on JUPYTER_PATH.

    A user-level ``python3`` kernelspec may point at another Python without the harness;
    pinning ``sys.executable`` makes batch runs use this venv whatever is installed.
    With `log`, the kernel's own stderr goes there instead of the console: jupyter_client
    interrupts every kernel it shuts down, and ipykernel logs that as an ERROR
    ("KeyboardInterrupt caught in kernel") after notebooks that ran fine; a notebook's
    own errors are in its cells and fail the report either way.
    """
    with tempfile.TemporaryDirectory(prefix="harness-kernel-") as tmp:
        spec_dir = Path(tmp) / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        # Kernels talk over loopback only; ipykernel's plain-text TCP warning would bury
        # the report's own output, so the kernel logs errors only.
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                "--log-level=ERROR"]
        # The kernels append to a log of our own directory (a shell's `>>` would follow a
        # link planted at `log`), moved into place at the end (`paths.write_new`).
        own_log = Path(tmp) / "kernel.log"
        if log is not None:
            argv = ["sh", "-c", 'exec "$@" 2>>"$0"', str(own_log), *argv]
        spec = {
            "argv": argv,
            "display_name": "Python (harness)",
            "language": "python",
        }
        (spec_dir / "kernel.json").write_text(json.dumps(spec, allow_nan=False))
        old = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (tmp, old) if p)
        try:
            yield KERNEL_NAME
        finally:
            if log is not None and own_log.exists():
                paths.write_new(log, own_log.read_bytes())
            if old is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = old


#: Kernel starts tried per notebook, and what nbclient says of one that died starting.
_KERNEL_STARTS = 3
_KERNEL_DIED = "Kernel died before replying to kernel_info"


def execute_notebook(
    notebook: Path, out_path: Path, parameters: dict[str, object], kernel_name: str
) -> str | None:
    """Execute one notebook; returns None on success, else the error text."""
    import papermill as pm  # heavy; only the report needs it

    declared = pm.inspect_notebook(str(notebook))
    params = {k: v for k, v in parameters.items() if k in declared}
    # papermill writes its output (during the run, too) by name: into a fresh directory
    # of our own, moved into place after (`paths.write_new`: never through a link).
    with tempfile.TemporaryDirectory(prefix="harness-nb-") as tmp:
        tmp_path = Path(tmp) / notebook.name
        try:
            return _execute_once(notebook, tmp_path, params, kernel_name)
        finally:
            if tmp_path.exists():
                paths.write_new(out_path, tmp_path.read_bytes())


def _execute_once(notebook: Path, tmp_path: Path, params: dict[str, object],
                  kernel_name: str) -> str | None:
    import papermill as pm

    for attempt in range(1, _KERNEL_STARTS + 1):
        try:
            pm.execute_notebook(
                str(notebook),
                str(tmp_path),
                parameters=params,
                kernel_name=kernel_name,
                cwd=str(notebook.parent),
                progress_bar=False,
                execution_timeout=_NOTEBOOK_TIMEOUT_S,
            )
        except pm.PapermillExecutionError as exc:
            return f"{exc.ename}: {exc.evalue}"
        except RuntimeError as exc:
            # jupyter_client picks the kernel's five TCP ports free, then the kernel binds
            # them: another process may take one in between ("Address already in use"),
            # and the kernel dies before it ran anything. Start another.
            if _KERNEL_DIED not in str(exc) or attempt == _KERNEL_STARTS:
                raise
            continue
        return None
    return None


