"""The `banister` command line, run as a user runs it (a subprocess of the installed entry point)."""

import json
import signal
import subprocess
import sys
import time

import pytest
from shared_data import MASKBENCH_DEV

from banister.bench.maskbench import COUNTS


def banister(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "banister.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("pattern", "text", "status", "code", "dies_at"),
    [
        (r"[0-9]{3}-[0-9]{4}", "555-1234", "complete", 0, None),
        (r"[0-9]{3}-[0-9]{4}", "555-12", "open", 1, None),
        (r"[0-9]{3}-[0-9]{4}", "55x-1234", "dead", 1, 2),
        (r"(café|naïve)!", "naïx", "dead", 1, 3),
    ],
)
def test_check_reports_status_and_where_it_dies(pattern, text, status, code, dies_at):
    run = banister("check", pattern, text, "--json")
    assert run.returncode == code, run.stderr
    out = json.loads(run.stdout)
    assert out["status"] == status
    assert out.get("dies_at") == dies_at


def test_check_bad_pattern_is_a_clear_error():
    run = banister("check", "(a", "a")
    assert run.returncode == 2
    assert "position" in run.stderr and "Traceback" not in run.stderr


def test_compile_on_a_real_vocabulary():
    run = banister("compile", "--vocab", "gpt2", "--json", "(yes|no)")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["vocab_size"] == 50257 and out["states"] >= 4
    # Tokens allowed at the start are exactly the non-empty prefixes of the two answers that GPT-2 has.
    assert set(out["sample_allowed"]) <= {"y", "ye", "yes", "n", "no"} and "yes" in out["sample_allowed"]
    run = banister("compile", "--vocab", "gpt2", "--json", "--choice", "red", "green")
    assert run.returncode == 0 and json.loads(run.stdout)["tokens_allowed_at_start"] >= 2


def test_help_lists_the_commands():
    run = banister("--help")
    assert run.returncode == 0 and "check" in run.stdout and "compile" in run.stdout


def test_version_says_what_runs_compiled():
    from banister import _build

    run = banister("--version")
    assert run.returncode == 0 and run.stdout.startswith("banister ")
    assert " ".join(run.stdout.split()).endswith(f"({_build.describe()})")


def test_maskbench_goes_on_from_its_checkpoint_and_refuses_another_runs(tmp_path):
    """`bench maskbench --checkpoint FILE` run twice times the records once (the second run replays
    them); the same file given to a run with other settings is refused with a clear error."""
    if not MASKBENCH_DEV.exists():
        pytest.skip("MaskBench data not present")
    checkpoint, out = tmp_path / "run.jsonl", tmp_path / "out.json"
    args = ["bench", "maskbench", "--data", str(MASKBENCH_DEV), "--tokenizer", "gpt2", "--engines", "banister",
            "--sample", "3", "--seed", "5", "--no-extras", "--by-split", "--checkpoint", str(checkpoint)]
    for _sitting in range(2):
        done = banister(*args, "--json", str(out))
        assert done.returncode == 0, done.stderr[-2000:]
        assert len(checkpoint.read_text().splitlines()) == 1 + 3  # the header and each record once
    report = json.loads(out.read_text())
    assert report["complete"] and report["sittings"] == 1 and report["records"] == 3
    assert sum(split["engines"][0]["schemas"] for split in report["by_split"].values()) == 3
    refused = banister(*args, "--gc-threshold", "700")
    assert refused.returncode == 2 and "belongs to another run (it differs in gc_threshold)" in refused.stderr
    # A checkpoint that other sources of banister (or another peer release) began is refused too.
    from banister import __version__, _build

    assert report["versions"] == {"banister": f"{__version__} (sources {_build.source_digest()})"}
    lines = checkpoint.read_text().splitlines()
    header = json.loads(lines[0])
    header["versions"]["banister"] = f"{__version__} (sources 0123456789abcdef)"
    checkpoint.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    refused = banister(*args)
    assert refused.returncode == 2 and "belongs to another run (it differs in versions)" in refused.stderr


