"""Spark's lz4 event-log codec, written as lz4-java's ``LZ4BlockOutputStream`` does, for the readers' tests."""

from __future__ import annotations

import io

from trspark.eventlog import LZ4_MAGIC

#: The empty block that ends the stream (``LZ4BlockOutputStream.finish``).
END_MARK = LZ4_MAGIC + bytes([0x10]) + bytes(12)


def lz4_block_stream(data: bytes, block: int = 64 * 1024) -> bytes:
    """``data`` as lz4-java's ``LZ4BlockOutputStream`` writes it (Spark's lz4 codec), checksums zero."""
    import lz4.block

    out = io.BytesIO()
    for i in range(0, len(data), block):
        chunk = data[i:i + block]
        body = lz4.block.compress(chunk, store_size=False)
        out.write(LZ4_MAGIC + bytes([0x20 | 4]) + len(body).to_bytes(4, "little")
                  + len(chunk).to_bytes(4, "little") + bytes(4) + body)
    out.write(END_MARK)
    return out.getvalue()
