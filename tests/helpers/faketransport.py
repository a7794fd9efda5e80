"""A stand-in for the asyncio transport under a real ``ClientConnection`` (in-process tests and CPU
benches drive the connection with ``data_received`` and read what it wrote from ``buf``)."""

from __future__ import annotations


class BufferTransport:
    """What ClientConnection uses of an asyncio transport; writes are kept in ``buf``."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def write(self, data) -> None:
        self.buf += data

    def writelines(self, data) -> None:
        for d in data:
            self.buf += d

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def get_extra_info(self, key, default=None):
        return ("127.0.0.1", 1) if key == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass
