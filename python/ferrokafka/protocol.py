"""Wire-protocol pieces exposed for tests and tools.

Request classes (for ``NetworkClient``) and the record batch codec
(``encode_record_batch`` / ``decode_record_batch``), all implemented in Rust.
"""

from __future__ import annotations

from . import _core  # noqa: F401

__all__: list[str] = []

# --- record batch codec (section owned by the codec work) ---

# --- request classes (section owned by the network work) ---
