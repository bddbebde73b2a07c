"""A tiny protobuf wire codec for the fake Modal server, written from the
encoding rules (independent of the C client's codec on purpose)."""
import struct


def enc_varint(v):
    if v < 0:
        v += 1 << 64  # int32/int64 negatives are 10-byte two's complement
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(num, wt):
    return enc_varint((num << 3) | wt)


def f_varint(num, v):
    return key(num, 0) + enc_varint(v) if v else b""


def f_varint_always(num, v):
    return key(num, 0) + enc_varint(v)


def f_bytes(num, b):
    if isinstance(b, str):
        b = b.encode()
    return key(num, 2) + enc_varint(len(b)) + b


def f_str(num, s):
    return f_bytes(num, s) if s else b""


def f_float(num, v):
    return key(num, 5) + struct.pack("<f", v)


def f_double(num, v):
    return key(num, 1) + struct.pack("<d", v) if v else b""


def dec_varint(buf, i):
    shift = 0
    v = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, i
        shift += 7
        if shift >= 70:
            raise ValueError("varint too long")


def fields(buf):
    """Yields (num, wiretype, value): int for varint/fixed, bytes for len."""
    i = 0
    while i < len(buf):
        k, i = dec_varint(buf, i)
        num, wt = k >> 3, k & 7
        if num == 0:
            raise ValueError("field 0")
        if wt == 0:
            v, i = dec_varint(buf, i)
        elif wt == 1:
            if i + 8 > len(buf):
                raise ValueError("truncated fixed64")
            v = buf[i:i + 8]
            i += 8
        elif wt == 5:
            if i + 4 > len(buf):
                raise ValueError("truncated fixed32")
            v = buf[i:i + 4]
            i += 4
        elif wt == 2:
            n, i = dec_varint(buf, i)
            if i + n > len(buf):
                raise ValueError("truncated bytes")
            v = bytes(buf[i:i + n])
            i += n
        else:
            raise ValueError("bad wire type %d" % wt)
        yield num, wt, v


class Msg:
    """Decoded message: last value per field, plus every value in .all."""

    def __init__(self, buf):
        self.all = {}
        self.wt = {}
        for num, wt, v in fields(buf):
            self.all.setdefault(num, []).append(v)
            self.wt[num] = wt

    def has(self, num):
        return num in self.all

    def int(self, num, default=0):
        v = self.all.get(num, [default])[-1]
        return v

    def int32(self, num):
        v = self.int(num) & 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v

    def str(self, num, default=""):
        v = self.all.get(num)
        return v[-1].decode() if v else default

    def bytes(self, num):
        v = self.all.get(num)
        return v[-1] if v else b""

    def strs(self, num):
        return [v.decode() for v in self.all.get(num, [])]

    def msg(self, num):
        v = self.all.get(num)
        return Msg(v[-1]) if v else None

    def msgs(self, num):
        return [Msg(v) for v in self.all.get(num, [])]

    def float(self, num):
        v = self.all.get(num)
        return struct.unpack("<f", v[-1])[0] if v else 0.0

    def double(self, num):
        v = self.all.get(num)
        return struct.unpack("<d", v[-1])[0] if v else 0.0

    def map(self, num):
        out = {}
        for e in self.msgs(num):
            out[e.str(1)] = e.str(2)
        return out
