"""`make lab` starts JupyterLab as root (which `make setup` assumes) and as anyone else,
with LAB_ARGS passed through: the server answers its REST API with the token given."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from harness.hosts.local import free_port

ROOT = Path(__file__).resolve().parent.parent


def test_make_lab_serves_with_the_args_given() -> None:
    port, token = free_port(), "kvbench-test-token"
    proc = subprocess.Popen(
        ["make", "-s", "lab", f"LAB_ARGS=--port={port} --no-browser --ip=127.0.0.1 "
         f"--ServerApp.token={token}"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline, status = time.monotonic() + 90, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2) as r:
                    status = json.loads(r.read())
                    break
            except OSError:
                time.sleep(0.3)
        assert status is not None, proc.stdout.read() if proc.poll() is not None else "no answer"
        assert "started" in status
        # The token is enforced: without it the API refuses.
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents", timeout=5)
            refused = False
        except urllib.error.HTTPError as exc:
            refused = exc.code == 403
        assert refused
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
