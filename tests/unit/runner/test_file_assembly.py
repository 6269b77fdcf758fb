"""Files arriving in chunks, as both ends of the runner's file RPCs receive them: order, caps."""

from __future__ import annotations

import pytest

from airlock.policy import FileCaps, FileRefused, FilesOverCap
from airlock.runner._transfer import FileAssembly, file_chunks

CAPS = FileCaps(max_files=3, max_file_bytes=10, max_total_bytes=16)


def test_chunks_reassemble_in_arrival_order() -> None:
    received = FileAssembly(CAPS, "artifacts")
    for path, data in (("b", b"0123456789"), ("a", b""), ("c", b"xyz")):
        for chunk in file_chunks(path, data, size=4):
            received.add(chunk.path, chunk.data, chunk.last)
    assert received.finish() == {"b": b"0123456789", "a": b"", "c": b"xyz"}
    assert received.sizes == {"b": 10, "a": 0, "c": 3}
    assert [c.last for c in file_chunks("b", b"0123456789", size=4)] == [False, False, True]


def test_a_file_sent_twice_or_interleaved_or_unfinished_is_refused() -> None:
    twice = FileAssembly(CAPS, "input files")
    twice.add("a", b"1", True)
    with pytest.raises(FileRefused, match="input files: a sent twice"):
        twice.add("a", b"2", True)
    interleaved = FileAssembly(CAPS, "input files")
    interleaved.add("a", b"1", False)
    with pytest.raises(FileRefused, match=r"b began before a ended"):
        interleaved.add("b", b"2", True)
    unfinished = FileAssembly(CAPS, "artifacts")
    unfinished.add("a", b"1", False)
    with pytest.raises(FileRefused, match="the stream ended before the last chunk of a"):
        unfinished.finish()


def test_each_cap_refuses_as_soon_as_it_is_passed() -> None:
    big = FileAssembly(CAPS, "artifacts")
    big.add("a", b"0123456789", False)
    with pytest.raises(FilesOverCap, match="a has 11 bytes"):
        big.add("a", b"!", True)
    total = FileAssembly(CAPS, "artifacts")  # each file under its cap, the set over the total
    total.add("a", b"0123456789", True)
    with pytest.raises(FilesOverCap, match="17 bytes in all"):
        total.add("b", b"0123456", False)  # refused mid-stream, not after the last chunk
    many = FileAssembly(CAPS, "artifacts")
    for path in "abc":
        many.add(path, b"", True)
    with pytest.raises(FilesOverCap, match="4 files"):
        many.add("d", b"", True)
