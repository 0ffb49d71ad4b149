"""What every figure shares: its size and style, axis helpers, and how it is saved (PNG
and SVG, byte-identical when nothing changed) or shown in a notebook.

Figures are built on `matplotlib.figure.Figure` directly, never through pyplot, so no
backend is chosen or switched (nothing happens at import, and saving works headless).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import seaborn as sns
from matplotlib.figure import Figure, FigureBase
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from harness import paths

#: Default figure size in inches; the report shows figures at the text width.
WIDTH, HEIGHT = 7.5, 4.0
PNG_DPI = 150



@contextlib.contextmanager
def style() -> Iterator[None]:
    # Themes are applied per figure in a context, so importing this module sets nothing.
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.95):
        yield


def new_figure(width: float = WIDTH, height: float = HEIGHT) -> Figure:
    with style():
        fig = Figure(figsize=(width, height), layout="constrained")
        fig.add_subplot()
    return fig


def legend_outside(where: Any, handles: Sequence[Any] | None = None,
                   labels: Sequence[str] | None = None, *, fontsize: float = 8,
                   **kwargs: Any) -> Any:
    """A legend outside every plot area, so it covers no curve, bar or point: an axes'
    beside it on the right; a figure's or a subfigure's (one legend for all its panels)
    under them. A
    legend inside the axes covered data wherever the data happened to fall (issue 51:
    the percentile lines, the cluster's bars); ``loc="best"`` only makes that rarer.
    Returns the legend, or None when nothing is labelled."""
    if handles is None:
        source = where.axes if isinstance(where, FigureBase) else [where]
        pairs = dict(item for ax in source for item in zip(
            *ax.get_legend_handles_labels()[::-1], strict=True))  # label -> handle
        labels, handles = list(pairs), list(pairs.values())
    if not handles:
        return None
    labels = list(labels) if labels is not None else [h.get_label() for h in handles]
    if isinstance(where, FigureBase):
        ncols = kwargs.pop("ncols", min(4, len(handles)))
        return where.legend(handles, labels, loc="outside lower center", ncols=ncols,
                            fontsize=fontsize, frameon=False, **kwargs)
    return where.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1),
                        borderaxespad=0, fontsize=fontsize, **kwargs)


def log_ms_axis(axis) -> None:
    """Label 1-2-5 steps on a log axis: bare decades leave a 0.1-2 ms range unreadable."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def save(fig: Figure, name: str, figures_dir: Path) -> dict[str, Path]:
    """Write `fig` as ``<figures_dir>/<name>.png`` and ``.svg``; returns both paths."""
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for ext in ("png", "svg"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=PNG_DPI if ext == "png" else None,
                    metadata=_metadata(ext))
        out[ext] = paths.write_new(figures_dir / f"{slug(name)}.{ext}", buf.getvalue())
    return out


def _metadata(ext: str) -> dict[str, str | None]:
    # No creation dates: regenerated figures are byte-identical when nothing changed.
    return {"Date": None} if ext == "svg" else {"Software": None}


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=PNG_DPI)
    return buf.getvalue()


def publish(fig: Figure, name: str, figures_dir: Path | None):
    """Save `fig` (if `figures_dir`) and return an IPython Image of it for the notebook."""
    from IPython.display import Image  # only notebooks call this; keep imports light

    if figures_dir is not None:
        save(fig, name, figures_dir)
    return Image(data=png_bytes(fig), format="png", width=int(WIDTH * 96))
