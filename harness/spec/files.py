"""Reading the files and values a spec is made of, bounded, before anything parses them.

A spec, its inventory and each `--set` value are input nobody has checked yet: a file is
read only if it is a regular file (not /dev/zero, a FIFO or a directory) of at most its
limit, and never more than the limit + 1 bytes, so a file that grows or lies about its
size cannot exhaust memory either. Its YAML is composed once and the node tree checked
before any Python value is made from it (`load_yaml`): not too deep, not too many values
once aliases are expanded, no mapping key given twice (YAML would keep the last one
silently), no integer too long to convert; every problem is a `YamlProblem`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from harness.errors import SpecError

#: Bytes a spec or an inventory may have. The built-in specs are a few KB; 1 MiB is far
#: beyond any hand-written one and still parses in about a second.
MAX_SPEC_BYTES = 1 << 20
MAX_INVENTORY_BYTES = MAX_SPEC_BYTES
#: Bytes one `--set KEY=VALUE` may have: a value typed on a command line.
MAX_SET_BYTES = 64 << 10
#: Bounds on a document: nesting depth, and values with YAML aliases expanded.
MAX_DEPTH, MAX_VALUES = 40, 100_000
#: Characters an integer may have. No setting takes more than ~20 digits; a longer one
#: only costs (Python refuses above 4,300 digits, base 60 and hex print longer still).
MAX_INT_CHARS = 100
#: Problems of one document shown at most: a file of 100,000 repeated keys says so once.
MAX_SHOWN = 50

_INT, _MERGE = "tag:yaml.org,2002:int", "tag:yaml.org,2002:merge"
#: libyaml's parser when PyYAML was built with it: the same documents, ~8x faster.
_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

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
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise Unreadable(getattr(exc, "strerror", None) or str(exc)) from None
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
    try:
        return key, load_yaml(value)[1]
    except BadYaml as exc:  # lines and columns of a one-line value say little
        raise SpecError([f"--set {'.'.join(filter(None, (key, p.field)))}: {p.message}"
                         for p in exc.problems]) from None


@dataclass(frozen=True)
class YamlProblem:
    """One problem of a YAML document: at a dotted `field` ("": the document itself)."""

    field: str
    line: int | None
    message: str
    column: int | None = None

    def text(self, source: str) -> str:
        """`source:field: message (line N)`, or `source:line:column: message`."""
        if self.field:
            return f"{source}:{self.field}: {self.message}" + (
                f" (line {self.line})" if self.line else "")
        where = "".join(f":{n}" for n in (self.line, self.column) if n)
        return f"{source}{where}: {self.message}"


class BadYaml(Exception):
    def __init__(self, problems: list[YamlProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(p.message for p in problems))


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """The safe loader, with scalars Python cannot make (2001-02-30, 0x_) as YAML errors
    at their place instead of a ValueError from nowhere."""


class _ScalarError(ConstructorError):
    """A scalar of a known type that Python cannot make; the problem says which."""


def _guarded(construct: Callable[[Any, yaml.Node], Any]) -> Callable[[Any, yaml.Node], Any]:
    def run(loader: Any, node: yaml.Node) -> Any:
        try:
            return construct(loader, node)
        except ValueError as exc:
            raise _ScalarError(None, None, f"cannot read {node.value!r}: {exc}",
                               node.start_mark) from None
    return run


for _tag, _construct in SafeConstructor.yaml_constructors.items():
    if _tag and _tag.endswith((":int", ":float", ":timestamp")):
        _Loader.add_constructor(_tag, _guarded(_construct))


def load_yaml(text: str) -> tuple[yaml.Node | None, Any]:
    """The node tree (for line numbers) and the value of one YAML document, checked
    (see the module doc) before the value is made; BadYaml lists every problem."""
    loader = None
    try:
        loader = _Loader(text)  # the pure-Python reader already checks characters here
        node = loader.get_single_node()
        if node is None:
            return None, None
        problems = check_tree(node)
        if problems:
            raise BadYaml(problems)
        return node, loader.construct_document(node)
    except RecursionError:
        raise BadYaml([YamlProblem("", None, "nested too deeply to be a spec")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        if not isinstance(exc, _ScalarError):  # which says what it is
            problem = f"malformed YAML: {problem}"
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise BadYaml([YamlProblem("", line, problem, column)]) from None
    finally:
        if loader is not None:
            loader.dispose()


class _TooBig(Exception):
    pass


def override_problem(value: Any) -> str | None:
    """Why a Python value given as an override (`load_spec(path, overrides)`, the values
    of `--set` after `parse_override`) could not be in a spec, or None: what `check_tree`
    refuses in YAML (too deep, too many values, an integer too long). Later messages
    print values, and a Python int of over 4,300 digits cannot even be printed."""
    count = 0

    def visit(v: Any, depth: int) -> None:
        nonlocal count
        count += 1
        if depth > MAX_DEPTH:
            raise _TooBig(f"nested more than {MAX_DEPTH} levels deep")
        if count > MAX_VALUES:
            raise _TooBig(f"more than {MAX_VALUES:,} values; too big to be in a spec")
        if isinstance(v, int) and abs(v) >= 10**MAX_INT_CHARS:
            raise _TooBig(f"a number about {int(v.bit_length() * 0.30103) + 1:,} digits long; "
                          f"no setting takes one longer than {MAX_INT_CHARS}")
        items = (x for pair in v.items() for x in pair) if isinstance(v, Mapping) else (
            v if isinstance(v, list | tuple) else ())
        for x in items:
            visit(x, depth + 1)

    try:
        visit(value, 0)
    except _TooBig as exc:
        return str(exc)
    return None


def _part(key: yaml.Node) -> str:
    """A key as one part of a dotted field (as `harness.spec` names fields), shortened."""
    text = str(key.value) if isinstance(key, yaml.ScalarNode) else "<key>"
    return text if len(text) <= 60 else text[:57] + "..."


def check_tree(root: yaml.Node) -> list[YamlProblem]:
    """Problems of a composed document, each node looked at once (linear in the text):
    too deep or too big (alone: the rest is not worth reading), else every key given
    twice and every integer too long."""
    sizes: dict[int, int] = {}  # id(node) -> values, aliases expanded
    problems: list[YamlProblem] = []
    keys = SafeConstructor()  # makes scalar keys, so that `a` and `'a'` are one key

    def visit(node: yaml.Node, depth: int, path: tuple[str, ...]) -> int:
        line = node.start_mark.line + 1
        if depth > MAX_DEPTH:
            raise _TooBig(f"nested more than {MAX_DEPTH} levels deep (line {line}); a spec "
                          "is a few levels deep")
        if id(node) in sizes:
            return sizes[id(node)]
        count = 1
        if isinstance(node, yaml.ScalarNode):
            if node.tag == _INT and len(node.value) > MAX_INT_CHARS:
                problems.append(YamlProblem(
                    ".".join(path), line, f"a number {len(node.value):,} characters long; "
                    f"no setting takes one longer than {MAX_INT_CHARS}"))
        elif isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key, value in node.value:
                sub = (*path, _part(key))
                count += visit(key, depth + 1, sub) + visit(value, depth + 1, sub)
                if key.tag == _MERGE or not isinstance(key, yaml.ScalarNode) or (
                        key.tag == _INT and len(key.value) > MAX_INT_CHARS):
                    continue  # merged keys may be overridden; the others are errors anyway
                try:
                    made = keys.construct_object(key)
                    first = seen.get(made)
                except (yaml.YAMLError, ValueError, TypeError):
                    continue  # construction reports it, at its place
                here = key.start_mark.line + 1
                if first is None:
                    seen[made] = here
                else:
                    problems.append(YamlProblem(".".join(sub), here, f"given twice, on lines "
                                                f"{first} and {here}; YAML would keep only "
                                                "the last"))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                count += visit(item, depth + 1, (*path, str(i)))
        if count > MAX_VALUES:
            raise _TooBig(f"more than {MAX_VALUES:,} values once YAML aliases are expanded "
                          f"(line {line}); too big to be a spec")
        sizes[id(node)] = count
        return count

    try:
        visit(root, 0, ())
    except _TooBig as exc:
        return [YamlProblem("", None, str(exc))]
    if len(problems) > MAX_SHOWN:
        more = len(problems) - MAX_SHOWN
        problems = [*problems[:MAX_SHOWN], YamlProblem("", None, f"... and {more:,} more "
                                                                 "problems like these")]
    return problems
