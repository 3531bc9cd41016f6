# SPDX-License-Identifier: Apache-2.0
# Type stub of the podfeed package (the C extension's types included).
# tests/python/test_stub.py holds it to the module: every public name,
# member and parameter here is the module's, and the other way round.
import os
from typing import (Any, Dict, Iterator, List, Literal, Mapping, Optional, Sequence, Tuple,
                    Union, overload)

import numpy as np

_Paths = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]
_Feature = Union[str, np.dtype, Tuple[Union[str, np.dtype], int], Mapping[str, Any], "Image"]
_State = Union[Dict[str, Any], Sequence[Dict[str, Any]]]

STATE_FORMAT: str
__version__: str

class Error(Exception):
    errno: Optional[int]
    file: Optional[str]
    offset: Optional[int]
    offset_kind: Optional[str]
    frame: Optional[int]
    record: Optional[int]
    cause: Optional[str]

class DataError(Error): ...
class FileError(Error, OSError): ...
class ConfigError(Error, ValueError): ...
class BatchLimitError(Error, RuntimeError): ...

class Tensor:
    shape: Tuple[int, ...]
    __array_interface__: Dict[str, Any]
    def __dlpack__(self, *, stream: Optional[int] = ..., max_version: Any = ...,
                   dl_device: Any = ..., copy: Optional[bool] = ...) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

class Batch:
    valid: np.ndarray
    nvalid: int
    epoch: int
    step: int
    global_step: int
    epoch_start: bool
    epoch_end: bool
    released: bool
    cores: int
    per_core_batch: int
    block: Tuple[int, int]
    def __getitem__(self, key: str, /) -> np.ndarray: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def keys(self) -> List[str]: ...
    def items(self) -> List[Tuple[str, np.ndarray]]: ...
    def asdict(self) -> Dict[str, np.ndarray]: ...
    def core(self, core: int, /) -> Dict[str, np.ndarray]: ...
    def tensor(self, name: str, core: Optional[int] = ...) -> Tensor: ...
    def release(self) -> None: ...
    def __enter__(self) -> "Batch": ...
    def __exit__(self, *exc: Any) -> bool: ...

class Image:
    height: int
    width: int
    augment: str
    channels: int
    layout: str
    dtype: str
    mean: Any
    std: Any
    scale: Any
    ratio: Any
    flip: Optional[bool]
    max_pixels: Optional[int]
    def __init__(self, height: int, width: int,
                 augment: Literal["train", "eval", "resize"] = ..., *,
                 channels: Literal[1, 3] = ..., layout: Literal["nhwc", "nchw"] = ...,
                 dtype: Literal["uint8", "float32", "bfloat16"] = ...,
                 mean: Optional[Union[float, Sequence[float]]] = ...,
                 std: Optional[Union[float, Sequence[float]]] = ...,
                 scale: Optional[Tuple[float, float]] = ...,
                 ratio: Optional[Tuple[float, float]] = ...,
                 flip: Optional[bool] = ..., max_pixels: Optional[int] = ...) -> None: ...
    def spec(self) -> str: ...

class Source:
    paths: List[str]
    weight: float
    name: Optional[str]
    def __init__(self, paths: _Paths, weight: float = ..., name: Optional[str] = ...) -> None: ...

class Loader:
    host_index: int
    num_hosts: int
    host_source: str
    cores: int
    per_core_batch: int
    steps_per_epoch: int
    spec: str
    features: Tuple[str, ...]
    closed: bool
    held: int
    prefetch: int
    def __init__(self, paths: Union[_Paths, Source, Sequence[Source]], features: Union[str, Mapping[str, _Feature]],
                 per_core_batch: int, cores: int = ..., host_index: Optional[int] = ...,
                 num_hosts: Optional[int] = ..., seed: int = ..., epochs: int = ...,
                 shuffle: Union[bool, str] = ..., shuffle_window: Optional[int] = ..., remainder: str = ...,
                 on_corrupt: str = ..., memory_mib: float = ..., threads: Optional[int] = ...,
                 state: Optional[_State] = ..., prefetch: Optional[int] = ...,
                 max_steps: Optional[int] = ..., io_depth: Optional[int] = ...,
                 max_corrupt: Optional[int] = ..., quarantine: Optional[Union[str, os.PathLike]] = ...,
                 verify_records: bool = ..., direct_io: bool = ...,
                 io_backend: Optional[str] = ..., io_faults: Optional[str] = ...,
                 pack_length: Optional[int] = ..., pack_mode: str = ...,
                 pack_pool: Optional[int] = ...,
                 mix: str = ..., mix_stop: str = ..., source_feature: bool = ...,
                 frame_cache: Optional[int] = ..., mix_unit: str = ...,
                 skip_steps: int = ...) -> None: ...
    def __iter__(self) -> "Loader": ...
    def __next__(self) -> Batch: ...
    def __enter__(self) -> "Loader": ...
    def __exit__(self, *exc: Any) -> bool: ...
    def close(self) -> None: ...
    def metrics(self) -> Dict[str, Any]: ...
    @overload
    def report(self, format: Literal["dict"]) -> Dict[str, Any]: ...
    @overload
    def report(self, format: Literal["text", "json", "html"] = ...) -> str: ...
    def __len__(self) -> int: ...
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: _State) -> None: ...
    def records_of(self, step: int) -> List[Dict[str, Any]]: ...

def parse_spec(text: str) -> List[Dict[str, Any]]: ...
def host_identity(host_index: Optional[int] = ...,
                  num_hosts: Optional[int] = ...) -> Tuple[int, int, str]: ...
def inspect_state(state: _State) -> Any: ...
def describe_state(state: _State) -> str: ...
def plan(per_core_batch: int, cores: int, hosts: int, ref_global_batch: int = ...,
         ref_steps: int = ..., *, records: int = ..., epochs: int = ...,
         remainder: str = ..., ref_lr: float = ..., rule: str = ...,
         ref_warmup_steps: int = ...) -> Dict[str, Any]: ...
