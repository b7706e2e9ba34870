"""Files the kernel writes: atomic replacement, an advisory lock shared by processes, and ``.env`` updates."""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path


def atomic_write(path: Path, text: str, mode: int | None = None) -> None:
    """Replace ``path`` with ``text`` atomically (temporary file in the same directory, fsync, rename).

    The new file gets ``mode``, else the old file's mode, else ``0600``.  A
    symbolic link is written through: its target is replaced and the link
    stays (a dotfiles repository keeps its file).
    """
    if path.is_symlink():
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An advisory lock beside ``path`` (POSIX ``flock``), shared by every process of this kernel."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: the thread lock still holds
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: A variable name ``.env`` files may set.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def quote_env_value(value: str) -> str:
    """``value`` in single quotes, as ``.env`` readers (python-dotenv) read it back unchanged."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_env(home: Path, values: dict[str, str]) -> Path:
    """Set ``values`` in ``<home>/.env``: other lines kept, a variable's old line replaced, mode 0600."""
    from dotenv.parser import parse_stream

    for name, value in values.items():
        if not ENV_NAME.match(name):
            raise ValueError(f"'{name}' is not a valid environment variable name")
        if "\n" in value or "\0" in value:
            raise ValueError(f"the value of {name} must be a single line")
    path = home / ".env"
    with file_lock(path):
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        out: list[str] = []
        done: set[str] = set()
        for binding in parse_stream(io.StringIO(text)):
            original = binding.original.string
            if binding.key in values:
                if binding.key not in done:
                    export = "export " if original.lstrip().startswith("export ") else ""
                    out.append(f"{export}{binding.key}={quote_env_value(values[binding.key])}\n")
                    done.add(binding.key)
                continue
            out.append(original)
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
        out += [f"{k}={quote_env_value(v)}\n" for k, v in values.items() if k not in done]
        atomic_write(path, "".join(out), mode=0o600)
    return path
