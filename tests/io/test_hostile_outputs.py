"""Writing out safely: an ``-o`` that is a regular file is replaced atomically, a device, FIFO
or link is written in place (a link's target), never replaced; a failed write (a full disk, a
read-only folder, a missing parent) is one line and leaves the old file as it was; no ``-o``
lands in the runs folder; a full or closed standard output is one line or silence, never a
traceback. Devices are made with ``mknod`` inside the test's own folder only, and the small
file systems are tmpfs mounts of this test (root only; skipped otherwise, except under CI)."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from processes import COMMAND

from conftest import assert_one_line_error

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="mknod, FIFOs and tmpfs as on Linux"),
]

NULL, FULL = os.makedev(1, 3), os.makedev(1, 7)  # the numbers of Linux's null and full devices


def _device(folder: Path, name: str, number: int) -> Path:
    """A character device node made in ``folder`` (never the system's own /dev)."""
    path = folder / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, number)
    except PermissionError:
        _unavailable("mknod needs root")
    return path


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI runs the hostile-filesystem tests as root, but {why}")
    pytest.skip(why)


@contextlib.contextmanager
def _tmpfs(folder: Path, size: str = "1m", read_only: bool = False):
    folder.mkdir()
    options = f"size={size}" + (",ro" if read_only else "")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True
    )
    if made.returncode != 0:
        _unavailable(f"cannot mount a tmpfs: {made.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(folder: Path) -> None:
    """Fill a small file system to the last byte."""
    for name, block in (("filler", 4096), ("filler-tail", 1)):
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * block)
        os.close(fd)


def _export(rag_bench, clean, output, fmt="trec"):
    return rag_bench(
        "export", clean.run_id, "--runs-dir", clean.runs.root, "--format", fmt, "-o", output
    )


def _report(rag_bench, clean, output):
    return rag_bench(
        "report", clean.run_id, "--runs-dir", clean.runs.root, "--resamples", "20", "-o", output
    )


# --- what an -o names -----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["export", "report"])
def test_a_device_stays_a_device(tmp_path, clean, rag_bench, command):
    null = _device(tmp_path, "null", NULL)
    out = (_export if command == "export" else _report)(rag_bench, clean, null)
    assert out.exit_code == 0, out.stderr
    assert stat.S_ISCHR(null.lstat().st_mode)  # was replaced by a regular file


def test_a_link_stays_a_link_and_its_target_is_written(tmp_path, clean, rag_bench):
    target = tmp_path / "target.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    out = _export(rag_bench, clean, link)
    assert out.exit_code == 0, out.stderr
    assert link.is_symlink() and target.read_text().startswith("q")  # a TREC line per rank


def test_a_link_to_a_device_writes_the_device(tmp_path, clean, rag_bench):
    link = tmp_path / "out"
    link.symlink_to(_device(tmp_path, "null", NULL))
    out = _report(rag_bench, clean, link)
    assert out.exit_code == 0, out.stderr
    assert link.is_symlink() and stat.S_ISCHR((tmp_path / "null").lstat().st_mode)


def test_a_fifo_is_written_in_place_or_refused_when_nobody_reads(tmp_path, clean, rag_bench):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = ("export", clean.run_id, "--runs-dir", clean.runs.root, "-o", fifo)
    nobody = _cli(*args, stdout=subprocess.PIPE)  # in a child: bounded, should it wait
    assert nobody.returncode == 2 and nobody.stderr.startswith("error: cannot write the export")
    assert "no process reads that FIFO" in nobody.stderr
    got: list[bytes] = []
    done = threading.Event()
    read_end = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, from now on
    reader = threading.Thread(target=_drain, args=(read_end, got, done), daemon=True)
    reader.start()
    out = _export(rag_bench, clean, fifo)
    done.set()
    reader.join(10)
    os.close(read_end)
    assert out.exit_code == 0, out.stderr
    assert b"".join(got).startswith(b"q") and stat.S_ISFIFO(fifo.lstat().st_mode)


