"""Where the project's shared test data lives: ``shared/data`` beside the repository (as CI lays it out),
or ``$BANISTER_SHARED_DATA``."""

import os
from pathlib import Path

SHARED_DATA = Path(os.environ.get("BANISTER_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
MASKBENCH_DEV = SHARED_DATA / "maskbench" / "dev.jsonl.gz"
JSON_SCHEMA_TEST_SUITE = SHARED_DATA / "json-schema-test-suite" / "tests"
GRAMMARS = SHARED_DATA / "grammars"
