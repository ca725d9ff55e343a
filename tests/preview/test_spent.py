"""The memory of used link nonces: a replay is caught, it forgets only expired links, and
when full it refuses rather than forgetting a live one."""

from __future__ import annotations

import pytest

from burrow.preview.spent import SpentLinks, TooManyLinks


def test_a_nonce_is_spent_once() -> None:
    spent = SpentLinks()
    assert spent.spend("a", expires=200, now=100)
    assert not spent.spend("a", expires=200, now=150)
    assert spent.spend("b", expires=200, now=150)


def test_expired_links_are_forgotten_and_the_memory_stays_bounded() -> None:
    spent = SpentLinks(capacity=3)
    for index in range(3):
        assert spent.spend(f"n{index}", expires=100 + index, now=50)
    with pytest.raises(TooManyLinks):
        spent.spend("n3", expires=200, now=99)  # all three still live: none may be dropped
    assert not spent.spend("n0", expires=100, now=99)
    assert spent.spend("n3", expires=200, now=101)  # n0 and n1 have expired
    assert len(spent) == 2
    for now in range(200, 1200):  # a steady stream of links never grows it
        assert spent.spend(f"m{now}", expires=now + 2, now=now)
    assert len(spent) <= 3
