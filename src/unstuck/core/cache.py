"""Derived data kept between processes: what unstuck computes from its bundled data and its
libraries at start-up (message patterns from every translation, the token formats of
detect-secrets' plugins, the signal rows), stored so a later process reads it instead of deriving it.
Internal: not a supported import path (docs/reference/index.md lists those that are).

Each entry is one file, ``<cache_dir()>/<name>.json``, holding a *key* (a digest of everything
the value was derived from) beside the value; or, for a large value that JSON is slow to read
back (tens of thousands of escaped pattern characters), ``<name>.txt``: the key on the first
line, then text the caller lays out (:func:`load_or_derive_text`). A missing, stale, foreign
or damaged file is a miss: the value is derived again and the file rewritten atomically (a
temporary file renamed over it). A cache folder that cannot be written only costs the derivation; the cache never
raises. A cache entry is read only from a regular file of bounded size, never through a final
symbolic link, never blocking (a FIFO is a miss).

The cache is as trusted as the user's home: whoever can write it could as well change the
user's shell start-up files. It keeps a process from deriving the same data again; it is not a
defence against a local attacker (a forged entry with a valid key is read as written).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Protocol, TypeVar

__all__ = ["CACHE_DIR_ENV", "MAX_ENTRY_BYTES", "bundled_document", "cache_dir", "data_bytes", "digest_of",
           "load_or_derive", "load_or_derive_text", "store_text"]

#: The environment variable naming the cache folder (default: the platform's user cache
#: folder for ``unstuck``, ``~/.cache/unstuck`` on Linux, from ``platformdirs``).
CACHE_DIR_ENV = "UNSTUCK_CACHE_DIR"

T = TypeVar("T")


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The cache folder: ``UNSTUCK_CACHE_DIR`` when set, else ``platformdirs.user_cache_path("unstuck")``."""
    chosen = (environ if environ is not None else os.environ).get(CACHE_DIR_ENV, "").strip()
    if chosen:
        return Path(chosen)
    import platformdirs  # only without UNSTUCK_CACHE_DIR (it costs a few ms to import)

    return platformdirs.user_cache_path("unstuck")


def load_or_derive(name: str, key: str, derive: Callable[[], object], parse: Callable[[object], T | None]) -> T:
    """The cached value ``name`` when it was derived under ``key``, else ``derive()`` (stored).

    Args:
        name: the entry's file name without ``.json`` (letters, digits, ``-``).
        key: a digest of every input of the derivation; a different key is a miss.
        derive: computes the value as JSON data (lists, mappings, strings, numbers).
        parse: turns JSON data into the value, or ``None`` when it is not well formed (a
            damaged or foreign file is then a miss).

    Raises:
        ValueError: when ``parse`` refuses what ``derive`` just computed (a defect of the caller).
    """
    path = cache_dir() / f"{name}.json"
    stored = _read(path)
    if isinstance(stored, dict) and stored.get("key") == key:
        value = parse(stored.get("value"))
        if value is not None:
            return value
    try:  # what a later process will read back, so a hit and a miss give the same value
        body = json.dumps({"key": key, "value": derive()}, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the cache entry {name!r}: the derived value is not JSON data: {exc}") from exc
    value = parse(json.loads(body)["value"])
    if value is None:
        raise ValueError(f"the cache entry {name!r} refuses the value just derived for it")
    _store(path, body)
    return value


def load_or_derive_text(name: str, key: str, derive: Callable[[], str], parse: Callable[[str], T | None], *,
                        encoding: str = "utf-8") -> T:
    """:func:`load_or_derive` for a value kept as text: the entry ``<name>.txt`` holds ``key`` on
    its first line (ASCII) and the text ``derive()`` gave after it, in ``encoding``; ``parse``
    reads that text back.

    Args:
        name: the entry's file name without ``.txt`` (letters, digits, ``-``).
        key: a digest of every input of the derivation (one line of ASCII); a different key is
            a miss.
        derive: computes the text.
        parse: turns the text into the value, or ``None`` when it is not well formed (a damaged
            or foreign file is then a miss).
        encoding: how the text is stored (``"utf-16-le"`` reads back far faster than UTF-8 for
            text mostly beyond Latin-1).

    Raises:
        ValueError: when ``key`` is not one line of ASCII, the text cannot be encoded, or
            ``parse`` refuses what ``derive`` just computed (a defect of the caller).
    """
    if "\n" in key or "\r" in key or not key.isascii():
        raise ValueError(f"the cache entry {name!r}: a key is one line of ASCII")
    path = cache_dir() / f"{name}.txt"
    stored = _read_bytes(path)
    if stored is not None:
        head, newline, body = stored.partition(b"\n")
        if newline and head == key.encode("ascii"):
            try:
                value = parse(body.decode(encoding))
            except UnicodeDecodeError:
                value = None
            if value is not None:
                return value
    text = derive()
    value = parse(text)
    if value is None:
        raise ValueError(f"the cache entry {name!r} refuses the value just derived for it")
    store_text(name, key, text, encoding=encoding)
    return value


def store_text(name: str, key: str, text: str, *, encoding: str = "utf-8") -> None:
    """Keep ``text`` as the entry ``name`` under ``key``, as :func:`load_or_derive_text` writes
    it (for an entry derived beside another: one derivation, both kept). Never raises on a
    folder that cannot be written.

    Raises:
        ValueError: when ``key`` is not one line of ASCII or ``text`` cannot be encoded.
    """
    if "\n" in key or "\r" in key or not key.isascii():
        raise ValueError(f"the cache entry {name!r}: a key is one line of ASCII")
    try:
        body = text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise ValueError(f"the cache entry {name!r}: the derived text is not {encoding}: {exc}") from exc
    _store_bytes(cache_dir() / f"{name}.txt", key.encode("ascii") + b"\n" + body)


def data_bytes(name: str) -> bytes:
    """The bundled data file ``unstuck/data/<name>``, as bytes.

    Raises:
        OSError: when it cannot be read (a broken installation).
    """
    return _data_folder().joinpath(name).read_bytes()


def digest_of(parts: Iterable[bytes | str]) -> str:
    """The SHA-256 (hex) of ``parts``, each length-prefixed (so no two lists of parts give one
    digest): the key of an entry derived from them."""
    digest = hashlib.sha256()
    for part in parts:
        raw = part.encode("utf-8") if isinstance(part, str) else part
        digest.update(f"{len(raw)}:".encode())
        digest.update(raw)
    return digest.hexdigest()


def _data_folder() -> _Readable:
    """``unstuck/data``: a plain folder beside this package when it is one (an installed wheel,
    a checkout; no ``importlib.resources`` to import, which costs milliseconds at start-up),
    else what ``importlib.resources`` finds (a zip archive)."""
    folder = Path(__file__).parent.parent / "data"
    if folder.is_dir():
        return folder
    from importlib import resources

    return resources.files("unstuck").joinpath("data")


class _Readable(Protocol):
    """What :func:`_data_folder` returns: a ``Path`` or an ``importlib.resources`` traversable."""

    def joinpath(self, *descendants: str) -> _Readable: ...

    def read_bytes(self) -> bytes: ...


def bundled_document(name: str, load: Callable[[str], object]) -> object:
    """The bundled data file ``unstuck/data/<name>`` as ``load`` reads its text, cached as JSON
    (parsing the YAML tables costs tens of milliseconds at every start; their JSON, one or two).

    The value is what ``load`` returns passed through JSON, whether or not the cache was hit:
    mapping keys become strings (a YAML ``1:`` key is ``"1"``) and tuples lists; the caller
    validates it as it would any file.

    Raises:
        ValueError: when ``load`` returns something that is not JSON data.
        Whatever ``load`` raises for the text.
    """
    raw = data_bytes(name)
    digest = hashlib.sha256(f"{name}\0{load.__module__}.{load.__qualname__}\0".encode())
    digest.update(raw)
    return load_or_derive(f"data-{name.replace('.', '-')}", digest.hexdigest(),
                          lambda: load(raw.decode("utf-8")), _anything)


def _anything(raw: object) -> object:
    return raw


#: The largest cache file read (bytes): the biggest entry, every message pattern in every
#: language, is about 1.2 MB; a file far beyond that is not one of ours.
MAX_ENTRY_BYTES = 64 << 20


def _read(path: Path) -> object:
    """The JSON in ``path`` (:func:`_read_bytes`) when it parses, else ``None``."""
    raw = _read_bytes(path)
    if raw is None:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def _read_bytes(path: Path) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of at most :data:`MAX_ENTRY_BYTES`, else
    ``None``. Opened without following a final symbolic link and without blocking (a FIFO or a
    device put where a cache file should be is a miss, never a hang or an endless read)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
            return None
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            raw = handle.read(MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    if len(raw) > MAX_ENTRY_BYTES:
        return None
    return raw


def _store(path: Path, body: str) -> None:
    _store_bytes(path, body.encode("utf-8"))


def _store_bytes(path: Path, body: bytes) -> None:
    """Write ``body`` to ``path`` atomically (a temporary file in its folder renamed over it:
    a link put in its place is replaced, never followed); a folder that cannot be written costs
    only the entry."""
    import tempfile  # only when an entry is written (a miss): it costs milliseconds to import

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")
    except OSError:
        return
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(body)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
