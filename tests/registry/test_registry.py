"""The ACP registry (protocol-now.md §3): reading it as hostile input, how each distribution
starts, binaries installed once with their sha256 checked, and the agent profiles."""

from __future__ import annotations

import json
import os
import pickle
import stat
from pathlib import Path

import acp_fast
import pytest
from acp_fast import registry
from acp_fast.registry import RegistryError

from .support import DEMO_SCRIPT, entry, serve, sha256, tar_gz, write_registry, zip_bytes

HERE = registry.current_platform()
NPX = {"npx": {"package": "@scope/agent@1.2.3", "args": ["--acp"], "env": {"A": "1"}}}


def test_a_registry_is_read_and_each_bad_entry_is_refused_with_its_reason(tmp_path: Path) -> None:
    path = write_registry(
        tmp_path / "r.json",
        entry("good", NPX),
        entry("../../etc", NPX),
        entry("-rf", NPX),
        entry("no-dist", {}),
        entry("bad-sha", {"binary": {HERE: {"archive": "a.tgz", "cmd": "x", "sha256": "zz"}}}),
        entry("escape", {"binary": {HERE: {"archive": "a.tgz", "cmd": "../../bin/sh"}}}),
        entry("dash-package", {"npx": {"package": "--registry=http://evil"}}),
        entry("bad-env", {"npx": {"package": "p", "env": {"A=B": "x"}}}),
        entry("good", {"uvx": {"package": "other"}}),
        "not an object",
    )
    loaded = registry.load(path)
    assert list(loaded.entries) == ["good"]
    assert loaded.entries["good"].distribution.npx is not None  # the first "good" is kept
    refused = loaded.refused
    assert "sha256" in refused["bad-sha"] and "inside the archive" in refused["escape"]
    assert "starts with '-'" in refused["dash-package"] and "bad variable" in refused["bad-env"]
    assert "no npx, uvx or binary" in refused["no-dist"] and "twice" in refused["good"]
    assert any(key.startswith("#") for key in refused)  # ids that are not ids are not keys
    with pytest.raises(RegistryError, match="not usable: the distribution has no"):
        loaded.get("no-dist")
    with pytest.raises(RegistryError, match=r"no agent 'nope' .*known: good"):
        loaded.get("nope")


@pytest.mark.parametrize(
    "text, message",
    [
        ("[]", 'no "agents" list'),
        ('{"agents": 3}', 'no "agents" list'),
        ("{", "not JSON"),
        ("[" * 5000 + "]" * 5000, "not JSON"),  # too deep: refused, never a RecursionError
        ('{"agents": [], "x": NaN}', "not JSON"),
    ],
)
def test_what_is_not_a_registry_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(RegistryError, match=message):
        registry.load(path)


def test_reading_is_bounded_and_refuses_what_is_not_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(RegistryError, match="not a regular file"):
        registry.load(fifo)  # would block forever if opened for a blocking read
    monkeypatch.setattr(registry, "MAX_REGISTRY_BYTES", 100)
    big = write_registry(tmp_path / "big.json", *(entry(f"a{i}", NPX) for i in range(5)))
    with pytest.raises(RegistryError, match="at most 100"):
        registry.load(big)
    with pytest.raises(RegistryError, match="only paths, file://"):
        registry.load("ftp://127.0.0.1/registry.json")
    with pytest.raises(RegistryError, match="cannot read"):
        registry.load(tmp_path / "missing.json")


def test_a_registry_is_read_from_a_file_url_and_over_http(tmp_path: Path) -> None:
    path = write_registry(tmp_path / "r.json", entry("good", NPX))
    assert list(registry.load(path.as_uri()).entries) == ["good"]
    with serve() as server:
        server.files["/registry.json"] = path.read_bytes()
        assert list(registry.load(server.url + "/registry.json").entries) == ["good"]
        with pytest.raises(RegistryError, match="404"):
            registry.load(server.url + "/nothing.json")


def test_npx_and_uvx_start_as_the_registry_format_says() -> None:
    def launch(distribution: dict[str, object]) -> tuple[str, tuple[str, ...]]:
        parsed = registry.load(_registry_object(entry("a", distribution)))
        got = registry.resolve(parsed.get("a"))
        return got.command, got.args

    assert launch(NPX) == ("npx", ("--yes", "@scope/agent@1.2.3", "--acp"))
    with_cmd = {"npx": {"package": "@s/p@1", "cmd": "p-acp", "args": ["x"]}}
    assert launch(with_cmd) == ("npx", ("--yes", "--package", "@s/p@1", "p-acp", "x"))
    assert launch({"uvx": {"package": "pkg==2"}}) == ("uvx", ("pkg==2",))
    uvx_cmd = {"uvx": {"package": "pkg==2", "cmd": "serve-acp"}}
    assert launch(uvx_cmd) == ("uvx", ("--from", "pkg==2", "serve-acp"))


