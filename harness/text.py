"""Text that came from outside the kit, made safe to print, and secrets kept out of it.

Experiment names, server version strings, error messages of remote programs and
imported files reach the terminal in the kit's lines; a control character in them
(an escape sequence, a carriage return, a bidirectional override) could rewrite the
screen, set the window title or hide what is printed. `printable` shows each as a
visible escape instead; `SafeStream` applies it to everything written to stdout and
stderr by the command line (`harness.cli.entry`), so no caller has to remember.

`finite_data` makes data strict JSON (no NaN or Infinity) before it is written.

Secrets are masked on the same paths (`redact`): every password this process holds
(`add_secret`: each `Credentials` registers its own) and any password in a URL
(`user:***@host`) become `***` in what is printed, in every manifest written
(`harness.results.io.write_run`) and in the report.
"""

from __future__ import annotations

import math
import re
from typing import IO, Any

#: Passwords held by this process: shown nowhere (`redact`).
_SECRETS: set[str] = set()
#: user:password@ in a URL.
_URL_PASSWORD = re.compile(r"(://[^/:@\s]*):[^/@\s]*@")
#: Shorter values are not masked: they would mask ordinary words.
MIN_SECRET_CHARS = 6


def add_secret(value: str) -> None:
    """Mask `value` wherever this process prints or writes text from now on."""
    if isinstance(value, str) and len(value) >= MIN_SECRET_CHARS:
        _SECRETS.add(value)


def redact(text: str) -> str:
    """`text` with every registered secret and any password in a URL as ``***``."""
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, "***")
    return _URL_PASSWORD.sub(r"\1:***@", text) if "@" in text else text


def redact_data(value: Any) -> Any:
    """`redact` over every string of JSON-like data (keys too)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    return value


def finite_data(value: Any) -> Any:
    """JSON-like data with every float that is not finite (NaN, +-inf) as None, which is
    what the kit's JSON means by "no number": strict JSON has no NaN or Infinity, and
    every JSON the kit writes is written with ``allow_nan=False``, which refuses them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_data(v) for v in value]
    return value


#: C0 and C1 controls, DEL, and the Unicode format characters that reorder or hide text.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def printable(text: object, keep: str = "") -> str:
    """`text` as a string with every control character shown as ``\\xNN`` or
    ``\\uNNNN``, except those in `keep` (``"\\n\\t"`` for multi-line messages), and
    secrets masked (`redact`)."""
    s = redact(text if isinstance(text, str) else str(text))

    def show(m: re.Match[str]) -> str:
        c = m.group()
        if c in keep:
            return c
        return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"

    return _CONTROL.sub(show, s)


class SafeStream:
    """A text stream that writes `printable(text, keep="\\n\\t")` to `raw`. Progress bars
    that move the cursor on purpose write to `raw_stream`."""

    def __init__(self, raw: IO[str]) -> None:
        self.raw_stream = raw

    def write(self, text: str) -> int:
        self.raw_stream.write(printable(text, keep="\n\t"))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, ...
        return getattr(self.raw_stream, name)


def raw_stream(stream: Any) -> Any:
    """The stream under a `SafeStream` (for a progress bar's own control characters)."""
    return getattr(stream, "raw_stream", stream)
