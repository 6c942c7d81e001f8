"""Hypothesis: whatever the lines look like, a journal of either kind gives back every record in
order, each envelope exactly as given."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from acp_fast import journal
from hypothesis import given, settings
from hypothesis import strategies as st

from .kit import make, update

# JSON values, as agents write them: any spacing, escaped or raw non-ASCII, any key order.
_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def json_lines(draw: st.DrawFn) -> str:
    body = draw(st.dictionaries(st.text(max_size=6), _values, max_size=4))
    body["params"] = {"sessionId": draw(st.text(max_size=8)), "update": {"sessionUpdate": "x"}}
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,", " :\t")]))
    return json.dumps(body, ensure_ascii=draw(st.booleans()), separators=separators)


# Any text without a newline (what the line reader can hand over), surrogates excluded.
_any_line = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=40
)
_event = st.one_of(
    st.tuples(st.just("update"), json_lines()),
    st.tuples(st.just("sent"), json_lines()),
    st.tuples(st.just("received"), json_lines() | _any_line),
)


@settings(max_examples=60, deadline=None)
@given(events=st.lists(_event, max_size=12), kind=st.sampled_from(["jsonl", "sqlite"]))
def test_every_record_comes_back_exactly(events: list[tuple[str, str]], kind: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "j"
        sequence = 0
        with make(kind, path, "never") as j:
            for what, line in events:
                if what == "update":
                    sequence += 1
                    j.on_update(update(sequence, envelope=line))
                elif what == "sent":
                    j.on_sent(line)
                else:
                    j.on_received(line)
        found: list[Any] = list(journal.read(path))
    assert [(r.kind.value, r.envelope) for r in found] == events
    assert [r.number for r in found] == list(range(1, len(events) + 1))
    assert [r.update_sequence for r in found if r.kind == "update"] == list(range(1, sequence + 1))
