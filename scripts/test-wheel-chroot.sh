#!/usr/bin/env bash
# CPython 3.14 has no package for this machine's Debian (bookworm) and no build on PyPI, so the
# 3.14 wheel is tested under Debian sid's python3.14, in a chroot made with debootstrap (about
# 2 minutes and 300 MB, kept in target/chroot-sid). Builds the manylinux wheel for 3.14 (maturin's
# bundled sysconfig), installs it into a fresh virtualenv inside the chroot (which has no Rust),
# runs the given tests there (default: the fault suite), then the interpreter-exit cases REPEAT
# times. Needs root, debootstrap (installed with apt-get when missing) and a Debian mirror.
#
#   scripts/test-wheel-chroot.sh [pytest args...]      (WHEEL=path: test that wheel instead)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

REPEAT=${REPEAT:-40}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
root=$PWD/target/chroot-sid
work=target/wheel-test/cp314
[ $# -gt 0 ] || set -- tests/faults tests/test_process.py

if grep -q " $root/" /proc/mounts; then
    echo "something is still mounted under $root: unmount it first" >&2
    exit 1
fi
if ! chroot "$root" python3.14 -c 'import venv, ssl' 2>/dev/null; then
    command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
    rm -rf "$root"
    started=$SECONDS
    debootstrap --variant=minbase --include=python3.14,python3.14-venv,ca-certificates \
        sid "$root" "$MIRROR" >/dev/null
    echo "debootstrap sid: $((SECONDS - started)) s"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's trust store (a proxy's CA may be in it), for pip inside the chroot.
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/host-ca-certificates.crt"

rm -rf "$work" && mkdir -p "$work/dist"
if [ -n "${WHEEL:-}" ]; then  # one built already (scripts/build-wheels.sh)
    cp "$WHEEL" "$work/dist/"
else
    started=$SECONDS
    # Its own cargo target dir: the zig link must not invalidate the editable build's.
    CARGO_TARGET_DIR=target/wheel maturin build --quiet --release --zig \
        --compatibility manylinux2014 --target x86_64-unknown-linux-gnu --interpreter 3.14 \
        --out "$work/dist"
    echo "built in $((SECONDS - started)) s"
fi
wheel=$(ls "$work"/dist/acp_fast-*-cp314-cp314-manylinux*.whl)
echo "testing $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
python scripts/check_dist.py "$wheel"

mkdir -p "$root/src"
mount --bind /proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --bind "$PWD" "$root/src"
trap 'umount -l "$root/src"; umount -l "$root/dev"; umount -l "$root/proc"' EXIT

in_chroot() {
    chroot "$root" env -i PATH=/venv/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
        PYTHONDONTWRITEBYTECODE=1 PIP_CERT=/etc/ssl/certs/host-ca-certificates.crt \
        PIP_DISABLE_PIP_VERSION_CHECK=1 sh -c "cd /src && $1"
}
in_chroot "rm -rf /venv && python3.14 -m venv /venv && python -m pip install --quiet \
    --only-binary acp-fast '$wheel[test,interop]'"
in_chroot "! command -v cargo && ! command -v rustc && python -c 'import sys, acp_fast._core as c; \
    assert c.__file__.startswith(\"/venv/\"), c.__file__; print(\"testing\", c.__file__, sys.version)'"
quoted=$(printf ' %q' "$@")
in_chroot "python -m pytest -q -p no:cacheprovider$quoted"

started=$SECONDS
for round in $(seq "$REPEAT"); do
    if ! in_chroot "python -m pytest -q -p no:cacheprovider -x \
        tests/faults/test_host.py::test_interpreter_exit_with_live_clients" >"$work/exit.log" 2>&1
    then
        cat "$work/exit.log"
        echo "interpreter-exit cases failed in round $round of $REPEAT (cp314)" >&2
        exit 1
    fi
done
echo "interpreter-exit cases: $REPEAT rounds without a failure (cp314, $((SECONDS - started)) s)"
