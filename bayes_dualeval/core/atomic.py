"""Write files so that a failure never leaves a half-written file behind.

Every file is written to a temporary name in the same directory and moved into place with
:func:`os.replace`, which is atomic on POSIX and Windows.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside ``path``; move it onto ``path`` if the block succeeds.

    Parameters
    ----------
    path : str or PathLike
        The final destination.

    Yields
    ------
    Path
        A temporary file name in the same directory. If the block raises, the temporary
        file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``path`` and return the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Atomically write ``data`` to ``path`` and return the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)
