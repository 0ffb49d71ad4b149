"""Where a RESP reply read outside the timed loop ends (a probe's, INFO, CONFIG GET,
CLUSTER SLOTS), found while it arrives, within the bounds of `harness.drivers.replies`:
linear in the reply's bytes, its items counted and its nesting bounded. The value is
then read by the one RESP parser (`harness.drivers.redis.parse_reply`)."""

from __future__ import annotations

from typing import Any

from harness.drivers.redis import RespError, parse_reply
from harness.drivers.replies import MAX_ENTRIES

#: How deep a reply read outside the timed loop may nest arrays (CLUSTER SLOTS: 3).
MAX_DEPTH = 8
#: Characters of a RESP header's number: an int64 in decimal, with its sign.
_MAX_NUMBER_CHARS = 20


def _header_number(head: bytes) -> int:
    """The number of a `$`, `*` or `:` line; RespError if it is not one."""
    digits = head[1:] if head[:1] == b"-" else head
    if not digits.isdigit() or len(head) > _MAX_NUMBER_CHARS:
        raise RespError(f"not a RESP number: {head[:40]!r}")
    return int(head)


class ReplyScan:
    """Where one RESP reply starting at `start` ends, found while it arrives.

    `feed(buf)` after each read looks only at bytes it has not looked at, so a reply of
    n bytes costs O(n) over any number of reads (parsing it whole after each read of
    64 KiB, as before, cost O(n^2)). It counts the reply's items (every array and
    value, at any depth); past `max_items` it stops (`cut`), and `value(buf)` is what
    came whole: the first elements of an array, the first bytes of a string. Arrays
    nested deeper than `MAX_DEPTH`, and anything that is not RESP, are RespError."""

    def __init__(self, max_items: int = MAX_ENTRIES, start: int = 0) -> None:
        self.start = self.pos = self.seen = start
        self.max_items = max_items
        #: Items still to come at each open level, outermost first: [] once it is whole.
        self.left = [1]
        self.items = 0
        #: The end of the reply's last whole array element, and their number.
        self.top_end: int | None = None
        self.cut = False

    @property
    def done(self) -> bool:
        return not self.left

    def feed(self, buf: bytes | bytearray) -> bool:
        """True once `buf` holds the whole reply, or once it was cut at `max_items`."""
        while self.left and not self.cut:
            eol = buf.find(b"\r\n", self.seen)
            if eol < 0:  # no line end yet: the next search starts at the new bytes
                self.seen = max(self.pos, len(buf) - 1)
                return False
            self.seen = eol
            self.items += 1
            if self.items > self.max_items:
                self.cut = True
                break
            tag = buf[self.pos]
            if tag in (36, 42, 58):  # $ bulk, * array, : integer
                n = _header_number(bytes(buf[self.pos + 1:eol]))
                if tag == 36 and n >= 0:
                    end = eol + 2 + n + 2
                    if len(buf) < end:
                        self.items -= 1  # counted again when the rest arrives
                        return False
                    if buf[end - 2:end] != b"\r\n":
                        raise RespError(f"a bulk string of {n} bytes not ended by CRLF")
                    self._item(end)
                elif tag == 42 and n > 0:
                    if len(self.left) > MAX_DEPTH:
                        raise RespError(f"arrays nested deeper than {MAX_DEPTH}")
                    self.left.append(n)
                    self.pos = self.seen = eol + 2
                elif n < -1:
                    raise RespError(f"a RESP length of {n}")
                else:  # an integer, a null or an empty array
                    self._item(eol + 2)
            elif tag in (43, 45):  # + simple string, - error
                self._item(eol + 2)
            else:
                raise RespError(f"not a RESP reply: {bytes(buf[self.pos:self.pos + 40])!r}")
        return True

    def _item(self, end: int) -> None:
        self.pos = self.seen = end
        while self.left:
            if len(self.left) == 2:  # an element of the reply's own array is whole
                self.top_end = end
            self.left[-1] -= 1
            if self.left[-1]:
                return
            self.left.pop()

    def value(self, buf: bytes | bytearray) -> tuple[Any, bool]:
        """(the reply, whether it was cut): whole, or what came whole before the cut (at
        `max_items`, or where the reading stopped); RespError if nothing did."""
        data = bytes(buf)
        if self.done:
            return parse_reply(data, self.start)[0], False
        eol = data.find(b"\r\n", self.start)
        tag = data[self.start] if len(data) > self.start else 0
        if tag == 42 and eol >= 0:  # the array's whole elements
            items, pos = [], eol + 2
            while self.top_end is not None and pos < self.top_end:
                item, pos = parse_reply(data, pos)
                items.append(item)
            return items, True
        if tag == 36 and eol >= 0:  # the string's bytes that came
            return data[eol + 2:eol + 2 + _header_number(data[self.start + 1:eol])], True
        raise RespError(f"a reply cut before anything of it came whole "
                        f"({len(data) - self.start:,} bytes)")
