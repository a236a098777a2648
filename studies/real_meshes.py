"""Real meshes for the shape experiment, from Debian's CGAL demo data (nothing is downloaded).

Debian's ``libcgal-demo`` package ships CGAL's test meshes in
``/usr/share/doc/libcgal-dev/data.tar.gz``. This extracts the watertight ones the paper study
uses into ``--out`` (default ``data/meshes``) and prints their paths:

* ``armadillo.off``: the Stanford Armadillo scan (Stanford 3D Scanning Repository,
  Krishnamurthy & Levoy 1996), decimated to 52,000 faces;
* ``fandisk.off``: Hoppe's fan-disk CAD part (12,946 faces), flat faces and sharp edges.

With the Stanford bunny built into ``enerf shape`` (``--mesh bunny``) that makes one scan, a
second scan and a modelled part:

    apt-get install libcgal-demo
    python -m studies.real_meshes            # -> data/meshes/armadillo.off data/meshes/fandisk.off
"""

from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

from enerf.atomic import atomic_write_bytes

ARCHIVE = Path("/usr/share/doc/libcgal-dev/data.tar.gz")
MESHES = ("armadillo.off", "fandisk.off")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, default=ARCHIVE, help="CGAL's data.tar.gz (libcgal-demo)")
    parser.add_argument("--out", type=Path, default=Path("data/meshes"))
    args = parser.parse_args(argv)
    if not args.archive.is_file():
        print(f"{args.archive} not found: install Debian's libcgal-demo (apt-get install libcgal-demo) or pass "
              "--archive", file=sys.stderr)
        return 2
    with tarfile.open(args.archive) as tar:
        members = {Path(m.name).name: m for m in tar.getmembers() if m.name.startswith("data/meshes/")}
        for name in MESHES:
            if name not in members:
                print(f"{args.archive} has no data/meshes/{name}", file=sys.stderr)
                return 2
            target = args.out / name
            if not target.is_file():
                atomic_write_bytes(target, tar.extractfile(members[name]).read())
            print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
