"""Tiny helpers the Rust core calls on an asyncio loop's thread."""


def settle(afut, setter, value):
    # The awaiting task may have been cancelled meanwhile; setting a result on
    # a cancelled asyncio future raises InvalidStateError.
    if not afut.done():
        setter(value)


def log_callback_error(callback, exc):
    """A user callback raised: log it (with traceback) and carry on."""
    import logging

    logging.getLogger("ferrokafka").error(
        "delivery callback %r raised", callback, exc_info=(type(exc), exc, exc.__traceback__)
    )
