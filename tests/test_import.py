"""What `import acp_fast` loads: the blocking client without asyncio (a CLI run or a blocking host
pays for it on every start), the asyncio client on first use of its names."""

from __future__ import annotations

import subprocess
import sys

import acp_fast


def test_import_leaves_asyncio_unloaded() -> None:
    code = (
        "import sys, acp_fast; "
        "assert 'asyncio' not in sys.modules, 'asyncio loaded by import acp_fast'; "
        "acp_fast.Client; "
        "assert 'asyncio' not in sys.modules; "
        "from acp_fast import AsyncClient; "
        "assert 'asyncio' in sys.modules; "
        "print(AsyncClient.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "acp_fast._async"


def test_asyncio_names_are_the_classes_and_listed() -> None:
    from acp_fast._async import AsyncClient, AsyncSession, Updates

    assert acp_fast.AsyncClient is AsyncClient
    assert acp_fast.AsyncSession is AsyncSession
    assert acp_fast.Updates is Updates
    for name in ("AsyncClient", "AsyncSession", "Updates"):
        assert name in acp_fast.__all__
        assert name in dir(acp_fast)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        acp_fast.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as error:
        assert "NoSuchName" in str(error)
    else:
        raise AssertionError("acp_fast.NoSuchName did not raise")
