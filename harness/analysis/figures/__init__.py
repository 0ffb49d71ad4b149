"""Figures: seaborn (PNG + SVG for the report) and Altair (zoomable in JupyterLab).

- `style`      size, style and saving
- `plots`      an experiment's figures
- `verdicts`   a comparison's forest plot
- `sweeps`     a sweep's latency-throughput curve
- `charts`     Vega-Lite figures for the explorer
"""
