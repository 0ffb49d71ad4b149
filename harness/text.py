"""Text that came from outside the kit, made safe to print on a terminal.

Experiment names, server version strings, error messages of remote programs and
imported files reach the terminal in the kit's lines; a control character in them
(an escape sequence, a carriage return, a bidirectional override) could rewrite the
screen, set the window title or hide what is printed. `printable` shows each as a
visible escape instead; `SafeStream` applies it to everything written to stdout and
stderr by the command line (`harness.cli.entry`), so no caller has to remember.
"""

from __future__ import annotations

import re
from typing import IO, Any

#: C0 and C1 controls, DEL, and the Unicode format characters that reorder or hide text.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def printable(text: object, keep: str = "") -> str:
    """`text` as a string with every control character shown as ``\\xNN`` or
    ``\\uNNNN``, except those in `keep` (``"\\n\\t"`` for multi-line messages)."""
    s = text if isinstance(text, str) else str(text)

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
