"""Write files so that a failure never leaves a half-written file behind.

Every file is written to a temporary name in the same directory and moved into place with
:func:`os.replace`, which is atomic on POSIX and Windows; a folder of results is written
into a hidden staging folder and renamed into place (:func:`staged_folder`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.fields import setting


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


def check_new_folder(out: str | os.PathLike, option: str = "out") -> Path:
    """Refuse a destination that exists and is not an empty folder (nothing is overwritten).

    Parameters
    ----------
    out : str or PathLike
    option : str
        The setting that named ``out``, for the message.

    Raises
    ------
    InputError
        If ``out`` exists and is a file or a non-empty folder.
    """
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(
            f"{out} already exists and is not empty; choose another {setting(option)}"
        )
    return out


@contextlib.contextmanager
def staged_folder(out: str | os.PathLike):
    """Yield a hidden staging folder beside ``out``; move it onto ``out`` if the block succeeds.

    A failure (or Ctrl-C) removes the staging folder, so ``out`` either holds every file
    the block wrote or does not exist.

    Raises
    ------
    InputError
        If ``out`` exists and is not an empty folder (:func:`check_new_folder`).
    """
    out = check_new_folder(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{time.time_ns()}"
    staging.mkdir()
    try:
        yield staging
        if out.exists():
            out.rmdir()  # empty, checked above
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
