import gc

import pytest


@pytest.fixture(autouse=True)
def _collect_garbage():
    """Mappings of closed stores go away promptly, so temp dirs can be removed between tests."""
    yield
    gc.collect()
