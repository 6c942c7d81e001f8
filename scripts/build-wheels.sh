#!/usr/bin/env bash
# Builds into dist/ the Linux wheels, one per CPython 3.11-3.14 and platform: manylinux2014
# (manylinux_2_17) and musllinux_1_2, x86_64 and aarch64; then the sdist; then checks them all
# (scripts/check_dist.py: auditwheel's tag, libgcc_s linked, Cargo.lock in the sdist).
#
# No Docker and no Python but the one running this: zig links against the glibc/musl versions
# of each tag, and maturin uses its bundled sysconfig for the interpreters (an explicit --target
# makes every build a cross build). Needs rustup (targets are added here), python3 >= 3.11, and
# PyPI (maturin, ziglang and auditwheel, pinned in the `wheels` extra, go into .venv-wheels).
# The glibc aarch64 wheels link the aarch64 libgcc_s.so.1 (see crates/acp-fast-py/build.rs): on
# Debian it comes from libgcc-s1-arm64-cross, installed here when missing and run as root.
#
#   scripts/build-wheels.sh                    # everything (29 min on 2 busy cores)
#   PYTHONS="3.12" TARGETS="x86_64-unknown-linux-gnu" scripts/build-wheels.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHONS=${PYTHONS:-"3.11 3.12 3.13 3.14"}
TARGETS=${TARGETS:-"x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-musl"}
OUT=${OUT:-dist}

step() { printf '\n=== %s\n' "$*"; }

step "build tools (.venv-wheels)"
if [ ! -x .venv-wheels/bin/python ]; then
    python3 -m venv .venv-wheels
fi
.venv-wheels/bin/python -m pip install --quiet --upgrade pip
# Only the pinned tools: the package itself is what gets built.
.venv-wheels/bin/python - <<'EOF' > .venv-wheels/requirements.txt
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["wheels"]))
EOF
.venv-wheels/bin/python -m pip install --quiet -r .venv-wheels/requirements.txt
export PATH="$PWD/.venv-wheels/bin:$PATH"

interpreters=()
for version in $PYTHONS; do
    interpreters+=(--interpreter "python$version")
done

mkdir -p "$OUT"
for target in $TARGETS; do
    step "$target: CPython $PYTHONS"
    rustup target add "$target" >/dev/null
    case "$target" in
        *-musl) compat=musllinux_1_2 ;;
        *) compat=manylinux2014 ;;
    esac
    if [ "$target" = aarch64-unknown-linux-gnu ] && [ -z "${ACP_FAST_LIBGCC_S:-}" ] \
        && [ ! -e /usr/aarch64-linux-gnu/lib/libgcc_s.so.1 ] \
        && [ ! -e /usr/lib/aarch64-linux-gnu/libgcc_s.so.1 ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            apt-get install -y -q libgcc-s1-arm64-cross >/dev/null
        else
            echo "aarch64 glibc wheels need the aarch64 libgcc_s.so.1: install" \
                "libgcc-s1-arm64-cross or set ACP_FAST_LIBGCC_S" >&2
            exit 1
        fi
    fi
    started=$SECONDS
    maturin build --release --zig --target "$target" --compatibility "$compat" \
        "${interpreters[@]}" --out "$OUT"
    if [ "$compat" = musllinux_1_2 ]; then
        bash scripts/musl-needed.sh "$OUT"/acp_fast-*-musllinux_1_2_"${target%%-*}".whl
    fi
    echo "$target: $((SECONDS - started)) s"
done

step "sdist"
maturin sdist --out "$OUT"

step "check"
python scripts/check_dist.py "$OUT"/*.whl "$OUT"/*.tar.gz
ls -l "$OUT"
