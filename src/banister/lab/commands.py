"""The ``banister lab`` command."""

from __future__ import annotations

import argparse
from typing import Any


def add_commands(subparsers: Any) -> None:
    """Register ``lab`` on an argparse subparsers object (``banister lab [--out DIR] [--quick] [--no-model]``)."""
    lab = subparsers.add_parser("lab", help="rerun the structured-output experiments and write an HTML report")
    lab.add_argument("--out", default="banister-lab", help="output folder (default ./banister-lab)")
    lab.add_argument("--quick", action="store_true", help="small samples: seconds instead of minutes")
    lab.add_argument("--no-model", action="store_true",
                     help="skip the experiment on the real default model (SmolLM2-135M-Instruct)")
    lab.set_defaults(run=_cmd_lab)


def _cmd_lab(args: argparse.Namespace) -> int:
    from banister.lab.report import run_lab

    report = run_lab(args.out, quick=args.quick, model=not args.no_model)
    print(f"report: {report.resolve()}")
    return 0
