"""Reading the files and values a spec is made of, bounded, before anything parses them.

A spec, its inventory and each `--set` value are input nobody has checked yet: a file is
read only if it is a regular file (not /dev/zero, a FIFO or a directory) of at most its
limit, and never more than the limit + 1 bytes, so a file that grows or lies about its
size cannot exhaust memory either.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from harness.errors import SpecError

#: Bytes a spec or an inventory may have. The built-in specs are a few KB; 1 MiB is far
#: beyond any hand-written one and still parses in about a second.
MAX_SPEC_BYTES = 1 << 20
MAX_INVENTORY_BYTES = MAX_SPEC_BYTES
#: Bytes one `--set KEY=VALUE` may have: a value typed on a command line.
MAX_SET_BYTES = 64 << 10

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class Unreadable(Exception):
    """A file that cannot be used; the message says why, without the file's name."""


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    return f"it is {kind}, not a regular file"


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of the regular file `path`, refused (Unreadable) if it is not one or
    holds more than `limit` bytes; `what` ("a spec") names it in the message."""
    too_big = f"more than the {limit:,} bytes {what} may have"
    try:
        # Refused before opening: opening a device can act (a tape rewinds), a FIFO waits.
        why = _not_regular(os.stat(path).st_mode)
        if why:
            raise Unreadable(why)
        # O_NONBLOCK: if the path became a FIFO since, opening it does not wait for a writer.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        why = _not_regular(info.st_mode)
        if why:
            raise Unreadable(why)
        if info.st_size > limit:
            raise Unreadable(f"{info.st_size:,} bytes, {too_big}")
        chunks, size = [], 0
        while size <= limit:  # a file may grow after fstat, or report size 0 (/proc)
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Unreadable(f"it grew while read: {too_big}")
        return b"".join(chunks)
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def parse_override(item: str) -> tuple[str, Any]:
    """`--set KEY=VALUE` as (KEY, VALUE read as YAML); SpecError saying what is wrong."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise SpecError([f"--set {item!r}: expected KEY=VALUE, e.g. --set repetitions=3"])
    size = len(value.encode("utf-8", "surrogateescape"))
    if size > MAX_SET_BYTES:
        raise SpecError([f"--set {key}: {size:,} bytes, more than the {MAX_SET_BYTES:,} "
                         "bytes a --set value may have"])
    return key, yaml.safe_load(value)
