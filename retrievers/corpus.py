"""Search-R1 corpora on disk: JSONL, one `{"id", "contents"}` per line.

`DocStore` keeps a copy of the corpus inside the index with a byte-offset table, so a backend
returns passages by row number through an mmap instead of holding 21M strings in RAM.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

CORPUS_FILE = "corpus.jsonl"
OFFSETS_FILE = "offsets.npy"


def iter_corpus(path: str | Path) -> Iterator[dict[str, str]]:
    """Yield `{"id", "contents"}` rows, failing with the line number on a malformed one."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                yield {"id": str(row["id"]), "contents": str(row["contents"])}
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"{path}:{lineno}: expected a JSON object with 'id' and 'contents' ({exc})"
                ) from exc


def write_corpus(rows: Iterable[dict[str, str]], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(
                json.dumps({"id": str(row["id"]), "contents": row["contents"]}, ensure_ascii=False) + "\n"
            )
    return path


def fingerprint(path: str | Path) -> str:
    """Content hash of a corpus file, so caches and resumed builds never mix two corpora."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


class DocStore:
    """Row-number access to a corpus copied into an index directory."""

    def __init__(self, index_dir: str | Path) -> None:
        self.path = Path(index_dir) / CORPUS_FILE
        self.offsets = np.load(Path(index_dir) / OFFSETS_FILE)
        self._map = None
        if len(self):  # the mapping keeps its own handle; the file itself can close now
            with open(self.path, "rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    @staticmethod
    def create(corpus: str | Path, index_dir: str | Path) -> int:
        """Copy `corpus` (validated, normalised) into `index_dir`; return the passage count."""
        index_dir = Path(index_dir)
        index_dir.mkdir(parents=True, exist_ok=True)
        offsets: list[int] = []
        position = 0
        tmp = index_dir / (CORPUS_FILE + ".tmp")
        with open(tmp, "wb") as out:
            for row in iter_corpus(corpus):
                line = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
                offsets.append(position)
                out.write(line)
                position += len(line)
        offsets.append(position)
        shutil.move(tmp, index_dir / CORPUS_FILE)
        np.save(index_dir / OFFSETS_FILE, np.asarray(offsets, dtype=np.int64))
        return len(offsets) - 1

    def __len__(self) -> int:
        return max(0, int(self.offsets.size) - 1)

    def __getitem__(self, row: int) -> dict[str, str]:
        if not 0 <= row < len(self):
            raise IndexError(row)
        assert self._map is not None
        start, end = int(self.offsets[row]), int(self.offsets[row + 1])
        return json.loads(self._map[start:end])

    def __iter__(self) -> Iterator[dict[str, str]]:
        for row in range(len(self)):
            yield self[row]

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