def _registry_object(*entries: dict[str, object]) -> registry.Registry:
    from acp_fast.registry._format import parse

    return parse({"version": "1", "agents": list(entries)}, "test")


def test_a_binary_is_downloaded_once_checked_and_started(tmp_path: Path) -> None:
    archive = tar_gz({"demo/bin/agent": DEMO_SCRIPT})
    cache = tmp_path / "cache"
    with serve() as server:
        server.files["/demo.tar.gz"] = archive
        target = {"archive": server.url + "/demo.tar.gz", "cmd": "./demo/bin/agent"}
        target["sha256"] = sha256(archive)
        reg = write_registry(tmp_path / "r.json", entry("demo", {"binary": {HERE: target}}))
        seen: list[int] = []
        spec = acp_fast.AgentSpec.from_registry(
            "demo", registry=reg, cache_dir=cache, progress=lambda done, total: seen.append(done)
        )
        again = acp_fast.AgentSpec.from_registry("demo", registry=reg, cache_dir=cache)
        assert server.hits["/demo.tar.gz"] == 1  # installed once
    assert seen and seen[-1] == len(archive)
    assert spec.command == again.command and Path(spec.command).is_relative_to(cache)
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    with acp_fast.Client(spec.command, spec.args, env=spec.environment(), cwd=tmp_path) as client:
        client.start(timeout=30)
        assert "hello" in client.prompt("hello", timeout=30).lower()


def test_a_download_whose_sha256_differs_is_refused_and_nothing_is_installed(
    tmp_path: Path,
) -> None:
    archive = tar_gz({"agent": DEMO_SCRIPT})
    target = tmp_path / "agent.tgz"
    target.write_bytes(archive)
    wrong = sha256(archive + b"tampered")
    binary = {HERE: {"archive": str(target), "cmd": "agent", "sha256": wrong}}
    reg = write_registry(tmp_path / "r.json", entry("demo", {"binary": binary}))
    with pytest.raises(RegistryError, match=f"sha256 {sha256(archive)} does not match.*{wrong}"):
        acp_fast.AgentSpec.from_registry("demo", registry=reg, cache_dir=tmp_path / "c")
    assert [p.name for p in (tmp_path / "c" / "demo").iterdir()] == []


def test_a_missing_platform_says_which_exist(tmp_path: Path) -> None:
    other = {"darwin-aarch64": {"archive": "a.tgz", "cmd": "x"}}
    reg = write_registry(tmp_path / "r.json", entry("mac", {"binary": other}))
    with pytest.raises(RegistryError, match=f"no build for {HERE}.*darwin-aarch64"):
        acp_fast.AgentSpec.from_registry("mac", registry=reg, cache_dir=tmp_path / "c")


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("escape.tgz", tar_gz({"../../outside": "x", "agent": DEMO_SCRIPT}), "outside"),
        ("abs.tgz", tar_gz({"/tmp/acp-fast-abs": "x", "agent": DEMO_SCRIPT}), "outside"),
        ("link.tgz", tar_gz({"x": "x"}, links={"agent": "/bin/sh"}), "link to an absolute path"),
        ("uplink.tgz", tar_gz({"x": "x"}, links={"agent": "../../../bin/sh"}), "outside"),
        ("escape.zip", zip_bytes({"../outside": "x", "agent": DEMO_SCRIPT}), "outside"),
        ("link.zip", zip_bytes({"x": "x"}, links={"agent": "/bin/sh"}), "symlink"),
        ("none.tgz", tar_gz({"other": "x"}), "not in the archive"),
        ("junk.tgz", b"not an archive at all", "cannot be unpacked"),
    ],
)
def test_hostile_archives_are_refused(tmp_path: Path, name: str, data: bytes, message: str) -> None:
    archive = tmp_path / name
    archive.write_bytes(data)
    binary = {HERE: {"archive": str(archive), "cmd": "agent"}}
    reg = write_registry(tmp_path / "r.json", entry("evil", {"binary": binary}))
    with pytest.raises(RegistryError, match=message):
        acp_fast.AgentSpec.from_registry("evil", registry=reg, cache_dir=tmp_path / "c")
    assert not (tmp_path / "outside").exists() and not Path("/tmp/acp-fast-abs").exists()
    assert [p.name for p in (tmp_path / "c" / "evil").iterdir()] == []


