"""Errors that reach a user as one clear message, never as a traceback."""


class CxlkvError(Exception):
    """Bad input or a failed operation the user can act on.

    The CLI prints ``cxlkv: error: <message>`` and exits with status 2.
    """


class TraceFormatError(CxlkvError, ValueError):
    """A trace file breaks the contract (missing key, bad dtype, out-of-range index...).

    The message names the key and, where there is one, the first bad event index.
    """

    def __init__(self, path, key, message, index=None):
        self.path, self.key, self.index = path, key, index
        where = f"key '{key}'" + (f", event {index}" if index is not None else "")
        super().__init__(f"{path}: {where}: {message}")
