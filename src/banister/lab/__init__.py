"""The lab: rerun the experiments behind structured output and draw them (``banister lab``).

Each experiment is a function returning a :class:`Result` (its numbers, a table and a matplotlib
figure); :func:`run_lab` runs them all and writes PNGs and one HTML report.
"""

from banister.lab.report import run_lab
from banister.lab.result import Result

__all__ = ["Result", "run_lab"]
