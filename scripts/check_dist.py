"""Checks built distributions: each Linux wheel's platform tag and linkage as `auditwheel show`
reports them, and that each sdist holds Cargo.lock (so pip builds it with the locked crates).

glibc wheels must be manylinux_2_17 and link libgcc_s.so.1 (the unwinder glibc's pthread_exit
uses; see crates/acp-fast-py/build.rs); musl wheels must be musllinux_1_2.

Usage: python scripts/check_dist.py dist/*.whl dist/*.tar.gz
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from pathlib import Path


def check_wheel(path: Path) -> list[str]:
    shown = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    text = " ".join(shown.stdout.split())
    if shown.returncode != 0:
        return [f"{path.name}: auditwheel show failed: {shown.stderr.strip()}"]
    tag = re.search(r'consistent with the following platform tag: "([^"]+)"', text)
    found = tag.group(1) if tag else None
    problems = []
    if "musllinux" in path.name:
        if not found or not found.startswith("musllinux_1_2_"):
            problems.append(f"{path.name}: auditwheel tag {found}, expected musllinux_1_2")
    else:
        if not found or not found.startswith("manylinux_2_17_"):
            problems.append(f"{path.name}: auditwheel tag {found}, expected manylinux_2_17")
        if "libgcc_s.so.1" not in text:
            problems.append(f"{path.name}: does not link libgcc_s.so.1:\n{shown.stdout}")
    if found and found not in path.name:
        problems.append(f"{path.name}: the file name does not carry the tag {found}")
    return problems


def check_sdist(path: Path) -> list[str]:
    with tarfile.open(path) as archive:
        names = archive.getnames()
    if not any(name.endswith("/Cargo.lock") and name.count("/") == 1 for name in names):
        return [f"{path.name}: no Cargo.lock at its root"]
    return []


def main(paths: list[str]) -> int:
    if not paths:
        print("nothing to check", file=sys.stderr)
        return 2
    problems = []
    for name in paths:
        path = Path(name)
        if path.suffix == ".whl":
            problems += check_wheel(path)
        elif path.name.endswith(".tar.gz"):
            problems += check_sdist(path)
        else:
            problems.append(f"{path.name}: neither a wheel nor an sdist")
        print(f"checked {path.name} ({path.stat().st_size / 1e6:.2f} MB)")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
