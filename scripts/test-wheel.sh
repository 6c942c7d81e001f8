#!/usr/bin/env bash
# Tests the binary wheel as a user gets it: builds the manylinux2014 wheel (zig, as
# scripts/build-wheels.sh does) for one CPython, checks its tag and linkage, installs it into a
# fresh virtualenv, and runs pytest there with no cargo or rustc on PATH, from the repository
# (the tests) against the installed package (not the source tree). Then the interpreter-exit
# cases, REPEAT times each.
#
#   scripts/test-wheel.sh PYTHON [pytest args...]    (default: the whole suite)
#   WHEEL=path scripts/test-wheel.sh PYTHON ...      (test that wheel, built already)
# Needs the `wheels` extra (maturin, ziglang, auditwheel) on PATH, e.g. .ci/run's .venv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python=$1
shift
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
tag=cp${version/./}
REPEAT=${REPEAT:-40}
work=$PWD/target/wheel-test/$tag
# Its own cargo target dir: the zig link must not invalidate the editable build's.
export CARGO_TARGET_DIR=target/wheel

rm -rf "$work" && mkdir -p "$work/dist"
if [ -n "${WHEEL:-}" ]; then  # built already (.ci/run builds the wheels while tests run)
    cp "$WHEEL" "$work/dist/"
    wheel=$(ls "$work"/dist/acp_fast-*-"$tag"-"$tag"-manylinux*.whl)
    echo "testing $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
else
    started=$SECONDS
    maturin build --quiet --release --zig --compatibility manylinux2014 --interpreter "$python" \
        --out "$work/dist"
    wheel=$(ls "$work"/dist/acp_fast-*-"$tag"-"$tag"-manylinux*.whl)
    echo "built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB) in $((SECONDS - started)) s"
fi
python scripts/check_dist.py "$wheel"

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
# The wheel itself, never a build from source; the test extras from PyPI.
"$work/venv/bin/python" -m pip install --quiet --only-binary acp-fast "$wheel[test,interop]"

# PATH without any directory that holds cargo or rustc.
clean_path=$work/venv/bin
IFS=: read -ra dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
    if [ -n "$dir" ] && [ ! -e "$dir/cargo" ] && [ ! -e "$dir/rustc" ] \
        && [ "$dir" != "${VIRTUAL_ENV:-}/bin" ]; then
        clean_path=$clean_path:$dir
    fi
done
in_venv() { env -u VIRTUAL_ENV PATH="$clean_path" CARGO_HOME=/nonexistent RUSTUP_HOME=/nonexistent "$@"; }
in_venv sh -c '! command -v cargo && ! command -v rustc' >/dev/null
in_venv python - "$work/venv" <<'EOF'
import os, sys
import acp_fast, acp_fast._core
venv = os.path.realpath(sys.argv[1])
for module in (acp_fast, acp_fast._core):
    where = os.path.realpath(module.__file__)
    assert where.startswith(venv + os.sep), f"{module.__name__} imported from {where}"
print(f"testing acp_fast from {os.path.dirname(acp_fast.__file__)}")
EOF

in_venv python -m pytest -q -p no:cacheprovider "$@"

started=$SECONDS
for round in $(seq "$REPEAT"); do
    if ! in_venv python -m pytest -q -p no:cacheprovider -x \
        tests/faults/test_host.py::test_interpreter_exit_with_live_clients >"$work/exit.log" 2>&1; then
        cat "$work/exit.log"
        echo "interpreter-exit cases failed in round $round of $REPEAT ($tag)" >&2
        exit 1
    fi
done
echo "interpreter-exit cases: $REPEAT rounds without a failure ($tag, $((SECONDS - started)) s)"
