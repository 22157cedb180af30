"""Files the tests make *outside* a tree, links to them planted inside it, and the check that
nothing outside changed (issue 23: never links to the machine's real programs)."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path

#: What a record of one outside path holds: mode, owner, group, ctime (ns), content digest.
Record = tuple[int, int, int, int, str]


def _record(path: Path) -> Record:
    found = os.lstat(path)
    digest = ""
    if stat.S_ISREG(found.st_mode):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    elif stat.S_ISDIR(found.st_mode):
        digest = ",".join(sorted(os.listdir(path)))
    return (found.st_mode, found.st_uid, found.st_gid, found.st_ctime_ns, digest)


@dataclass
class Outside:
    """A folder of the test's own outside every tree under test: a plain file, a program
    (mode 755), a set-user-ID program (mode 4755, which a chmod would clear), a read-only
    file (444), a folder (750) holding a file, a named pipe, and a unix socket."""

    root: Path
    targets: dict[str, Path] = field(default_factory=dict)
    _socket: socket.socket | None = None
    _before: dict[Path, Record] = field(default_factory=dict)

    @classmethod
    def make(cls, root: Path) -> Outside:
        root.mkdir(parents=True)
        made = cls(root)
        files = {"plain.txt": (b"the user's notes\n", 0o640), "program": (b"#!/bin/sh\nexit 0\n", 0o755),
                 "setuid-program": (b"#!/bin/sh\nexit 0\n", 0o4755), "read-only.txt": (b"keep\n", 0o444)}
        for name, (content, mode) in files.items():
            path = root / name
            path.write_bytes(content)
            path.chmod(mode)
            made.targets[name] = path
        folder = root / "folder"
        folder.mkdir()
        (folder / "inner.txt").write_bytes(b"inner\n")
        (folder / "inner.txt").chmod(0o600)
        folder.chmod(0o750)
        made.targets["folder"] = folder
        made.targets["folder/inner.txt"] = folder / "inner.txt"
        os.mkfifo(root / "pipe", 0o620)
        made.targets["pipe"] = root / "pipe"
        made._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        made._socket.bind(os.fspath(root / "sock"))
        made.targets["sock"] = root / "sock"
        root.chmod(0o755)
        made.targets["."] = root
        made._before = made.records()
        return made

    def records(self) -> dict[Path, Record]:
        return {path: _record(path) for path in self.targets.values()}

    def plant_links(self, folder: Path) -> list[Path]:
        """Links in ``folder`` (made if missing) to every outside target, a relative one to the
        outside folder, and links that point back in: to a file and a folder beside them, to
        nothing, and to each other."""
        folder.mkdir(parents=True, exist_ok=True)
        planted = []
        for name, target in self.targets.items():
            link = folder / f"to-{name.replace('/', '-').replace('.', 'dot')}"
            link.symlink_to(target)
            planted.append(link)
        (folder / "inside.txt").write_text("inside\n")
        (folder / "inside-dir").mkdir(exist_ok=True)
        for name, target in (("back-to-file", folder / "inside.txt"), ("back-to-dir", folder / "inside-dir"),
                             ("dangling", folder / "nothing-here"), ("loop-a", folder / "loop-b"),
                             ("loop-b", folder / "loop-a"),
                             ("relative-to-outside", Path(os.path.relpath(self.root, folder)))):
            (folder / name).symlink_to(target)
            planted.append(folder / name)
        return planted

    def changed(self) -> dict[Path, tuple[Record, Record]]:
        """Every outside path whose mode, owner, group, ctime or content changed."""
        now = self.records()
        return {path: (was, now[path]) for path, was in self._before.items() if now[path] != was}

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
