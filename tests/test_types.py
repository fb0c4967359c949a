"""The package type-checks: mypy, the version setup.py compiles with, finds no error in src/banister."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_error_in_the_package(tmp_path):
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path), "src/banister"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
