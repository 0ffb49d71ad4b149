"""The report's HTML holds only what a report needs: no script, no event handler, no
link to a local file, whatever a notebook's output or a Markdown text contains.

Text in the report comes from specs, manifests, server answers, directory names and
imported files, none of which the kit wrote. Markdown is rendered with its raw HTML
escaped and harmful link schemes dropped (`markdown`); every HTML fragment a section is
made of then passes an allowlist sanitizer (`clean`: nh3, the Python binding of the Rust
`ammonia` sanitizer, rather than our own regexes): the tags and attributes of tables,
text and figures, links only within the report or to http(s), images only as embedded
PNG or SVG data. WeasyPrint fetches nothing but such data (`url_fetcher`), so no local
file can reach the PDF, as an image, a stylesheet or an attachment.
"""

from __future__ import annotations

import base64
import re
from typing import Any

TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd",
    "del", "details", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3",
    "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q",
    "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody",
    "td", "tfoot", "th", "thead", "tr", "u", "ul", "var", "wbr",
})
ATTRIBUTES = {
    "*": {"class", "id", "title"},
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan", "align"},
    "th": {"colspan", "rowspan", "align", "scope"},
    "ol": {"start"},
}
#: Embedded figures: the only image sources. Anything else (a file, a URL) is dropped.
_IMAGE = re.compile(r"^data:image/(png|svg\+xml);base64,[A-Za-z0-9+/=\s]*$")
_LINK = re.compile(r"^(#[A-Za-z0-9_.:-]*|https?://[^\s\"'<>]*)$")


def _attribute(tag: str, name: str, value: str) -> str | None:
    if name == "href":
        return value if _LINK.match(value) else None
    if name == "src":
        return value if tag == "img" and _IMAGE.match(value) else None
    return value


def clean(html: str) -> str:
    """`html` with every tag, attribute and URL outside the allowlist removed (the text
    of a removed tag stays, escaped; script and style elements go with their content),
    and control characters shown as escapes."""
    import nh3

    from harness.text import printable

    return printable(nh3.clean(html, tags=set(TAGS), attributes={k: set(v) for k, v in
                                                         ATTRIBUTES.items()},
                     attribute_filter=_attribute, url_schemes={"http", "https", "data"},
                     clean_content_tags={"script", "style"}, link_rel="noopener noreferrer",
                     strip_comments=True), keep="\n\t")


def markdown(text: str) -> str:
    """Markdown as HTML, with raw HTML in it shown as text and javascript:, file: and
    data: links dropped; math kept for MathJax-less display as in Jupyter."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    renderer = IPythonRenderer(escape=True, allow_harmful_protocols=False,
                               exclude_anchor_links=True)
    return str(MarkdownWithMath(renderer=renderer).render(text))


def svg_image(svg: str) -> str:
    """An SVG figure as an embedded image: scripts in an SVG loaded as an image never
    run, and the SVG's own markup cannot reach the page's."""
    data = base64.b64encode(svg.encode()).decode()
    return f'<img src="data:image/svg+xml;base64,{data}" alt="">'


def url_fetcher() -> Any:
    """WeasyPrint's fetcher for the report: embedded data only (a `URLFetcher` limited to
    data: on WeasyPrint 68 and later, a function before)."""
    import weasyprint
    import weasyprint.urls

    def refuse(url: str) -> None:
        if not url.startswith("data:"):
            raise ValueError(f"the report embeds nothing from outside it ({url[:80]!r} "
                             "not fetched)")

    base = getattr(weasyprint.urls, "URLFetcher", None)
    if base is not None:
        class DataOnly(base):  # type: ignore[misc, valid-type]
            def fetch(self, url: str, headers: Any = None) -> Any:
                refuse(url)
                return super().fetch(url, headers)

        return DataOnly(allowed_protocols={"data"})

    def fetch(url: str, *args: Any, **kwargs: Any) -> Any:
        refuse(url)
        return weasyprint.default_url_fetcher(url, *args, **kwargs)

    return fetch
