"""Where things live. Every default path in the kit comes from here, and every file the
kit writes into a directory a user names is made here (`created`, `write_new`)."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from harness.errors import HarnessError

#: The checkout the package was installed from (editable install) or the CWD otherwise.
_PKG_ROOT = Path(__file__).resolve().parent.parent


#: A plain name: one directory under raw_results/ (an experiment), so no separator, no
#: leading dot, nothing a shell or another OS reads differently.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: Well under the 255 bytes a file system allows for one name, and readable in a table.
MAX_NAME_CHARS = 100


def name_problem(name: object) -> str | None:
    """Why `name` cannot name an experiment's directory, or None if it can (the one rule
    for a spec's ``name`` and ``harness import --experiment``)."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        return ("letters, digits, '_', '-', '.', starting with a letter or digit (it names "
                "a directory)")
    if len(name) > MAX_NAME_CHARS:
        return f"at most {MAX_NAME_CHARS} characters (it names a directory), not {len(name)}"
    return None


def project_root() -> Path:
    """The project checkout: $HARNESS_ROOT, else the directory above the package."""
    env = os.environ.get("HARNESS_ROOT")
    return Path(env).resolve() if env else _PKG_ROOT


def raw_results_dir() -> Path:
    return project_root() / "raw_results"


def experiments_dir() -> Path:
    return project_root() / "experiments"


def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def figures_dir() -> Path:
    return project_root() / "figures"


def report_dir() -> Path:
    return project_root() / "report"


# -- writing where a user pointed ---------------------------------------------------------
#: Mode bits of every file the kit writes into a directory a user names.
FILE_MODE = 0o644


@contextlib.contextmanager
def created(path: Path | str, mode: str = "w", **open_args: Any) -> Iterator[IO[Any]]:
    """A file object that becomes `path` when the block ends without an error.

    Written under a fresh hidden name created in `path`'s directory (O_CREAT | O_EXCL |
    O_NOFOLLOW through that directory's descriptor) and renamed over `path` there: a
    symbolic link planted at `path` or at the temporary name is never written through,
    and a reader never sees half a file. An existing link at `path` is an error naming
    it (the kit does not replace what a user may have pointed elsewhere on purpose)."""
    path = Path(path)
    try:
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise HarnessError(f"cannot write {path}: its directory cannot be opened "
                           f"({exc.strerror})") from None
    try:
        _check_target(dfd, path)
        tmp = f".{path.name[:100]}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     FILE_MODE, dir_fd=dfd)
        try:
            with os.fdopen(fd, mode, **open_args) as f:
                yield f
            _check_target(dfd, path)
            os.rename(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(dfd)


def write_new(path: Path | str, data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write `data` to `path` as `created` does (text in `encoding`); returns `path`."""
    if isinstance(data, str):
        with created(path, "w", encoding=encoding) as f:
            f.write(data)
    else:
        with created(path, "wb") as f:
            f.write(data)
    return Path(path)


def _check_target(dfd: int, path: Path) -> None:
    try:
        st = os.stat(path.name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise HarnessError(f"{path} is a symbolic link: the kit does not write through "
                           "one; remove it or choose another output directory")
    if not stat.S_ISREG(st.st_mode):
        raise HarnessError(f"{path} exists and is not a regular file; remove it or choose "
                           "another output directory")
