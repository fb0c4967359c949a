"""Run every experiment and write the figures (PNG) and one HTML report."""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from pathlib import Path

from banister.lab import experiments as ex
from banister.lab import real
from banister.lab.model import default_model_validity
from banister.lab.result import Result

_STYLE = (
    "body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
    "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;"
    "text-align:left;font-family:monospace}img{max-width:100%}"
)
_INTRO = "Every number below comes from running the code; rerun with <code>banister lab</code>."


def experiment_plan(quick: bool = False, model: bool = True) -> list[Callable[[], Result]]:
    """The experiments in report order; ``quick`` shrinks the sample sizes (seconds in all, plus the
    model's load), ``model=False`` leaves out the one on the real default model."""
    n = 20 if quick else 200
    plan: list[Callable[[], Result]] = [
        ex.validity_vs_length,
        ex.masked_step,
        lambda: ex.validity(n),
        ex.mask_table,
        lambda: ex.distortion(2 * n),
        lambda: ex.forced_choice_experiment(n // 2),
        real.tokenizations,
        lambda: real.mask_cost(naive_steps=1 if quick else None, repeats=5 if quick else 50),
        lambda: ex.retries(n // 2),
        lambda: ex.json_mode_vs_schema(max(10, n // 4)),
    ]
    if model:
        plan.append(lambda: default_model_validity(samples=1 if quick else 3, max_tokens=96 if quick else 128))
    return plan


def run_lab(out: Path | str, *, quick: bool = False, model: bool = True) -> Path:
    """Run the experiments, save ``<key>.png`` for each and ``report.html`` in ``out``; return the report's path.

    ``model=False`` skips the experiment on the real default model (no model load).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results, seconds = [], []
    for experiment in experiment_plan(quick, model):
        start = time.perf_counter()
        result = experiment()
        seconds.append(time.perf_counter() - start)
        result.figure.savefig(out / f"{result.key}.png", dpi=110)
        results.append(result)
    report = out / "report.html"
    report.write_text(render_html(results, seconds, quick), encoding="utf-8")
    return report


def render_html(results: list[Result], seconds: list[float], quick: bool) -> str:
    """The report: one section per experiment, its note, its table and its figure."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>banister lab</title>',
        f"<style>{_STYLE}</style></head><body>",
        "<h1>banister lab</h1>",
        f"<p>Structured output, measured{' (quick run: small samples)' if quick else ''}. {_INTRO}</p>",
        "<ol>" + "".join(f'<li><a href="#{esc(r.key)}">{esc(r.title)}</a></li>' for r in results) + "</ol>",
    ]
    for result, secs in zip(results, seconds, strict=True):
        head = "".join(f"<th>{esc(str(c))}</th>" for c in result.columns)
        body = "".join("<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in row) + "</tr>" for row in result.rows)
        parts += [
            f'<section id="{esc(result.key)}"><h2>{esc(result.title)}</h2>',
            f"<p>{esc(result.note)}</p>",
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>",
            f'<img src="{esc(result.key)}.png" alt="{esc(result.title)}">',
            f"<p><small>{secs:.2f} s</small></p></section>",
        ]
    parts.append("</body></html>")
    return "\n".join(parts)
