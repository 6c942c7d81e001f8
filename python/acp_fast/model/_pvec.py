"""A persistent vector: a 32-way trie with path copying (append and set copy O(log32 n) nodes).

The fold keeps tool calls in one, so replacing a call in a long session copies a few small
nodes instead of the whole list, and every older state keeps its own view.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_BITS = 5
_WIDTH = 1 << _BITS
_MASK = _WIDTH - 1


def _path(shift: int, item: Any) -> list[Any]:
    node: list[Any] = [item]
    while shift > 0:
        node = [node]
        shift -= _BITS
    return node


def _push(node: list[Any], shift: int, i: int, item: Any) -> list[Any]:
    new = list(node)
    if shift == 0:
        new.append(item)
        return new
    j = (i >> shift) & _MASK
    if j < len(node):
        new[j] = _push(node[j], shift - _BITS, i, item)
    else:
        new.append(_path(shift - _BITS, item))
    return new


def _set(node: list[Any], shift: int, i: int, item: Any) -> list[Any]:
    new = list(node)
    if shift == 0:
        new[i & _MASK] = item
    else:
        j = (i >> shift) & _MASK
        new[j] = _set(node[j], shift - _BITS, i, item)
    return new


class PVec(Generic[T]):
    __slots__ = ("_n", "_root", "_shift")

    def __init__(self, root: list[Any] | None = None, n: int = 0, shift: int = 0) -> None:
        self._root = root
        self._n = n
        self._shift = shift

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> T:
        if not 0 <= i < self._n:
            raise IndexError("PVec index out of range")
        node: Any = self._root
        shift = self._shift
        while shift > 0:
            node = node[(i >> shift) & _MASK]
            shift -= _BITS
        item: T = node[i & _MASK]
        return item

    def appended(self, item: T) -> PVec[T]:
        root, n, shift = self._root, self._n, self._shift
        if root is None:
            return PVec([item], 1, 0)
        if n == _WIDTH << shift:  # full: grow a level
            return PVec([root, _path(shift, item)], n + 1, shift + _BITS)
        return PVec(_push(root, shift, n, item), n + 1, shift)

    def replaced(self, i: int, item: T) -> PVec[T]:
        if not 0 <= i < self._n:
            raise IndexError("PVec index out of range")
        assert self._root is not None
        return PVec(_set(self._root, self._shift, i, item), self._n, self._shift)

    def __iter__(self) -> Iterator[T]:
        def walk(node: list[Any], shift: int) -> Iterator[Any]:
            if shift == 0:
                yield from node
            else:
                for child in node:
                    yield from walk(child, shift - _BITS)

        if self._root is not None:
            yield from walk(self._root, self._shift)
