"""The cluster study (seed 002): single node, local cluster, network cluster.

`analysis` computes the numbers, `plots` draws them, `views.Study` is what notebook
30-cluster calls (``analyse(raw_dir)``).
"""

from harness.studies.cluster.views import Study, analyse

__all__ = ["Study", "analyse"]