def _drain(fd: int, got: list[bytes], done: threading.Event) -> None:
    """Read a FIFO until its writer is gone (or, nothing written, until ``done``)."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:  # a writer, nothing written yet
            time.sleep(0.01)
            continue
        if chunk:
            got.append(chunk)
        elif got or done.is_set():
            return
        else:
            time.sleep(0.01)


def test_a_missing_parent_is_one_line(tmp_path, clean, rag_bench):
    out = _export(rag_bench, clean, tmp_path / "no" / "x")
    assert_one_line_error(out, "cannot write the export to", "No such file")


@pytest.mark.parametrize("fmt", ["trec", "jsonl", "parquet"])
def test_export_refuses_the_runs_folder(tmp_path, clean, rag_bench, fmt):
    runs = Path(clean.runs.root)
    manifest = runs / "_manifests" / f"{clean.run_id}.json"
    before = manifest.read_bytes()
    out = _export(rag_bench, clean, manifest, fmt)
    assert_one_line_error(out, "would be written into the runs folder")
    link = tmp_path / "sneaky"
    link.symlink_to(manifest)
    assert_one_line_error(_export(rag_bench, clean, link, fmt), "into the runs folder")
    assert manifest.read_bytes() == before


# --- failed writes keep the old file -----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["trec", "parquet"])
def test_a_full_disk_keeps_the_old_file(tmp_path, clean, rag_bench, fmt):
    with _tmpfs(tmp_path / "small", size="64k") as small:
        old = small / f"old.{fmt}"
        old.write_bytes(b"the export of yesterday\n")
        _fill(small)
        out = _export(rag_bench, clean, old, fmt)
        assert_one_line_error(out, "cannot write the export to", "No space left")
        assert old.read_bytes() == b"the export of yesterday\n"  # Parquet deleted it
        assert sorted(p.name for p in small.iterdir()) == ["filler", "filler-tail", old.name]


def test_a_read_only_folder_is_one_line(tmp_path, clean, rag_bench):
    with _tmpfs(tmp_path / "ro", read_only=True) as ro:
        out = _report(rag_bench, clean, ro / "report.html")
        assert_one_line_error(out, "cannot write the report to", "Read-only file system")


def test_sampling_a_tier_of_a_read_only_dataset_is_one_line(tmp_path, rag_bench):
    from conftest import SHIPPED

    with _tmpfs(tmp_path / "data", size="8m") as data:
        shutil.copytree(SHIPPED, data, dirs_exist_ok=True)
        subprocess.run(["mount", "-o", "remount,ro", str(data)], check=True)
        out = rag_bench("tiers", "--dataset", data, "--sample", "smoke", "--size", "5")
        assert_one_line_error(out, "queries.jsonl: cannot be rewritten: Read-only file system")


# --- standard output ---------------------------------------------------------------------------


def _cli(*args, stdout) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_BENCH_")}
    return subprocess.run(
        [*COMMAND, *map(str, args)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=120,
    )


def test_a_full_standard_output_is_one_line(tmp_path):
    with open(_device(tmp_path, "full", FULL), "w") as full:
        done = _cli("variants", "--format", "csv", stdout=full)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: cannot write to standard output: No space left on device "
        "(fix: write to a file with room, or pipe elsewhere)"
    ]


def test_a_closed_pipe_ends_silently(tmp_path):
    read, write = os.pipe()
    os.close(read)
    with open(write, "w") as closed:
        done = _cli("metrics", "--format", "csv", stdout=closed)
    assert done.returncode == 1 and done.stderr == ""


def test_a_closed_standard_output_is_no_traceback():
    closed = subprocess.run(
        ["sh", "-c", '"$@" >&-', "sh", *COMMAND, "components"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in closed.stderr and closed.returncode in (0, 1), closed.stderr
