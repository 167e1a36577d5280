import os
import sys

import pytest

from rocketq.controller.etcd_cluster import LocalEtcdCluster, etcd_missing

# the run checker shared with the cluster tests
sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "cluster"))


def pytest_collection_modifyitems(config, items):
    """Every test here runs real etcd members: without Debian's etcd-server (which `make test` installs
    as root) they skip, saying so."""
    why = etcd_missing()
    if why:
        for item in items:
            if item.fspath.dirname == os.path.dirname(__file__):
                item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="session")
def etcd1(tmp_path_factory):
    """A one-member etcd for the in-process tests (each uses its own key prefix)."""
    with LocalEtcdCluster(tmp_path_factory.mktemp("etcd1"), members=1) as cluster:
        yield cluster
