"""Reading untrusted harness output with bounded memory.

Evaluation logs come from other programs and other people: a record of hundreds of
megabytes, a zip member that inflates a thousandfold or a member named ``../../x`` must be
refused before it is held in memory. Every harness reader reads through these helpers:

* :func:`lines`: the lines of a text file, each at most :data:`MAX_RECORD_BYTES`;
* :func:`json_array`: the records of a top-level JSON array, one at a time, each at most
  :data:`MAX_RECORD_BYTES` (an ``annotations.json`` is never loaded whole);
* :func:`json_file`: a small JSON document (a results file), at most :data:`MAX_RECORD_BYTES`;
* :func:`open_zip` and :func:`zip_json`: a zip archive whose member names stay inside it,
  and one member decoded, refused when it is larger than the cap or inflates more than
  :data:`MAX_RATIO` times its compressed size (zstd members, as inspect_ai writes them,
  need the optional ``zstandard`` package on Python before 3.14).

Each raises :class:`~bayes_dualeval.core.errors.InputError` naming the file and record.
"""

from __future__ import annotations

import codecs
import copy
import json
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from bayes_dualeval.core.errors import InputError

#: The largest single record read (a JSONL line, an array element, a zip member).
MAX_RECORD_BYTES = 64 * 2**20
#: The most a zip member may inflate, as a multiple of its compressed size (above 1 MiB).
MAX_RATIO = 200
#: zip's compression method number for zstd (written by inspect_ai since 0.3.2xx).
ZIP_ZSTD = 93
#: How much of a file harnesses recognise it by.
HEAD_BYTES = 65536
_CHUNK = 2**20


def _too_big(where: str) -> InputError:
    return InputError(f"{where}: record larger than {MAX_RECORD_BYTES // 2**20} MiB, refused")


def head(path: Path) -> bytes:
    """The first :data:`HEAD_BYTES` of ``path`` (what harnesses are recognised by)."""
    with path.open("rb") as fh:
        return fh.read(HEAD_BYTES)


def first_json_line(data: bytes):
    """The first non-blank line of ``data`` parsed as JSON, or None when it is not JSON."""
    for line in data.splitlines():
        if line.strip():
            try:
                return json.loads(line)
            except (ValueError, RecursionError):  # not JSON, or nested beyond parsing
                return None
    return None


def lines(path: Path):
    """Yield ``(line_number, text)`` for each non-blank line, each at most the cap.

    Raises
    ------
    InputError
        A line over :data:`MAX_RECORD_BYTES`, or text that is not UTF-8.
    """
    with path.open("rb") as fh:
        n = 0
        while True:
            raw = fh.readline(MAX_RECORD_BYTES + 1)
            if not raw:
                return
            n += 1
            if len(raw) > MAX_RECORD_BYTES:
                raise _too_big(f"{path}:{n}")
            if raw.strip():
                try:
                    yield n, raw.decode("utf-8-sig" if n == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(f"{path}:{n}: not UTF-8 text ({exc.reason})") from None


def json_lines(path: Path):
    """Yield ``(line_number, object)`` for each line of a JSONL file (see :func:`lines`)."""
    for n, text in lines(path):
        try:
            yield n, json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise InputError(f"{path}:{n}: malformed JSON ({exc})") from None


def json_array(path: Path):
    """Yield ``(record_number, object)`` for each element of a top-level JSON array.

    The file is read in chunks and decoded one element at a time, so memory stays near
    the largest element, which may not pass :data:`MAX_RECORD_BYTES`.

    Raises
    ------
    InputError
        Not a JSON array, a malformed element, or an element over the cap.
    """
    decoder = json.JSONDecoder()
    text = codecs.getincrementaldecoder("utf-8-sig")()
    buf, pos, n, eof, opened = "", 0, 0, False, False
    with path.open("rb") as fh:

        def more() -> bool:
            nonlocal buf, pos, eof
            if eof:
                return False
            raw = fh.read(max(_CHUNK, len(buf) - pos))
            try:
                buf = buf[pos:] + text.decode(raw, final=not raw)
            except UnicodeDecodeError as exc:
                raise InputError(f"{path}: not UTF-8 text ({exc.reason})") from None
            pos, eof = 0, not raw
            return True

        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                if buf[pos] == "," and not opened:
                    raise InputError(f"{path}: not a JSON array")
                pos += 1
            if pos >= len(buf):
                if more():
                    continue
                raise InputError(f"{path}: truncated JSON array (no closing ']')")
            if not opened:
                if buf[pos] != "[":
                    raise InputError(f"{path}: not a JSON array")
                opened, pos = True, pos + 1
                continue
            if buf[pos] == "]":
                return
            try:
                obj, end = decoder.raw_decode(buf, pos)
            except (ValueError, RecursionError) as exc:
                if len(buf) - pos > MAX_RECORD_BYTES:
                    raise _too_big(f"{path}: record {n + 1}") from None
                if more():
                    continue
                raise InputError(f"{path}: record {n + 1}: malformed JSON ({exc})") from None
            n += 1
            pos = end
            yield n, obj


def json_file(path: Path):
    """A whole JSON document of at most :data:`MAX_RECORD_BYTES` (a results file)."""
    if path.stat().st_size > MAX_RECORD_BYTES:
        raise _too_big(str(path))
    try:
        return json.loads(path.read_bytes().decode("utf-8-sig"))
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path}: malformed JSON ({exc})") from None


