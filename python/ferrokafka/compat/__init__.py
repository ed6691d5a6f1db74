"""Drop-in facades over ferrokafka's native API (docs/compat.md)."""
