"""Replace byte-identical copies of shared libraries in a folder by symbolic links (used in the image build).

Wheels cannot hold symbolic links, so a wheel that ships libfoo.so, libfoo.so.1 and libfoo.so.1.2 ships
three copies (tbb does: ~20 MB). The longest name keeps the file; the others link to it.
"""

import hashlib
import os
import sys
from pathlib import Path

folder = Path(sys.argv[1] if len(sys.argv) > 1 else "/opt/grail/lib")
seen: dict[str, Path] = {}
saved = 0
for path in sorted(folder.glob("lib*.so*"), key=lambda p: len(p.name), reverse=True):
    if path.is_symlink() or not path.is_file():
        continue
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest in seen:
        saved += path.stat().st_size
        path.unlink()
        os.symlink(seen[digest].name, path)
    else:
        seen[digest] = path
print(f"dedup-libs: {saved / 1e6:.1f} MB of duplicate libraries in {folder} replaced by links")
