"""Collect the reader-document corpus from this Debian machine (run once; its output is kept).

The corpus is ordinary prose that addresses its reader — READMEs, NEWS files, Debian
changelogs and rendered manual pages of Debian packages — on which the injection shapes of
``src/unstuck/data/signals.yaml`` must find nothing (tests/test_injection_shapes.py,
bench/injection_shapes.py). The selection is fixed by rule, not by what the shapes match:

* packages in sorted order whose ``/usr/share/doc/<package>/copyright`` is machine-readable
  (DEP-5, so its licences can be named) and whose section is in Debian main;
* per package: its top-level README*, NEWS* and *.md/*.rst/*.txt files (decompressed), its
  ``changelog.Debian`` and up to two of its manual pages in sections 1, 5 and 8 (rendered by
  ``man -l`` at 80 columns, as an agent reading ``man`` sees them);
* each document cut at :data:`MAX_CHARS` on a line boundary; at most :data:`QUOTA` of each kind.

``LICENCES`` names every document with its package, version and the licences its copyright
file lists. Usage: ``python tests/data/reader_documents/collect.py`` (rewrites this folder).
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = Path("/usr/share/doc")
MAX_CHARS = 12_000
MIN_CHARS = 400
QUOTA = {"readme": 130, "changelog": 60, "man": 130}
_README = re.compile(r"^(README|NEWS)|\.(md|rst|txt)(\.gz)?$", re.IGNORECASE)
_MAN = re.compile(r"^/usr/share/man/man[158]/[^/]+$")


def _read(path: Path) -> str:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8", errors="replace")


def _cut(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    end = text.rfind("\n", 0, MAX_CHARS)
    return text[: end + 1 if end > 0 else MAX_CHARS]


def _licences(copyright_text: str) -> list[str]:
    found: list[str] = []
    for line in copyright_text.splitlines():
        if line.startswith("License:"):
            name = line.split(":", 1)[1].strip()
            if name and name not in found:
                found.append(name)
    return found


def _query(package: str, field: str) -> str:
    done = subprocess.run(["dpkg-query", "-W", "-f", f"${{{field}}}", package],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip()


def _render(page: str) -> str:
    env = {**os.environ, "MANWIDTH": "80", "LC_ALL": "C.UTF-8"}
    done = subprocess.run(["man", "-l", page], capture_output=True, text=True, env=env, check=False)
    return done.stdout


def main() -> None:
    for kind in QUOTA:
        shutil.rmtree(HERE / kind, ignore_errors=True)
        (HERE / kind).mkdir()
    counts = dict.fromkeys(QUOTA, 0)
    index: list[str] = []
    for package_dir in sorted(DOC.iterdir()):
        copyright_file = package_dir / "copyright"
        if package_dir.is_symlink() or not copyright_file.is_file():
            continue
        notice = copyright_file.read_text(encoding="utf-8", errors="replace")
        licences = _licences(notice)
        package = package_dir.name
        version = _query(package, "Version")
        section = _query(package, "Section")
        if not notice.startswith("Format:") or not licences or not version or "/" in section:
            continue  # not machine-readable, not an installed package, or outside main
        documents: list[tuple[str, str, str]] = []
        for path in sorted(package_dir.iterdir()):
            if path.is_file() and not path.is_symlink() and _README.search(path.name):
                documents.append(("readme", path.name.removesuffix(".gz"), _read(path)))
        for name in ("changelog.Debian.gz", "changelog.Debian"):
            if (package_dir / name).is_file():
                documents.append(("changelog", "changelog.Debian", _read(package_dir / name)))
                break
        listed = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True, check=False).stdout
        pages = [line for line in listed.splitlines() if _MAN.match(line) and Path(line).is_file()
                 and not Path(line).is_symlink()][:2]
        documents += [("man", Path(page).name.removesuffix(".gz"), _render(page)) for page in pages]
        for kind, name, text in documents:
            if counts[kind] >= QUOTA[kind] or len(text.strip()) < MIN_CHARS:
                continue
            counts[kind] += 1
            target = Path(kind) / f"{package}__{name}.txt"
            (HERE / target).write_text(_cut(text), encoding="utf-8")
            index.append(f"{target}\t{package}\t{version}\t{', '.join(licences)}\t{copyright_file}")
        if all(counts[kind] >= QUOTA[kind] for kind in QUOTA):
            break
    header = ("# Reader-document corpus: one line per document (tab-separated): document, Debian\n"
              "# package, version, the licences its copyright file lists, that file's path.\n"
              "# Collected by collect.py from this machine's /usr/share/doc and /usr/share/man.\n")
    (HERE / "LICENCES").write_text(header + "\n".join(index) + "\n", encoding="utf-8")
    print(counts, len(index))


if __name__ == "__main__":
    main()
