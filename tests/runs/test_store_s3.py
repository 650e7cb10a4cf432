"""A runs folder on an object store: `--runs-dir s3://bucket/prefix` against a local
S3-compatible server (moto's, started here), end to end, and its failures as one line."""

from __future__ import annotations

import json
import logging
import socket

import pytest
from runs_helpers import committed_ids

from conftest import assert_one_line_error, require

# a moto S3 server per module and runs written over HTTP: seconds each
pytestmark = pytest.mark.slow

SECRET = "s3cr3t-never-stored-0123456789"


@pytest.fixture(scope="module")
def endpoint():
    server_module = require("moto.server")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3(endpoint, monkeypatch):
    """The environment of an S3 user (credentials, endpoint, region) and a fresh bucket."""
    from pyarrow import fs

    for name in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "rag-bench-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    bucket = f"runs-{len(s3_buckets)}"
    s3_buckets.append(bucket)
    host = endpoint.removeprefix("http://")
    store = fs.S3FileSystem(endpoint_override=host, scheme="http", allow_bucket_creation=True)
    store.create_dir(bucket)
    return bucket, fs.S3FileSystem(endpoint_override=host, scheme="http")


s3_buckets: list[str] = []


def _objects(filesystem, bucket: str) -> dict[str, bytes]:
    from pyarrow.fs import FileSelector, FileType

    infos = filesystem.get_file_info(FileSelector(bucket, recursive=True))
    out = {}
    for info in infos:
        if info.type == FileType.File:
            with filesystem.open_input_stream(info.path) as stream:
                out[info.path.removeprefix(f"{bucket}/")] = stream.read()
    return out


def _stored_id(out) -> str:
    assert out.exit_code == 0, out.stderr
    return out.stderr.split("stored run ")[1].split()[0]


def test_run_runs_show_compare_sql_rm_over_s3(s3, rag_bench):
    bucket, filesystem = s3
    url = f"s3://{bucket}/team/runs"
    smoke = ["--tag", "smoke", "--runs-dir", url, "--format", "csv"]
    baseline = _stored_id(rag_bench("run", "--variant", "baseline", *smoke))
    hybrid = _stored_id(rag_bench("run", "--variant", "hybrid", *smoke))

    objects = _objects(filesystem, bucket)
    for run_id, variant in ((baseline, "baseline"), (hybrid, "hybrid")):
        assert f"team/runs/_manifests/{run_id}.json" in objects
        for table in ("queries", "metrics", "retrieved", "claims"):
            assert f"team/runs/{table}/variant={variant}/run_id={run_id}/part-0.parquet" in objects
    assert not [k for k in objects if "/." in k or k.startswith(".")]  # no bookkeeping remotely
    assert not [k for k, data in objects.items() if SECRET.encode() in data]

    listed = rag_bench("runs", "--runs-dir", url, "--format", "json")
    assert listed.exit_code == 0 and listed.stderr == ""
    rows = json.loads(listed.stdout)
    assert [r["run_id"] for r in rows] == sorted([baseline, hybrid])
    assert all(r["ndcg@10"] > 0 for r in rows)

    shown = rag_bench("show", "latest:baseline+", "--runs-dir", url, "--format", "json")
    assert json.loads(shown.stdout)["manifest"]["run_id"] == baseline

    compared = rag_bench(
        "compare",
        baseline,
        hybrid[:-2],
        "--runs-dir",
        url,
        "--format",
        "json",
        "--resamples",
        "200",
    )
    assert compared.exit_code == 0, compared.stderr
    assert {r["run_b"] for r in json.loads(compared.stdout)} == {hybrid}

    sql = rag_bench(
        "sql",
        "SELECT variant, count(*) AS n FROM queries GROUP BY ALL ORDER BY variant",
        "--runs-dir",
        url,
        "--format",
        "csv",
    )
    assert sql.stdout.split() == ["variant,n", "baseline,30", "hybrid,30"]
    assert_one_line_error(
        rag_bench("sql", "SELECT * FROM read_csv('/etc/passwd')", "--runs-dir", url),
        "--allow-files",
    )

    removed = rag_bench("rm", baseline, "--yes", "--runs-dir", url)
    assert removed.exit_code == 0, removed.stderr
    left = _objects(filesystem, bucket)
    assert not [k for k in left if baseline in k]
    assert [
        r["run_id"]
        for r in json.loads(rag_bench("runs", "--runs-dir", url, "--format", "json").stdout)
    ] == [hybrid]


def test_an_interrupted_s3_run_resumes_from_its_local_checkpoint(s3, rag_bench, monkeypatch):
    from rag_bench.runs.folder import RunsFolder

    bucket, filesystem = s3
    url = f"s3://{bucket}/runs"
    real = RunsFolder.put

    def refused(self, data, *parts):  # as a bucket policy that forbids writes answers
        with self.errors("cannot write"):
            raise OSError("AWS Error ACCESS_DENIED during PutObject operation: Access Denied")

    monkeypatch.setattr(RunsFolder, "put", refused)
    failed = rag_bench("run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", url)
    assert_one_line_error(failed, f"the runs folder {url}: access denied", "AWS_ACCESS_KEY_ID")
    assert "then resume with `rag-bench run --resume" in failed.stderr
    assert f"--runs-dir {url}`" in failed.stderr
    assert _objects(filesystem, bucket) == {}  # the uploaded tables were taken back
    run_id = failed.stderr.split("--resume ")[1].split()[0]
    monkeypatch.setattr(RunsFolder, "put", real)
    resumed = rag_bench("run", "--resume", run_id, "--runs-dir", url)
    assert _stored_id(resumed) == run_id
    assert committed_ids(url) == [run_id]


def test_a_missing_bucket_is_one_line(s3, rag_bench):
    out = rag_bench("run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", "s3://nope/x")
    assert_one_line_error(out, "the bucket 'nope'", "does not exist", "aws s3 mb s3://nope")
    listed = rag_bench("runs", "--runs-dir", "s3://nope/x")
    assert_one_line_error(listed, "the bucket 'nope'", "does not exist")


def test_an_unreachable_endpoint_is_one_line(s3, rag_bench, monkeypatch):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    out = rag_bench("runs", "--runs-dir", "s3://any/runs")
    assert_one_line_error(out, "unreachable", "AWS_ENDPOINT_URL")
