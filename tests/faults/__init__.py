"""The fault suite of issue 4: hostile agents, faults and host events, each with its documented
outcome (see docs/reliability.md)."""
