"""What every lab experiment returns: its numbers, a table for the report, and a figure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from matplotlib.figure import Figure


@dataclass
class Result:
    """One experiment's outcome.

    ``data`` holds the numbers (what tests check); ``columns``/``rows`` are the report's table;
    ``note`` is one or two sentences saying what the numbers show.
    """

    key: str
    title: str
    note: str
    data: dict[str, Any]
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    figure: Figure = field(repr=False)


def new_figure(width: float = 6.4, height: float = 3.6) -> Figure:
    """A figure detached from pyplot (no global state, Agg canvas when saved)."""
    return Figure(figsize=(width, height), layout="constrained")
