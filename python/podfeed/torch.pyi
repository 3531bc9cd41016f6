# SPDX-License-Identifier: Apache-2.0
# Type stub of podfeed.torch (tests/python/test_stub.py holds it to the module).
from typing import Any, Dict, Iterator, Optional

import torch
import torch.utils.data

import podfeed

class IterableDataset(torch.utils.data.IterableDataset):
    loader: podfeed.Loader
    pin_memory: bool
    with_valid: bool
    def __init__(self, *args: Any, pin_memory: bool = ..., with_valid: bool = ...,
                 **kwargs: Any) -> None: ...
    def __iter__(self) -> Iterator[Dict[str, torch.Tensor]]: ...
    def state_dict(self) -> Optional[Dict[str, Any]]: ...
    def load_state_dict(self, state: Any) -> None: ...