def open_zip(path: Path) -> zipfile.ZipFile:
    """Open a zip archive, refusing a corrupt one or a member named outside it.

    Raises
    ------
    InputError
        Not a zip (truncated or corrupt), or a member path that is absolute or has ``..``.
    """
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InputError(
            f"{path}: not a readable zip archive (truncated or corrupt: {exc})"
        ) from None
    for name in zf.namelist():
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
            zf.close()
            raise InputError(f"{path}: member {name!r} has a path outside the archive, refused")
    return zf


def _zstd(raw_stream, limit: int, where: str) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise InputError(
            f"{where}: zstd-compressed (as inspect_ai writes logs); reading it needs the "
            "zstandard package: pip install 'bayes-dualeval[harness]'"
        ) from None
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(raw_stream, read_across_frames=True)
        return reader.read(limit + 1)
    except zstandard.ZstdError as exc:
        raise InputError(f"{where}: corrupt zstd data ({exc})") from None


def zip_bytes(zf: zipfile.ZipFile, name: str, where: str) -> bytes:
    """One member's bytes, refused over the cap or when it inflates too far."""
    info = zf.getinfo(name)
    member = f"{where}:{name}"
    if info.file_size > MAX_RECORD_BYTES:
        raise _too_big(member)
    if info.file_size > _CHUNK and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        raise InputError(
            f"{member}: inflates {info.file_size / max(info.compress_size, 1):.0f} times its "
            f"compressed size (more than {MAX_RATIO}), refused"
        )
    try:
        if info.compress_type == ZIP_ZSTD and not hasattr(zipfile, "ZIP_ZSTANDARD"):
            raw = copy.copy(info)  # the member's stored bytes, decompressed here
            raw.compress_type, raw.file_size, raw.CRC = (
                zipfile.ZIP_STORED,
                info.compress_size,
                None,
            )
            with zf.open(raw) as fh:
                data = _zstd(fh, info.file_size, member)
            if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
                raise InputError(f"{member}: corrupt member (size or CRC-32 mismatch)")
            return data
        with zf.open(info) as fh:
            data = fh.read(MAX_RECORD_BYTES + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise InputError(f"{member}: corrupt member ({exc})") from None
    except (NotImplementedError, RuntimeError) as exc:  # a compression we lack, encryption
        raise InputError(f"{member}: cannot be read ({exc})") from None
    if len(data) > MAX_RECORD_BYTES:
        raise _too_big(member)
    return data


def zip_json(zf: zipfile.ZipFile, name: str, where: str):
    """One member decoded as JSON (see :func:`zip_bytes`)."""
    data = zip_bytes(zf, name, where)
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{where}:{name}: malformed JSON ({exc})") from None
