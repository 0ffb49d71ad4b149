"""The command reference of the manual (docs/cli.md), written from `harness`'s own parser
at build time so that it cannot drift from the code: every subcommand, its usage, and
each argument with its help text, choices and default."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from harness import paths

#: Where the generated reference goes in docs/cli.md.
MARKER = "<!-- cli reference: generated from harness.cli.parser at build time -->"


def _subcommands(parser: argparse.ArgumentParser
                 ) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _default(action: argparse.Action) -> str:
    value = action.default
    if value in (None, False, [], argparse.SUPPRESS) or isinstance(
            action, argparse._HelpAction):
        return ""
    text = str(value)
    root = str(paths.project_root())
    if text.startswith(root):  # a path of this checkout: say it as the project's
        text = text[len(root):].lstrip("/") or "."
    return f"`{text}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _argument(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{o}`" for o in action.option_strings)
        if action.nargs != 0:
            meta = action.metavar or action.dest.upper()
            names += f" `{' '.join(meta) if isinstance(meta, tuple) else meta}`"
        return names
    return f"`{action.metavar or action.dest}`" + (" (optional)" if action.nargs == "?"
                                                   else "")


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": ""}
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        text += ("; " if text else "") + "one of " + ", ".join(
            f"`{c}`" for c in action.choices)
    return _cell(text)


def _section(prog: str, summary: str, parser: argparse.ArgumentParser,
             level: int) -> list[str]:
    out = [f"{'#' * level} `{prog}`", ""]
    if summary:
        out += [_cell(summary[0].upper() + summary[1:]) + ".", ""]
    if parser.description and parser.description != summary:
        out += [_cell(parser.description), ""]
    # argparse indents the usage's lines under "usage: "; the block has no such prefix.
    first, *rest = parser.format_usage().strip().removeprefix("usage: ").splitlines()
    usage = "\n".join([first, *(line.removeprefix(" " * len("usage: ")) for line in rest)])
    out += ["```", usage, "```", ""]
    rows = [a for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if rows:
        out += ["| argument | what it does | default |", "|---|---|---|"]
        out += [f"| {_argument(a)} | {_help(a)} | {_default(a)} |" for a in rows]
        out.append("")
    for name, helptext, sub in _subcommands(parser):
        out += _section(f"{prog} {name}", helptext, sub, level + 1)
    return out


def markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """The reference of every subcommand of `parser` (default: `harness`'s) as Markdown."""
    if parser is None:
        from harness.cli.parser import build_parser
        parser = build_parser()
    out: list[str] = []
    for name, helptext, sub in _subcommands(parser):
        out += _section(f"harness {name}", helptext, sub, 2)
    return "\n".join(out).rstrip() + "\n"


def commands(parser: argparse.ArgumentParser | None = None) -> dict[str, set[str]]:
    """Each subcommand (`harness hosts check` as "hosts check") and its option strings:
    what the docs' test holds the pages' commands against."""
    if parser is None:
        from harness.cli.parser import build_parser
        parser = build_parser()
    found: dict[str, set[str]] = {}

    def walk(prefix: str, p: argparse.ArgumentParser) -> None:
        for name, _, sub in _subcommands(p):
            key = f"{prefix} {name}".strip()
            found[key] = {o for a in sub._actions for o in a.option_strings}
            walk(key, sub)
    walk("", parser)
    return found
