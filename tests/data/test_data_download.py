"""Download against a local HTTP server on 127.0.0.1, the mirror, the vendored copy, and integrity checks."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from dpaudit.data import download as download_module
from dpaudit.data.download import (
    MIRROR_ENV,
    DownloadError,
    IntegrityError,
    download_dataset,
    file_facts,
    git_blob_id,
    resolve_mirror,
)
from dpaudit.data.registry import DATASETS, MANIFEST_NAME, FileSpec, raw_files
from dpaudit.io import DiskFullError

PAYLOAD = bytes(range(256)) * 400  # 102,400 bytes: several reads, not one
PAYLOAD_SHA256 = hashlib.sha256(PAYLOAD).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, bytes, int]]] = {}
    hits: ClassVar[dict[str, int]] = {}

    def do_GET(self):  # noqa: N802 (the name http.server dispatches to)
        self.hits[self.path] = self.hits.get(self.path, 0) + 1
        status, body, declared = self.routes.get(self.path, (404, b"not found", 9))
        self.send_response(status)
        self.send_header("Content-Length", str(declared))
        self.end_headers()
        self.wfile.write(body)  # fewer bytes than declared = a truncated body
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    handler = type("Handler", (_Handler,), {"routes": {}, "hits": {}})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield base, handler
    httpd.shutdown()
    httpd.server_close()


def _left_over(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir()) if parent.exists() else []


def test_download_success_writes_files_and_manifest(server, tmp_path):
    base, handler = server
    handler.routes["/toy.bin"] = (200, PAYLOAD, len(PAYLOAD))
    spec = FileSpec("toy.bin", urls=(base + "/toy.bin",), sha256=PAYLOAD_SHA256, size=len(PAYLOAD))
    dest = tmp_path / "raw" / "toy"
    paths = download_dataset("toy", dest, files=[spec], retries=0, backoff=0)
    assert paths == [dest / "toy.bin"] and (dest / "toy.bin").read_bytes() == PAYLOAD
    manifest = json.loads((dest / MANIFEST_NAME).read_text())
    assert manifest["files"] == {"toy.bin": {"size": 102_400, "sha256": PAYLOAD_SHA256}}
    assert _left_over(tmp_path / "raw") == ["toy"]  # no temporary directory left beside it


def test_digest_mismatch_names_file_and_digests_and_leaves_nothing(server, tmp_path):
    base, handler = server
    handler.routes["/toy.bin"] = (200, PAYLOAD, len(PAYLOAD))
    wrong = hashlib.sha256(b"something else").hexdigest()
    spec = FileSpec("toy.bin", urls=(base + "/toy.bin",), sha256=wrong)
    dest = tmp_path / "raw" / "toy"
    with pytest.raises(IntegrityError) as info:
        download_dataset("toy", dest, files=[spec], retries=2, backoff=0)
    message = str(info.value)
    assert "toy.bin" in message and wrong in message and PAYLOAD_SHA256 in message and "sha256" in message
    assert handler.hits["/toy.bin"] == 1  # a mismatch is not retried
    assert not dest.exists() and _left_over(tmp_path / "raw") == []


def test_truncated_body_is_retried_then_fails_with_no_output(server, tmp_path):
    base, handler = server
    handler.routes["/toy.bin"] = (200, PAYLOAD[:50_000], len(PAYLOAD))
    spec = FileSpec("toy.bin", urls=(base + "/toy.bin",), sha256=PAYLOAD_SHA256)
    dest = tmp_path / "raw" / "toy"
    with pytest.raises(DownloadError, match=r"toy\.bin.*truncated download: received 50000 of 102400 bytes"):
        download_dataset("toy", dest, files=[spec], retries=1, backoff=0)
    assert handler.hits["/toy.bin"] == 2
    assert not dest.exists() and _left_over(tmp_path / "raw") == []


def test_404_fails_without_retry_and_falls_back_to_the_next_url(server, tmp_path):
    base, handler = server
    spec = FileSpec("toy.bin", urls=(base + "/missing.bin",), sha256=PAYLOAD_SHA256)
    dest = tmp_path / "raw" / "toy"
    with pytest.raises(DownloadError, match=r"toy\.bin: every source failed: .*/missing\.bin: HTTP 404"):
        download_dataset("toy", dest, files=[spec], retries=3, backoff=0)
    assert handler.hits["/missing.bin"] == 1
    assert not dest.exists()
    handler.routes["/toy.bin"] = (200, PAYLOAD, len(PAYLOAD))
    spec = FileSpec("toy.bin", urls=(base + "/missing.bin", base + "/toy.bin"), sha256=PAYLOAD_SHA256)
    download_dataset("toy", dest, files=[spec], retries=0, backoff=0)
    assert (dest / "toy.bin").read_bytes() == PAYLOAD


def test_a_failing_second_file_discards_the_first_and_keeps_the_previous_output(server, tmp_path):
    base, handler = server
    handler.routes["/a.bin"] = (200, PAYLOAD, len(PAYLOAD))
    good = FileSpec("a.bin", urls=(base + "/a.bin",), sha256=PAYLOAD_SHA256)
    bad = FileSpec("b.bin", urls=(base + "/b.bin",), sha256=PAYLOAD_SHA256)
    dest = tmp_path / "raw" / "toy"
    dest.mkdir(parents=True)
    (dest / "old.txt").write_text("previous run")
    with pytest.raises(DownloadError, match="b.bin"):
        download_dataset("toy", dest, files=[good, bad], retries=0, backoff=0)
    assert _left_over(dest) == ["old.txt"] and _left_over(tmp_path / "raw") == ["toy"]


def test_git_blob_id_matches_git_hash_object(tmp_path):
    path = tmp_path / "hello.txt"
    path.write_bytes(b"hello\n")
    # `echo hello | git hash-object --stdin`
    assert git_blob_id(path) == "ce013625030ba8dba906f756967f9e9ca394464a"
    path.write_bytes(PAYLOAD)
    expected = hashlib.sha1(b"blob 102400\0" + PAYLOAD).hexdigest()
    assert git_blob_id(path) == expected
    if shutil.which("git"):
        git = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True, check=True)
        assert git.stdout.strip() == expected


def test_verification_by_git_blob_id(server, tmp_path):
    base, handler = server
    handler.routes["/dataset_purchase.tgz"] = (200, PAYLOAD, len(PAYLOAD))
    blob = hashlib.sha1(b"blob %d\0" % len(PAYLOAD) + PAYLOAD).hexdigest()
    spec = FileSpec("dataset_purchase.tgz", urls=(base + "/dataset_purchase.tgz",), git_blob=blob)
    download_dataset("purchase100", tmp_path / "ok", files=[spec], retries=0, backoff=0)
    assert (tmp_path / "ok" / "dataset_purchase.tgz").read_bytes() == PAYLOAD
    handler.routes["/dataset_purchase.tgz"] = (200, PAYLOAD[::-1], len(PAYLOAD))
    with pytest.raises(IntegrityError, match=f"git_blob mismatch .*expected {blob}, actual [0-9a-f]{{40}}"):
        download_dataset("purchase100", tmp_path / "bad", files=[spec], retries=0, backoff=0)
    assert not (tmp_path / "bad").exists()


def test_mirror_env_beats_config_and_a_corrupt_mirror_file_fails(tmp_path, monkeypatch):
    env_mirror, config_mirror = tmp_path / "env", tmp_path / "config"
    (env_mirror / "toy").mkdir(parents=True)
    (env_mirror / "toy" / "toy.bin").write_bytes(PAYLOAD)
    config_mirror.mkdir()
    spec = FileSpec("toy.bin", urls=("http://127.0.0.1:9/never-used",), sha256=PAYLOAD_SHA256)
    monkeypatch.setenv(MIRROR_ENV, str(env_mirror))
    assert resolve_mirror(str(config_mirror)) == env_mirror
    download_dataset("toy", tmp_path / "out", str(config_mirror), files=[spec])
    assert (tmp_path / "out" / "toy.bin").read_bytes() == PAYLOAD
    # Flat layout <mirror>/<file> works too; a corrupted copy stops with file, expected and actual digest.
    monkeypatch.delenv(MIRROR_ENV)
    corrupt = bytearray(PAYLOAD)
    corrupt[1000] ^= 1
    (config_mirror / "toy.bin").write_bytes(bytes(corrupt))
    actual = hashlib.sha256(bytes(corrupt)).hexdigest()
    pattern = f"toy.bin: sha256 mismatch .*expected {PAYLOAD_SHA256}, actual {actual}"
    with pytest.raises(IntegrityError, match=pattern):
        download_dataset("toy", tmp_path / "out2", config_mirror, files=[spec])
    assert not (tmp_path / "out2").exists()
    # A file the mirror lacks is an error, not a network download.
    with pytest.raises(DownloadError, match=r"other\.bin: not in the mirror"):
        missing = FileSpec("other.bin", sha256="0" * 64)
        download_dataset("toy", tmp_path / "out3", config_mirror, files=[missing])
    assert not (tmp_path / "out3").exists()


def test_mnist_test_pool_from_the_real_mirror(mirror, tmp_path, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    download_dataset("mnist", tmp_path / "mnist", mirror, pool="test")
    assert _left_over(tmp_path / "mnist") == sorted(raw_files("mnist", "test"))
    with pytest.raises(DownloadError, match="train-images-idx3-ubyte.gz: not in the mirror"):
        download_dataset("mnist", tmp_path / "mnist-train", mirror, pool="train")
    assert not (tmp_path / "mnist-train").exists()


def test_adult_from_the_vendored_copy_without_network(tmp_path, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    paths = download_dataset("adult", tmp_path / "adult", None)
    assert [p.name for p in paths] == ["adult.data.gz", "adult.test.gz", "adult.names.gz"]
    for path, spec in zip(paths, DATASETS["adult"].files, strict=True):
        assert file_facts(path, ("sha256",))["sha256"] == spec.sha256
    download_dataset("digits", tmp_path / "digits")
    assert _left_over(tmp_path / "digits") == [MANIFEST_NAME]


def test_registry_facts():
    for spec in DATASETS.values():
        for file in spec.files:
            assert file.urls or spec.vendor, file.name
    assert DATASETS["cifar10"].files[0].size == 170_498_071
    assert DATASETS["purchase100"].files[0].git_blob == "3efa7476ad5ed7ac3e558d28585a186b38fc5f19"
    assert raw_files("mnist") == ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", MANIFEST_NAME]
    assert len(raw_files("mnist", "all")) == 5
    with pytest.raises(ValueError, match="pool 'val'"):
        raw_files("mnist", "val")
    with pytest.raises(KeyError, match="unknown dataset 'imagenet'"):
        raw_files("imagenet")


def test_server_errors_are_retried_before_the_next_url(server, tmp_path):
    base, handler = server
    handler.routes["/busy.bin"] = (503, b"busy", 4)
    handler.routes["/toy.bin"] = (200, PAYLOAD, len(PAYLOAD))
    spec = FileSpec("toy.bin", urls=(base + "/busy.bin", base + "/toy.bin"), sha256=PAYLOAD_SHA256)
    download_dataset("toy", tmp_path / "toy", files=[spec], retries=2, backoff=0)
    assert handler.hits == {"/busy.bin": 3, "/toy.bin": 1}
    assert (tmp_path / "toy" / "toy.bin").read_bytes() == PAYLOAD


def test_http_mirror_serves_both_layouts_and_replaces_the_network(server, tmp_path, monkeypatch):
    base, handler = server
    handler.routes["/m/toy/toy.bin"] = (200, PAYLOAD, len(PAYLOAD))  # <mirror>/<dataset>/<file>
    handler.routes["/m/flat.bin"] = (200, PAYLOAD, len(PAYLOAD))  # <mirror>/<file>
    never = "http://127.0.0.1:9/never-used"
    toy = FileSpec("toy.bin", urls=(never,), sha256=PAYLOAD_SHA256)
    flat = FileSpec("flat.bin", urls=(never,), sha256=PAYLOAD_SHA256)
    monkeypatch.setenv(MIRROR_ENV, base + "/m/")  # a trailing slash is not doubled
    assert resolve_mirror(None) == base + "/m"
    download_dataset("toy", tmp_path / "out", files=[toy, flat], timeout=5, retries=0, backoff=0)
    out = tmp_path / "out"
    assert (out / "toy.bin").read_bytes() == PAYLOAD == (out / "flat.bin").read_bytes()
    assert handler.hits == {"/m/toy/toy.bin": 1, "/m/toy/flat.bin": 1, "/m/flat.bin": 1}
    # A file the mirror lacks is an error naming both URLs tried, not a download from the file's own URL.
    missing = FileSpec("other.bin", urls=(never,), sha256=PAYLOAD_SHA256)
    with pytest.raises(DownloadError) as info:
        download_dataset("toy", tmp_path / "out2", files=[missing], timeout=5, retries=0, backoff=0)
    message = str(info.value)
    assert f"not in the mirror {base}/m " in message
    assert f"{base}/m/toy/other.bin: HTTP 404" in message and f"{base}/m/other.bin: HTTP 404" in message
    assert not (tmp_path / "out2").exists()


def test_http_mirror_set_in_params_with_a_corrupt_copy_fails_naming_the_url(server, tmp_path, monkeypatch):
    base, handler = server
    corrupt = bytearray(PAYLOAD)
    corrupt[7] ^= 1
    handler.routes["/toy.bin"] = (200, bytes(corrupt), len(corrupt))
    spec = FileSpec("toy.bin", sha256=PAYLOAD_SHA256)
    with pytest.raises(IntegrityError, match=rf"toy\.bin: sha256 mismatch \(from {base}/toy\.bin\)"):
        download_dataset("toy", tmp_path / "out", base, files=[spec], timeout=5, retries=2, backoff=0)
    assert handler.hits["/toy.bin"] == 1 and _left_over(tmp_path) == []


def test_unsupported_mirror_schemes_are_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    assert resolve_mirror(f"file://{tmp_path}") == tmp_path
    refused = r"data mirror 's3://bucket/data' \(set by data\.mirror\) is not supported"
    with pytest.raises(DownloadError, match=refused):
        resolve_mirror("s3://bucket/data")
    monkeypatch.setenv(MIRROR_ENV, "ftp://example.org/pub")
    with pytest.raises(DownloadError, match=rf"'ftp://example\.org/pub' \(set by {MIRROR_ENV}\)"):
        download_dataset("toy", tmp_path / "out", files=[FileSpec("toy.bin", sha256="0" * 64)])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_during_a_download_names_the_file_and_is_not_retried(server, tmp_path, monkeypatch, code):
    base, handler = server
    handler.routes["/toy.bin"] = (200, PAYLOAD, len(PAYLOAD))
    spec = FileSpec("toy.bin", urls=(base + "/toy.bin",), sha256=PAYLOAD_SHA256)

    class FullDisk(io.BytesIO):
        def write(self, data):
            raise OSError(code, os.strerror(code))

    monkeypatch.setattr(download_module, "open", lambda *args, **kwargs: FullDisk(), raising=False)
    dest = tmp_path / "raw" / "toy"
    with pytest.raises(DiskFullError) as info:
        download_dataset("toy", dest, files=[spec], timeout=5, retries=3, backoff=0)
    assert info.value.errno == code and str(dest / "toy.bin") in str(info.value)
    assert f"df -h {dest}" in str(info.value)
    assert handler.hits["/toy.bin"] == 1 and _left_over(tmp_path / "raw") == []


def test_a_full_disk_copying_from_a_mirror_names_the_file(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "toy.bin").write_bytes(PAYLOAD)
    monkeypatch.delenv(MIRROR_ENV, raising=False)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(download_module.shutil, "copyfile", full)
    dest = tmp_path / "raw" / "toy"
    spec = FileSpec("toy.bin", sha256=PAYLOAD_SHA256)
    with pytest.raises(DiskFullError, match=rf"no space left on device while writing {dest / 'toy.bin'}"):
        download_dataset("toy", dest, mirror, files=[spec])
    assert _left_over(tmp_path / "raw") == []
