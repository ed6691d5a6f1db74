"""Type stubs of the Rust extension module (checked with mypy.stubtest)."""

__version__: str

def error_codes() -> list[tuple[int, str, bool]]: ...

# --- record batch codec ---------------------------------------------------------
from typing import Any, Iterable, Literal, Optional, Sequence, Tuple, Union

_Bytesish = Union[bytes, bytearray, memoryview, str]
_Headers = Union[Sequence[Tuple[str, Optional[_Bytesish]]], dict[str, Optional[_Bytesish]]]

class Record:
    offset: int
    timestamp_ms: int
    timestamp_type: int  # -1 none (magic 0), 0 CreateTime, 1 LogAppendTime
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list[tuple[str, Optional[bytes]]]
    magic: int
    compression: str
    producer_id: int
    producer_epoch: int
    sequence: int
    partition_leader_epoch: int
    is_transactional: bool
    is_control: bool

def encode_record_batch(
    records: Iterable[Any],
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] | str = "none",
    base_offset: int = 0,
    *,
    compression_level: Optional[int] = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
) -> bytes: ...
def decode_record_batch(
    data: bytes,
    *,
    verify_crc: bool = True,
    include_control: bool = False,
    max_decompressed: int = 104857600,
) -> list[Record]: ...