def test_maskbench_report_prints_what_a_checkpoint_holds_and_times_nothing(tmp_path):
    """`--report` prints the table of a finished run's checkpoint, counts as the run counted them; with no
    checkpoint, or none at the path given, it says so."""
    if not MASKBENCH_DEV.exists():
        pytest.skip("MaskBench data not present")
    checkpoint, timed, reported = tmp_path / "run.jsonl", tmp_path / "timed.json", tmp_path / "reported.json"
    args = ["bench", "maskbench", "--data", str(MASKBENCH_DEV), "--tokenizer", "gpt2", "--engines", "banister",
            "--sample", "3", "--seed", "2", "--no-extras", "--by-split"]
    done = banister(*args, "--checkpoint", str(checkpoint), "--json", str(timed))
    assert done.returncode == 0, done.stderr[-2000:]
    looked = banister(*args, "--checkpoint", str(checkpoint), "--report", "--json", str(reported))
    assert looked.returncode == 0, looked.stderr[-2000:]
    assert "the checkpoint holds 3 of 3 records" in looked.stdout and "timed [" not in looked.stderr
    first, again = json.loads(timed.read_text()), json.loads(reported.read_text())
    assert again["complete"] and again["by_split"].keys() == first["by_split"].keys()
    (engine,), (kept,) = first["engines"], again["engines"]
    assert {k: kept[k] for k in COUNTS} == {k: engine[k] for k in COUNTS}
    for measure in ("mask_us", "ttfm_us"):  # the checkpoint keeps times to the nanosecond
        assert kept[measure] == pytest.approx(engine[measure], abs=1e-3)
    refused = banister(*args, "--report")
    assert refused.returncode == 2 and "give --checkpoint FILE" in refused.stderr
    refused = banister(*args, "--report", "--checkpoint", str(tmp_path / "none.jsonl"))
    assert refused.returncode == 2 and "no checkpoint at" in refused.stderr


def test_maskbench_in_workers_times_each_record_once_and_merges_them(tmp_path):
    """`--jobs 2` splits the records between two workers, each with its own checkpoint; the merged table
    counts what one process counts over the same records, and the same command again times nothing."""
    if not MASKBENCH_DEV.exists():
        pytest.skip("MaskBench data not present")
    args = ["bench", "maskbench", "--data", str(MASKBENCH_DEV), "--tokenizer", "gpt2", "--engines", "banister",
            "--sample", "5", "--seed", "3", "--no-extras", "--by-split"]
    alone, out = tmp_path / "alone.json", tmp_path / "jobs.json"
    done = banister(*args, "--json", str(alone))
    assert done.returncode == 0, done.stderr[-2000:]
    checkpoint = tmp_path / "run.jsonl"
    for _sitting in range(2):
        done = banister(*args, "--jobs", "2", "--checkpoint", str(checkpoint), "--json", str(out))
        assert done.returncode == 0, done.stderr[-2000:]
        held = [len((tmp_path / f"run.jsonl.{k}-of-2").read_text().splitlines()) - 1 for k in (1, 2)]
        assert held == [3, 2]  # every other record of the five, each once
    report, single = json.loads(out.read_text()), json.loads(alone.read_text())
    assert report["complete"] and report["jobs"] == 2 and report["records"] == 5
    assert {k: report["engines"][0][k] for k in COUNTS} == {k: single["engines"][0][k] for k in COUNTS}
    assert report["by_split"].keys() == single["by_split"].keys()
    assert "timed by 2 single-threaded worker processes" in done.stdout


