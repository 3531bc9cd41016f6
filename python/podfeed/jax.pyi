# SPDX-License-Identifier: Apache-2.0
# Type stub of podfeed.jax (tests/python/test_stub.py holds it to the module).
from typing import Any, Dict, Optional, Tuple

import numpy as np

import podfeed

def local_data(batch: podfeed.Batch, name: str) -> np.ndarray: ...
def global_shape(batch: podfeed.Batch, name: str, num_hosts: int) -> Tuple[int, int]: ...
def global_arrays(batch: podfeed.Batch, sharding: Any,
                  num_hosts: Optional[int] = ...) -> Dict[str, Any]: ...
