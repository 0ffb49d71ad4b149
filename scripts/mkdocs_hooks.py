"""MkDocs hook (mkdocs.yml `hooks:`): writes the command reference into docs/cli.md at
build time from `harness`'s own parser, so the manual cannot drift from the CLI."""

from __future__ import annotations

from typing import Any

from harness.cli import reference


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != "cli.md":
        return markdown
    if reference.MARKER not in markdown:
        raise ValueError(f"docs/cli.md lacks the marker {reference.MARKER!r}")
    return markdown.replace(reference.MARKER, reference.markdown())
