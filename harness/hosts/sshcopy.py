"""Copying files over an SSH exec channel, for servers without an SFTP subsystem.

Hardened machines often run sshd without `Subsystem sftp`; `cat` is everywhere. The
bytes go through the channel as they are (nothing decodes them), and a copy that does
not end with exit status 0 leaves no local file behind.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable
from pathlib import Path

import paramiko

from harness.errors import HostError

CHUNK = 1 << 16
#: How long opening a channel, and the end of a finished stream, may take.
TIMEOUT_S = 30.0


class NoSFTPError(HostError):
    """The SSH server has no SFTP subsystem (files then go over an exec channel)."""


def _drain(recv: Callable[[int], bytes], sink: list[bytes]) -> None:
    while chunk := recv(CHUNK):
        sink.append(chunk)


def _decode(chunks: list[bytes]) -> str:
    return b"".join(chunks).decode("utf-8", "replace")


def put_by_exec(transport: paramiko.Transport, name: str, local: Path | str,
                remote: str) -> None:
    """Stream the local file into `cat > remote`."""
    try:
        chan = transport.open_session(timeout=TIMEOUT_S)
        with chan, open(local, "rb") as src:
            chan.exec_command(shlex.join(["sh", "-c", 'cat > "$1"', "sh", remote]))
            while chunk := src.read(CHUNK):
                chan.sendall(chunk)
            chan.shutdown_write()
            err: list[bytes] = []
            _drain(chan.recv_stderr, err)
            ok = chan.status_event.wait(TIMEOUT_S) and chan.exit_status == 0
    except (OSError, EOFError, paramiko.SSHException) as exc:
        raise HostError(f"{name}: cannot copy {local} to {remote}: {exc}") from exc
    if not ok:
        raise HostError(f"{name}: cannot copy {local} to {remote} over an exec "
                        f"channel: {_decode(err).strip() or 'the connection was lost'}")


def get_by_exec(transport: paramiko.Transport, name: str, remote: str,
                local: Path | str) -> None:
    """Stream `remote` from `cat`; the local file is created with the first byte (or
    at a clean end, for an empty file) and removed if the stream ends without exit
    status 0 (a cut link, a read error)."""
    # `cat` opens the file before it writes a byte: an empty stream plus an error
    # means nothing to copy, so no local file is created for a missing remote one.
    try:
        chan = transport.open_session(timeout=TIMEOUT_S)
        chan.exec_command(shlex.join(["cat", "--", remote]))
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise HostError(f"{name}: cannot copy {remote} to {local} over an exec "
                        f"channel: {exc}") from exc
    err: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(chan.recv_stderr, err), daemon=True)
    reader.start()
    dst = None
    status: int | None = None
    try:
        with chan:
            chan.shutdown_write()
            while chunk := chan.recv(CHUNK):
                if dst is None:
                    dst = open(local, "wb")  # noqa: SIM115 - closed below
                dst.write(chunk)
            reader.join(TIMEOUT_S)
            status = chan.exit_status if chan.status_event.wait(TIMEOUT_S) else None
        if dst is None and status == 0:
            open(local, "wb").close()  # an empty file, copied
    except (paramiko.SSHException, OSError, EOFError) as exc:
        status, err = None, [str(exc).encode()]
    finally:
        if dst is not None:
            dst.close()
    if status != 0:
        if dst is not None:
            Path(local).unlink(missing_ok=True)
        why = _decode(err).strip() or ("the connection was lost" if status in (None, -1)
                                       else f"cat exited {status}")
        raise HostError(f"{name}: cannot copy {remote} to {local} over an exec "
                        f"channel: {why}")
