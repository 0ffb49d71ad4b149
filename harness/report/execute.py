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
        if log is not None:
            argv = ["sh", "-c", 'exec "$@" 2>>"$0"', str(log), *argv]
        spec = {
            "argv": argv,
            "display_name": "Python (harness)",
            "language": "python",
        }
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
        old = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (tmp, old) if p)
        try:
            yield KERNEL_NAME
        finally:
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
    for attempt in range(1, _KERNEL_STARTS + 1):
        try:
            pm.execute_notebook(
                str(notebook),
                str(out_path),
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


