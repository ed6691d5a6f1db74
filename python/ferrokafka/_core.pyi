"""Type stubs of the Rust extension module (checked with mypy.stubtest)."""

__version__: str

def error_codes() -> list[tuple[int, str, bool]]: ...