def _stopped_maskbench(files: list, lines: int, stop: int, *args: str, ignoring_sigint: bool = False
                       ) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `bench maskbench` over 2,000 GPT-2 records, banister alone, with
    ``args``, sent ``stop`` once its checkpoint ``files`` hold ``lines`` lines in all (started with SIGINT
    ignored, as ``&`` in a script starts it, if ``ignoring_sigint``)."""
    run = subprocess.Popen([sys.executable, "-m", "banister.cli", "bench", "maskbench", "--data", str(MASKBENCH_DEV),
                            "--tokenizer", "gpt2", "--engines", "banister", "--sample", "2000", "--no-extras", *args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignoring_sigint else None)
    try:
        deadline = time.monotonic() + 240
        while sum(len(f.read_text().splitlines()) for f in files if f.exists()) < lines and time.monotonic() < deadline:
            time.sleep(0.5)
        run.send_signal(stop)
        stdout, stderr = run.communicate(timeout=240)
    finally:
        run.kill()  # (a run that did not stop would time its 2,000 records)
    return run.returncode, stdout, stderr


def test_maskbench_in_workers_stops_on_a_kill_and_prints_what_they_hold(tmp_path):
    """SIGTERM to a `--jobs 2` run stops its workers (each keeps what it timed) and prints the table of
    the records their checkpoints hold."""
    if not MASKBENCH_DEV.exists():
        pytest.skip("MaskBench data not present")
    checkpoint, out = tmp_path / "run.jsonl", tmp_path / "out.json"
    files = [tmp_path / f"run.jsonl.{k}-of-2" for k in (1, 2)]
    returncode, stdout, stderr = _stopped_maskbench(files, 2 + 4, signal.SIGTERM, "--jobs", "2", "--checkpoint",
                                                    str(checkpoint), "--json", str(out))
    assert returncode == 0, stderr[-2000:]
    held = sum(len(f.read_text().splitlines()) - 1 for f in files)
    report = json.loads(out.read_text())
    assert not report["complete"] and 4 <= report["engines"][0]["schemas"] == held < 2000
    assert f"stopped after {held} of 2000 records" in stdout

    # --report reads the files as a run still writing them leaves them (a line half written), and
    # changes nothing in them.
    with files[0].open("a") as fh:
        fh.write('{"id": "half a')
    before = [f.read_bytes() for f in files]
    looked = banister("bench", "maskbench", "--data", str(MASKBENCH_DEV), "--tokenizer", "gpt2", "--engines",
                      "banister", "--sample", "2000", "--no-extras", "--jobs", "2", "--checkpoint", str(checkpoint),
                      "--report", "--json", str(out))
    assert looked.returncode == 0, looked.stderr[-2000:]
    assert f"the checkpoint holds {held} of 2000 records" in looked.stdout
    assert json.loads(out.read_text())["engines"][0]["schemas"] == held
    assert [f.read_bytes() for f in files] == before


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_maskbench_with_a_checkpoint_stops_cleanly_when_started_in_the_background(tmp_path, stop):
    """A one-process run started in the background (``&`` in a script: SIGINT ignored) still stops
    cleanly on SIGINT, and on a kill (SIGTERM): it keeps what it timed and prints those records' table."""
    if not MASKBENCH_DEV.exists():
        pytest.skip("MaskBench data not present")
    checkpoint, out = tmp_path / "run.jsonl", tmp_path / "out.json"
    returncode, stdout, stderr = _stopped_maskbench([checkpoint], 1 + 3, stop, "--checkpoint", str(checkpoint),
                                                    "--json", str(out), ignoring_sigint=True)
    assert returncode == 0, stderr[-2000:]
    held = len(checkpoint.read_text().splitlines()) - 1
    report = json.loads(out.read_text())
    assert not report["complete"] and 3 <= report["engines"][0]["schemas"] == held < 2000
    assert f"stopped after {held} of 2000 records" in stdout


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--jobs", "0", "must be a whole number of at least 1"), ("--jobs", "two", "must be a whole number of at least 1"),
    ("--shard", "3/2", "expected K/N with 1 <= K <= N"), ("--shard", "1", "expected K/N with 1 <= K <= N")])
def test_maskbench_refuses_bad_worker_counts(option, value, message):
    refused = banister("bench", "maskbench", "--data", "unused.jsonl", option, value)
    assert refused.returncode == 2 and f"argument {option}: {message}" in refused.stderr
