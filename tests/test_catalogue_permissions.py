"""The failure catalogue's unwritable cases, as root, run without switching user: root without
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH against a folder of another uid. So they do not depend on where the
checkout and its interpreter live (a clone under a private folder, as /root is, is out of another uid's reach).
"""

from __future__ import annotations

import os

import pytest

from tests.catalogue_run import WAYS, Unprivileged, _probe, unprivileged
from tests.catalogue_setups import NOBODY

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="as another user the cases use plain modes (chmod)")


def test_as_root_a_way_without_the_permission_is_found_and_it_is_not_a_user_switch():
    way = unprivileged()
    assert isinstance(way, Unprivileged), way
    assert way is WAYS[0] and "--reuid" not in " ".join(way.prefix), way  # root, its capabilities dropped


def test_the_probe_refuses_a_way_that_keeps_roots_permissions():
    """Negative control: root with its capabilities writes into another uid's folder and reads its file."""
    why = _probe(Unprivileged("plain root", (), NOBODY))
    assert why is not None and why.startswith("plain root: permitted: "), why
