"""Small, valid files of every kind agac attaches — PNG, JPEG, GIF, WebP, PDF — made from
nothing but the standard library, deterministic for a given seed.

agac's tests, benchmarks and the bundled ``invoices`` example make their documents and
pictures here, so nothing binary needs to be committed and a user's own tests can do the
same. The images are real (their headers give their size, a viewer opens them); their
pixels are a pattern, not a picture.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

__all__ = [
    "gif_bytes",
    "jpeg_bytes",
    "pdf_bytes",
    "pdf_of_size",
    "png_bytes",
    "png_of_size",
    "webp_bytes",
]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(width: int = 8, height: int = 8, seed: int = 0, *, noise: bool = False) -> bytes:
    """An RGB PNG of ``width`` × ``height``: a colour from ``seed``, or (``noise``) pixels
    from a hash stream, which do not compress — for files of a chosen size."""
    row_len = width * 3
    if noise:
        raw = bytearray()
        block = hashlib.sha256(str(seed).encode()).digest()
        need = (row_len + 1) * height
        while len(raw) < need:
            block = hashlib.sha256(block).digest()
            raw += block
        rows = b"".join(
            b"\x00" + bytes(raw[i * (row_len + 1) + 1 : (i + 1) * (row_len + 1)])
            for i in range(height)
        )
    else:
        colour = hashlib.sha256(str(seed).encode()).digest()[:3]
        rows = (b"\x00" + colour * width) * height
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", ihdr)
        + _chunk(b"IDAT", zlib.compress(rows, 1))
        + _chunk(b"IEND", b"")
    )


def png_of_size(size: int, seed: int = 0) -> bytes:
    """A noise PNG of about ``size`` bytes (square, at least 8 × 8)."""
    side = max(8, int((size / 3) ** 0.5))
    return png_bytes(side, side, seed, noise=True)


def gif_bytes(width: int = 4, height: int = 4, seed: int = 0) -> bytes:
    """A one-colour GIF89a of ``width`` × ``height``."""
    colour = hashlib.sha256(str(seed).encode()).digest()[:3]
    header = b"GIF89a" + struct.pack("<HHBBB", width, height, 0x80, 0, 0)
    palette = colour + b"\x00\x00\x00"
    image = b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0)
    # LZW, minimum code size 2: clear, one index per pixel (0), end — in 3-bit codes.
    codes = [4] + [0] * (width * height) + [5]
    bits, nbits, out = 0, 0, bytearray()
    for code in codes:
        bits |= code << nbits
        nbits += 3
        while nbits >= 8:
            out.append(bits & 0xFF)
            bits >>= 8
            nbits -= 8
    if nbits:
        out.append(bits & 0xFF)
    blocks = b"".join(
        bytes([len(out[i : i + 255])]) + bytes(out[i : i + 255]) for i in range(0, len(out), 255)
    )
    return header + palette + image + b"\x02" + blocks + b"\x00\x3b"


def jpeg_bytes(width: int = 16, height: int = 16) -> bytes:
    """A JPEG header (SOI, JFIF, a baseline SOF0 of ``width`` × ``height``) and EOI:
    enough for agac to judge its type and size; no viewer will show pixels."""
    jfif = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + jfif + sof + b"\xff\xd9"


def webp_bytes(width: int = 16, height: int = 16) -> bytes:
    """A lossless-header WebP (RIFF, VP8L) of ``width`` × ``height``."""
    bits = (width - 1) | ((height - 1) << 14)
    vp8l = b"\x2f" + bits.to_bytes(4, "little") + b"\x00" * 8
    chunk = b"VP8L" + struct.pack("<I", len(vp8l)) + vp8l
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def pdf_bytes(pages: int = 1, text: str = "agac") -> bytes:
    """A valid PDF of ``pages`` pages, each showing ``text`` and its page number."""
    objects: list[bytes] = []
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode())
    font = 3 + 2 * pages
    for i in range(pages):
        words = (
            f"{text} - page {i + 1}".replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        )
        stream = f"BT /F1 18 Tf 72 720 Td ({words}) Tj ET".encode("latin-1", "replace")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents "
            f"{4 + 2 * i} 0 R /Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objects.append(
            b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream"
        )
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)


def pdf_of_size(size: int, pages: int = 1, seed: int = 0) -> bytes:
    """A valid PDF of ``pages`` pages and about ``size`` bytes (at least what the pages
    take): each page's text is a word from ``seed``, repeated."""
    base = len(pdf_bytes(pages, f"{seed}"))
    word = hashlib.sha256(str(seed).encode()).hexdigest()[:11] + " "
    return pdf_bytes(pages, word * max(1, (size - base) // len(word) // pages))
