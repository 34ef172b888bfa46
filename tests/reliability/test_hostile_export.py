"""`memoryd import memoryd-export` under crafted archives: small files that unpack to hundreds of MB.

Each runs the real CLI against a real daemon, under a wrapper that reports the import process's
peak RSS: the import must refuse with exit 2 naming the archive and why, and stay far below what
the unbounded reader reached (556 MB for the records, 401 MB for the pax header).
"""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
import tarfile
from pathlib import Path

from harness import Env

ULID = "01JAAAAAAAAAAAAAAAAAAAAA"
PEAK = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); print(done.returncode); "
        "print(done.stderr.strip())")


def record(i: int, body_bytes: int) -> bytes:
    meta = (f"---\nid: {ULID}{i:02d}\ncreated: '2026-01-01T00:00:00.000Z'\nscopes: [user]\ncategory: fact\n"
            "confidence: medium\nsource: explicit-statement\n---\n")
    return meta.encode() + b"a" * body_bytes


def records_archive(path: Path, count: int, body_bytes: int) -> Path:
    with gzip.open(path, "wb", compresslevel=1) as raw, tarfile.open(fileobj=raw, mode="w|") as archive:
        for i in range(count):
            data = record(i, body_bytes)
            info = tarfile.TarInfo(f"memories/{ULID}{i:02d}.md")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def pax_bomb(path: Path, value_bytes: int) -> Path:
    """One pax extended header whose value is `value_bytes` long, before any member."""
    header = tarfile.TarInfo("././@PaxHeader")
    header.type = tarfile.XHDTYPE
    header.size = value_bytes
    block = header.tobuf(format=tarfile.USTAR_FORMAT)
    with gzip.open(path, "wb", compresslevel=1) as raw:
        raw.write(block)
        chunk = b"a" * (1 << 20)
        for _ in range(value_bytes >> 20):
            raw.write(chunk)
        raw.write(bytes(-value_bytes % 512) + bytes(1024))
    return path


def peak_import(env: Env, archive: Path) -> tuple[int, int, str]:
    done = subprocess.run([sys.executable, "-c", PEAK, sys.executable, "-m", "memoryd", "import", "memoryd-export",
                           str(archive)], env=env.environ(), capture_output=True, text=True, timeout=300)
    rss_kb, code, stderr = done.stdout.split("\n", 2)
    return int(rss_kb) >> 10, int(code), stderr


def test_records_past_the_total_bound_are_refused_before_they_fill_memory(daemon: Env) -> None:
    archive = records_archive(daemon.base / "records.tar.gz", count=70, body_bytes=(4 << 20) - 2048)
    assert archive.stat().st_size < 2 << 20  # under 2 MB on disk, ~280 MB unpacked
    rss_mb, code, stderr = peak_import(daemon, archive)
    assert code == 2 and str(archive) in stderr and "MiB" in stderr, stderr
    assert rss_mb < 400, rss_mb  # the bound is 256 MiB of records; the unbounded reader held them all twice
    assert daemon.memoryd_json("memories", "list")["total"] == 0  # refused whole: nothing written


def test_a_huge_pax_header_is_refused_before_tarfile_reads_it(daemon: Env) -> None:
    archive = pax_bomb(daemon.base / "pax.tar.gz", 128 << 20)
    rss_mb, code, stderr = peak_import(daemon, archive)
    assert code == 2 and str(archive) in stderr and "header" in stderr, stderr
    assert rss_mb < 120, rss_mb  # tarfile read the whole value into memory before: 401 MB
