#!/usr/bin/env bash
# Installs the real ACP agents the interop tests drive, at pinned versions, into a cache dir
# (default $HOME/.cache/acp-fast-agents; override with ACP_FAST_AGENTS), one npm prefix per
# agent, and the Python SDK (agent-client-protocol) into the active Python environment.
# Idempotent: an agent already installed at its pinned version is skipped.
# Needs node (>= 20) and npm; runs as root, without a terminal or standard input.
#
# Besides the pins of August it installs the current SDKs, which our own ports of their test
# agents run on (tests/interop/agents/: the TypeScript SDK 2.4 no longer ships its example agent;
# the Python SDK 1.0 gets its own virtualenv, since the project's pins 0.12.1). With
# ACP_INTEROP_CURRENT=1 it also installs today's releases of the real agents (claude-agent-acp
# 0.101, codex-acp 2.6, opencode 1.18), which the interop tests then drive too; .ci/run does not
# set it yet (tests/interop/README.md says what each of them still fails).
set -euo pipefail

home="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
root="${ACP_FAST_AGENTS:-$home/.cache/acp-fast-agents}"
python="${PYTHON:-$(command -v python || command -v python3)}"

# name | npm package@version (the tests find each agent at $root/<name>/node_modules/...)
agents=(
  "gemini|@google/gemini-cli@0.61.0"
  "claude-code-acp|@zed-industries/claude-code-acp@0.16.2"
  "claude-agent-acp|@agentclientprotocol/claude-agent-acp@0.49.0"
  "codex-acp|@zed-industries/codex-acp@0.16.0"
  "ts-sdk|@agentclientprotocol/sdk@0.14.1"
  "ts-sdk-2|@agentclientprotocol/sdk@2.4.0"
)
if [ "${ACP_INTEROP_CURRENT:-}" = 1 ]; then
  agents+=(
    "claude-agent-acp-101|@agentclientprotocol/claude-agent-acp@0.101.0"
    "codex-acp-2|@agentclientprotocol/codex-acp@2.6.0"
    "opencode|opencode-ai@1.18.33"
  )
fi
python_sdk="agent-client-protocol==0.12.1"
# The Python SDK 1.0 in a virtualenv of its own under $root (its agent runs on that Python).
python_sdk_current="agent-client-protocol==1.0.0rc3"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-agents: $tool is not on PATH; install Node.js 20+ and npm first" >&2
    exit 1
  fi
done

installed_version() {  # prefix package -> the installed version, or nothing
  local manifest="$1/node_modules/$2/package.json"
  [ -f "$manifest" ] || return 0
  node -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$manifest"
}

mkdir -p "$root"
for entry in "${agents[@]}"; do
  name="${entry%%|*}"
  spec="${entry#*|}"
  package="${spec%@*}"
  version="${spec##*@}"
  prefix="$root/$name"
  if [ "$(installed_version "$prefix" "$package")" = "$version" ]; then
    echo "install-agents: $spec already in $prefix"
    continue
  fi
  echo "install-agents: installing $spec into $prefix"
  rm -rf "$prefix"
  mkdir -p "$prefix"
  printf '{"name":"acp-fast-agent-%s","private":true}\n' "$name" >"$prefix/package.json"
  (cd "$prefix" && npm install --no-audit --no-fund --no-update-notifier --loglevel=error \
    --save-exact "$spec" </dev/null)
  got="$(installed_version "$prefix" "$package")"
  if [ "$got" != "$version" ]; then
    echo "install-agents: $package installed as '$got', expected $version" >&2
    exit 1
  fi
done

if [ -z "$python" ]; then
  echo "install-agents: no python found; $python_sdk not installed (the py-sdk tests will say so)"
elif ! "$python" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  echo "install-agents: $python is not in a virtualenv; $python_sdk not installed" \
    "(activate the project's .venv, or set PYTHON, and run again)"
elif "$python" -c 'import importlib.metadata as m, sys
sys.exit(m.version("agent-client-protocol") != sys.argv[1])' "${python_sdk#*==}" 2>/dev/null; then
  echo "install-agents: $python_sdk already installed"
else
  echo "install-agents: pip install $python_sdk"
  "$python" -m pip install --quiet --disable-pip-version-check "$python_sdk" </dev/null
fi
venv="$root/py-sdk-1"
if [ -z "$python" ]; then
  echo "install-agents: no python found; $python_sdk_current not installed"
elif "$venv/bin/python" -c 'import importlib.metadata as m, sys
sys.exit(m.version("agent-client-protocol") != sys.argv[1])' "${python_sdk_current#*==}" 2>/dev/null
then
  echo "install-agents: $python_sdk_current already in $venv"
else
  echo "install-agents: $python_sdk_current into $venv"
  rm -rf "$venv"
  # The base interpreter, not the project's virtualenv: a venv made from a venv is fine, but
  # its site-packages must not see the project's 0.12.1.
  base="$("$python" -c 'import sys; print(sys.base_prefix)')/bin/python3"
  "$base" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$python_sdk_current" \
    </dev/null
fi
echo "install-agents: done ($root)"
