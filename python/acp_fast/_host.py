"""The host side's glue for `Client` (design/host.md): the capability config as the core reads
it, and `observer.on_activity` fed `ClientActivity` records."""

from __future__ import annotations

from typing import Any

from ._types import ClientActivity, ClientCapabilityConfig, ClientMethod


def capability_tuple(config: ClientCapabilityConfig | None) -> tuple[Any, ...] | None:
    if config is None:
        return None
    if not isinstance(config, ClientCapabilityConfig):
        raise TypeError(f"capabilities must be a ClientCapabilityConfig (got {config!r})")
    return (
        config.read_text_file,
        config.write_text_file,
        config.terminal,
        list(config.additional_directories),
        config.allow_any_path,
        config.terminal_output_bytes,
        config.read_missing_as_empty,
    )


def activity_callback(on_activity: Any) -> Any:
    """`observer.on_activity` fed `ClientActivity` records built from the core's tuples."""
    if on_activity is None:
        return None

    def record(row: tuple[Any, ...]) -> None:
        method, allowed, path, command, terminal_id, reason, session_id, code = row
        on_activity(
            ClientActivity(
                ClientMethod(method), allowed, path, command, terminal_id, reason, session_id, code
            )
        )

    return record
