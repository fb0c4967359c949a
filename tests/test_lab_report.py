"""`banister lab --quick`: the report is written, and every figure it references is a PNG that exists."""

import argparse
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from banister.lab.commands import add_commands

PNG = b"\x89PNG\r\n\x1a\n"


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []
        self.sections: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.sources.append(attrs["src"])
        if tag == "section":
            self.sections.append(attrs["id"])


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="command"))
    out = tmp_path_factory.mktemp("lab")
    args = parser.parse_args(["lab", "--out", str(out), "--quick"])
    assert args.run(args) == 0
    return out / "report.html"


def test_every_referenced_figure_is_a_png(report):
    images = _Images()
    images.feed(report.read_text(encoding="utf-8"))
    assert len(images.sources) == len(images.sections) >= 10
    for src in images.sources:
        path = report.parent / src
        assert path.is_file() and path.read_bytes()[:8] == PNG
    assert {p.name for p in report.parent.glob("*.png")} == set(images.sources)


def test_report_renders_headless(report, tmp_path):
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no chromium")
    shot = tmp_path / "shot.png"
    subprocess.run(
        [browser, "--headless", "--no-sandbox", f"--screenshot={shot}", report.as_uri()],
        capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    assert shot.read_bytes()[:8] == PNG
