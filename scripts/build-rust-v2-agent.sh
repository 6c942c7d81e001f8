#!/usr/bin/env bash
# Builds the Rust SDK's ACP v2 example agent (`simple_agent_v2` of the crate
# agent-client-protocol 5.2.0, features process, stdio, unstable_protocol_v2) into the agents'
# cache dir ($ACP_FAST_AGENTS, default $HOME/.cache/acp-fast-agents):
# $root/rust-sdk-v2/simple_agent_v2.
# The v2 interop tests drive it as a v2 agent written by others (design/protocol-now.md §4).
#
# The crate comes from crates.io through cargo (a throwaway project that depends on it), and the
# example is built from that downloaded source in a copy under the cache dir: nothing of it enters
# the repository. The crate's Cargo.lock pins versions of its dependencies that the registry no
# longer serves (jiff-static 0.2.42), so the copy is built without it. Idempotent: skipped when
# the binary of this version and these features is there (VERSION, FEATURES). Needs cargo and
# crates.io; runs without a terminal or standard input. .ci/run runs it in the background.
set -euo pipefail

version="5.2.0"
features="process,stdio,unstable_protocol_v2"
home="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
root="${ACP_FAST_AGENTS:-$home/.cache/acp-fast-agents}"
dest="$root/rust-sdk-v2"
binary="$dest/simple_agent_v2"

if [ -x "$binary" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$version" ] \
  && [ "$(cat "$dest/FEATURES" 2>/dev/null)" = "$features" ]; then
  echo "build-rust-v2-agent: simple_agent_v2 $version ($features) already in $dest"
  exit 0
fi
command -v cargo >/dev/null 2>&1 || { echo "build-rust-v2-agent: cargo is not on PATH" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/probe/src"
cat >"$work/probe/Cargo.toml" <<TOML
[package]
name = "acp-fast-v2-probe"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
agent-client-protocol = "=$version"
TOML
echo 'fn main() {}' >"$work/probe/src/main.rs"
manifest="$(cd "$work/probe" && cargo metadata --format-version 1 </dev/null |
  python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "agent-client-protocol":
        print(p["manifest_path"])')"
[ -n "$manifest" ] || { echo "build-rust-v2-agent: agent-client-protocol $version not found" >&2; exit 1; }

rm -rf "$dest"
mkdir -p "$dest"
cp -r "$(dirname "$manifest")" "$dest/src"
rm -f "$dest/src/Cargo.lock"
echo "build-rust-v2-agent: building simple_agent_v2 of agent-client-protocol $version"
if ! (cd "$dest/src" && cargo build --quiet --release --example simple_agent_v2 \
  --features "$features" --target-dir "$dest/target" </dev/null); then
  rm -rf "$dest"
  echo "build-rust-v2-agent: cargo could not build simple_agent_v2 of agent-client-protocol" \
    "$version (features $features); its errors are above" >&2
  exit 1
fi
cp "$dest/target/release/examples/simple_agent_v2" "$binary"
rm -rf "$dest/target"
echo "$features" >"$dest/FEATURES"
echo "$version" >"$dest/VERSION"
echo "build-rust-v2-agent: done ($binary)"