def test_a_bare_program_is_its_own_command(tmp_path: Path) -> None:
    program = tmp_path / "download"
    program.write_text(DEMO_SCRIPT)
    binary = {HERE: {"archive": str(program), "cmd": "demo-agent"}}
    reg = write_registry(tmp_path / "r.json", entry("bare", {"binary": binary}))
    spec = acp_fast.AgentSpec.from_registry("bare", registry=reg, cache_dir=tmp_path / "c")
    assert Path(spec.command).name == "demo-agent" and os.access(spec.command, os.X_OK)


def test_a_planted_cache_directory_is_refused(tmp_path: Path) -> None:
    program = tmp_path / "download"
    program.write_text(DEMO_SCRIPT)
    binary = {HERE: {"archive": str(program), "cmd": "agent"}}
    reg = write_registry(tmp_path / "r.json", entry("demo", {"binary": binary}))
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    with pytest.raises(RegistryError, match="writable by others"):
        acp_fast.AgentSpec.from_registry("demo", registry=reg, cache_dir=shared)
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "demo").mkdir(mode=0o700)
    os.symlink(tmp_path / "elsewhere", tmp_path / "real" / "demo2")
    with pytest.raises(RegistryError, match="not a directory"):
        registry.resolve(
            _registry_object(entry("demo2", {"binary": binary})).get("demo2"),
            cache_dir=tmp_path / "real",
        )
    if os.geteuid() == 0:  # another user's directory (root can make one)
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 65534, 65534)
        with pytest.raises(RegistryError, match="belongs to uid 65534"):
            acp_fast.AgentSpec.from_registry("demo", registry=reg, cache_dir=theirs)


def test_profiles_are_data_and_from_registry_applies_them(tmp_path: Path) -> None:
    known = registry.profiles()
    assert {"claude-acp", "codex-acp", "opencode", "gemini"} <= set(known)
    assert known["codex-acp"].env["INITIAL_AGENT_MODE"] == "workspace-write"
    assert known["claude-acp"].ask_mode == "default"
    assert known["claude-acp"].asks_in("auto") is False
    assert known["claude-acp"].asks_in("default") is True
    assert known["claude-acp"].asks_in("something-new") is None
    distribution = {"npx": {"package": "@agentclientprotocol/codex-acp@2.6.0", "env": {"X": "1"}}}
    reg = _registry_object(entry("codex-acp", distribution))
    spec = acp_fast.AgentSpec.from_registry("codex-acp", registry=reg, env={"HOME": "/h"})
    assert spec.profile is known["codex-acp"]
    assert spec.environment() == {"HOME": "/h", "X": "1", "INITIAL_AGENT_MODE": "workspace-write"}
    bare = acp_fast.AgentSpec.from_registry("codex-acp", registry=reg, profile=None)
    assert bare.profile is None and bare.add_env == {"X": "1"}
    inherited = bare.environment()
    assert inherited is not None and inherited["X"] == "1" and "PATH" in inherited
    assert acp_fast.AgentSpec("agent").environment() is None
    copy = pickle.loads(pickle.dumps(spec))  # specs travel to fleet hosts
    assert copy == spec and copy.profile == spec.profile


def test_the_ask_mode_is_chosen_only_when_offered() -> None:
    from acp_fast._agent_spec import ask_mode_to_set

    profile = registry.profiles()["claude-acp"]
    assert ask_mode_to_set(profile, "auto", ["auto", "default"]) == "default"
    assert ask_mode_to_set(profile, "default", ["auto", "default"]) is None
    assert ask_mode_to_set(profile, "auto", ["auto", "manual"]) is None  # modes changed
    assert ask_mode_to_set(None, "auto", ["default"]) is None


def test_profiles_json_is_well_formed() -> None:
    from importlib import resources

    raw = json.loads(resources.files("acp_fast.registry").joinpath("profiles.json").read_text())
    for agent_id, profile in raw.items():
        if agent_id.startswith("_"):
            continue
        assert registry.ID_PATTERN.fullmatch(agent_id)
        assert set(profile) <= {"agent", "ask_mode", "ask_modes", "autonomous_modes", "env", "note"}
        assert not set(profile["ask_modes"]) & set(profile["autonomous_modes"])
        assert profile["ask_mode"] is None or profile["ask_mode"] in profile["ask_modes"]
