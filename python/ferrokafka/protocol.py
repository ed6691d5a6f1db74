"""Wire-protocol pieces exposed for tests and tools.

Request classes (for ``NetworkClient``) and the record batch codec
(``encode_record_batch`` / ``decode_record_batch``), all implemented in Rust.
"""

from __future__ import annotations

from . import _core  # noqa: F401

__all__: list[str] = []

# --- record batch codec (section owned by the codec work) ---

from ._core import Record, decode_record_batch, encode_record_batch  # noqa: E402

#: ``compression=`` names accepted by :func:`encode_record_batch` (Java's
#: ``compression.type`` values).
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")

__all__ += ["Record", "decode_record_batch", "encode_record_batch", "COMPRESSION_TYPES"]

# --- request classes (section owned by the network work) ---
