"""Where the report's lines may break: never inside a name in a table, unless the table
could not fit the page otherwise.

A table's narrow column cut names in two (issue 51): Pango may break a line after ``/``
and ``-`` (``Store/|W``, ``Mem/R-|hit``), the stylesheet let a long word break anywhere
(``seed00|1-datastore-memcache``), and the tables' long words carry a ``<wbr>`` after
every separator (`harness.analysis.sections.tables.breakable`), after ``_`` and ``.``
too (``mem_|read_miss``). `keep_names_whole` runs over the assembled report.

In a table's body cells that are not numbers, a word that holds a letter, a separator a
line could break at, and something no English compound has (``_``, ``.``, ``/``, a
digit) is a name; one of up to `NAME_CHARS` characters stays on one line (a span of
class `NAME_CLASS`, ``white-space: nowrap`` in the stylesheet). A longer word (a run
id, a grid point written without spaces) may still break, but only between its parts,
after ``,`` ``;`` ``&`` or ``=``, each part that is a name kept whole
(``op=|mem_read_miss,|clients.connections=|4``). A table whose names kept whole would
be wider than the page (its widest words' estimated widths, `TEXT_WIDTH_PT`) keeps them
whole up to `tables.LONG_TOKEN` characters only, or else as it was: a name cut at a
separator reads better than a column cut off at the page's edge.

In the text, a ``<code>`` name of one word up to `NAME_CHARS` long moves to the next
line whole (Pango broke ``seed002-|cluster`` at its hyphen).
"""

from __future__ import annotations

import html
import re

from harness.analysis.sections.tables import LONG_TOKEN

#: The longest word kept on one line: experiment names, grid keys with their values,
#: kernel releases (``seed001-datastore-memcache``, ``services.db.mode=network-cluster,``).
NAME_CHARS = 40
#: The class of a name kept on one line (report/style.css).
NAME_CLASS = "name"
#: The page's text width (A4 less the stylesheet's margins and the body's padding), and
#: an upper estimate of a character's and a cell's padding width in a table (8 pt
#: DejaVu Sans: 0.6 em a character; 3 pt each side).
TEXT_WIDTH_PT = 480.0
CHAR_PT = 4.8
CELL_PAD_PT = 6.0

_TABLE = re.compile(r"<table\b.*?</table>", re.S)
_ROW = re.compile(r"<tr\b[^>]*>(.*?)</tr>", re.S)
_ANY_CELL = re.compile(r"(<t[dh]\b[^>]*>)(.*?)(</t[dh]>)", re.S)
_TAG = re.compile(r"(<[^>]*>)")
_WBR = re.compile(r"<wbr\s*/?>", re.I)
_MARK = "\x00"  # where a <wbr> was, while the words around it are read as one
_WORD = re.compile(r"[^\s]+")
#: A name: a letter, a separator a line could break at or after, and something no
#: English compound has: ``kv_cache``, ``Store/W``, ``seed001-datastore-memcache``, but
#: not ``Benjamini-Hochberg``, which may break at its hyphen as words do.
_NAME = re.compile(r"(?=.*[A-Za-z])(?=.*[_./0-9])\S*[/_.\-]\S*")
_CODE = re.compile(r"<code>([^<\s]+)</code>")
_SPAN = re.compile(rf'<span class="{NAME_CLASS}">(.*?)</span>')


def keep_names_whole(page: str) -> str:
    """`page` (the report's HTML) with the names in its tables and its code kept whole
    (see the module's doc)."""
    page = _CODE.sub(lambda m: (f'<code class="{NAME_CLASS}">{m[1]}</code>'
                                if _chars(m[1]) <= NAME_CHARS else m[0]), page)
    return _TABLE.sub(lambda m: _table(m[0]), page)


def _table(table: str) -> str:
    for limit in (NAME_CHARS, LONG_TOKEN):
        out = _ANY_CELL.sub(lambda m, limit=limit: (
            m[1] + _cell(m[2], limit) + m[3] if _body_text(m[1]) else m[0]), table)
        if _min_width_pt(out) <= TEXT_WIDTH_PT:
            return out
    return table


def _body_text(open_tag: str) -> bool:
    """A body cell that is not a number (a header's words, "coverage-statement", and an
    interval, "(1.59e-05–108,633)", may break: they are no names)."""
    return open_tag.startswith("<td") and not re.search(r'class="[^"]*\bnum\b', open_tag)


def _min_width_pt(table: str) -> float:
    """An upper estimate of the narrowest `table` can be laid out: per column its widest
    word that cannot break (a name kept whole, or any word between spaces and <wbr>s)."""
    widest: dict[int, int] = {}
    for row in _ROW.findall(table):
        for i, cell in enumerate(_ANY_CELL.finditer(row)):
            whole = [_chars(s) for s in _SPAN.findall(cell[2])]
            text = _WBR.sub(" ", _SPAN.sub(" ", cell[2]))
            words = [_chars(w) for w in _TAG.sub("", text).split()]
            widest[i] = max(widest.get(i, 0), *whole, *words, 0)
    return sum(n * CHAR_PT + CELL_PAD_PT for n in widest.values())


def _chars(text: str) -> int:
    return len(html.unescape(_TAG.sub("", text)))


def _cell(inner: str, limit: int) -> str:
    parts: list[str] = []
    for part in _TAG.split(inner):
        if _WBR.fullmatch(part):
            part = _MARK
        elif not part:
            continue
        if parts and not part.startswith("<") and not parts[-1].startswith("<"):
            parts[-1] += part  # one text, <wbr>s marked in it
        else:
            parts.append(part)
    return "".join(p if p.startswith("<") else _WORD.sub(
        lambda m: _word(m[0], limit), p) for p in parts)


def _word(word: str, limit: int) -> str:
    whole = word.replace(_MARK, "")
    if _chars(whole) <= limit:
        return _name(whole, limit)
    out: list[str] = []
    for piece in word.split(_MARK):
        if out and out[-1][-1:] in ",;&=":  # between parts, not inside a name
            out.append("<wbr>")
        out.append(piece)
    return "".join(p if p == "<wbr>" else _name(p, limit)
                   for p in re.split(r"(<wbr>)", "".join(out)))


def _name(word: str, limit: int) -> str:
    if word and _chars(word) <= limit and _NAME.fullmatch(word):
        return f'<span class="{NAME_CLASS}">{word}</span>'
    return word
