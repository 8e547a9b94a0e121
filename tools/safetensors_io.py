"""tools/safetensors_io.py — a small pure-Python safetensors writer and reader.

Debian 12 packages PyTorch but not the `safetensors` Python package, so the
golden generator writes the format itself. Only numpy is needed.

Format (https://github.com/huggingface/safetensors, "format" section):
  8 bytes   little-endian u64 N, the header length
  N bytes   UTF-8 JSON object {"NAME": {"dtype": "F32", "shape": [2, 3],
            "data_offsets": [BEGIN, END]}, ..., "__metadata__": {"k": "v"}}
            padded with spaces so that 8 + N is a multiple of 8
  rest      the byte buffer; offsets are relative to its start

Invariants this writer keeps (the reference writer keeps them too):
  - the buffer is fully covered, with no holes and no overlaps;
  - tensors are laid out by decreasing element size, then by name, so every
    tensor starts at an offset aligned to its element size;
  - header keys are written sorted; output is byte-for-byte deterministic.

The reader validates what it reads (header bounds, JSON shape, dtype, shape
vs byte count, overlaps, holes) and raises ValueError with a message naming
the file and tensor. It is used to round-trip every file the generator
writes.

BF16 has no numpy dtype: pass a `Raw("BF16", shape, uint16_array)` to write
one; the reader returns BF16 tensors converted to float32.
"""

import json
import struct

import numpy as np

# safetensors dtype name <-> numpy dtype (little-endian), element size
_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_SIZES = {name: dt.itemsize for name, dt in _DTYPES.items()}
_SIZES["BF16"] = 2


class Raw:
    """A tensor given as a dtype name and raw values (used for BF16, whose
    values are the upper 16 bits of float32, stored as uint16)."""

    def __init__(self, dtype, shape, values):
        if dtype not in _SIZES:
            raise ValueError("unknown safetensors dtype %r" % dtype)
        self.dtype = dtype
        self.shape = [int(s) for s in shape]
        self.values = np.ascontiguousarray(values)
        n = int(np.prod(self.shape, dtype=np.int64))
        if self.values.size != n or self.values.itemsize != _SIZES[dtype]:
            raise ValueError("Raw %s%s: %d values of %d bytes do not fit" %
                             (dtype, self.shape, self.values.size,
                              self.values.itemsize))


def _dtype_name(arr):
    for name, dt in _DTYPES.items():
        if arr.dtype == dt or (arr.dtype.kind == dt.kind and
                               arr.dtype.itemsize == dt.itemsize):
            return name
    raise ValueError("unsupported numpy dtype %s" % arr.dtype)


def f32_to_bf16(arr):
    """Rounds float32 values to bfloat16 (round to nearest even) and returns
    the uint16 bit patterns. NaN stays NaN."""
    bits = np.ascontiguousarray(arr, dtype="<f4").view("<u4").astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    out = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(arr, dtype=np.float32))
    out[nan] = 0x7FC0
    return out


def bf16_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view("<f4")


def encode(tensors, metadata=None):
    """Returns the bytes of a safetensors file holding `tensors`
    ({name: numpy array or Raw}) and optional string metadata."""
    entries = []
    for name, value in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError("bad tensor name %r" % (name,))
        if isinstance(value, Raw):
            dtype, shape = value.dtype, value.shape
            data = value.values.astype(value.values.dtype.newbyteorder("<"),
                                       copy=False).tobytes()
        else:
            arr = np.asarray(value)
            dtype = _dtype_name(arr)
            shape = [int(s) for s in arr.shape]
            data = np.ascontiguousarray(arr, dtype=_DTYPES[dtype]).tobytes()
        entries.append((name, dtype, shape, data))
    # Layout: larger elements first (keeps every tensor aligned), then name.
    entries.sort(key=lambda e: (-_SIZES[e[1]], e[0]))
    header = {}
    offset = 0
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, sort_keys=True, separators=(",", ":"))
    raw = text.encode("utf-8")
    raw += b" " * ((8 - (8 + len(raw)) % 8) % 8)
    return struct.pack("<Q", len(raw)) + raw + b"".join(e[3] for e in entries)


def write(path, tensors, metadata=None):
    with open(path, "wb") as f:
        f.write(encode(tensors, metadata))


def decode(buf, label="<buffer>"):
    """Parses and validates a safetensors file's bytes. Returns
    (tensors {name: numpy array}, metadata dict)."""
    def fail(msg):
        raise ValueError("%s: %s" % (label, msg))

    if len(buf) < 8:
        fail("file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > len(buf) - 8:
        fail("header length %d past the end of the file" % n)
    try:
        header = json.loads(buf[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        fail("header is not valid UTF-8 JSON (%s)" % e)
    if not isinstance(header, dict):
        fail("header is not a JSON object")
    data = buf[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    spans = []
    for name, ent in header.items():
        if not isinstance(ent, dict) or set(ent) != {"dtype", "shape", "data_offsets"}:
            fail("tensor %r: entry must have exactly dtype, shape, data_offsets" % name)
        dtype, shape, offs = ent["dtype"], ent["shape"], ent["data_offsets"]
        if dtype not in _SIZES:
            fail("tensor %r: unknown dtype %r" % (name, dtype))
        if not isinstance(shape, list) or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            fail("tensor %r: bad shape %r" % (name, shape))
        if (not isinstance(offs, list) or len(offs) != 2 or
                not all(isinstance(o, int) for o in offs) or not 0 <= offs[0] <= offs[1]):
            fail("tensor %r: bad data_offsets %r" % (name, offs))
        if offs[1] > len(data):
            fail("tensor %r: data_offsets end %d past the buffer (%d bytes)" %
                 (name, offs[1], len(data)))
        count = int(np.prod(shape, dtype=np.int64))
        if offs[1] - offs[0] != count * _SIZES[dtype]:
            fail("tensor %r: %d bytes for %s%s (expected %d)" %
                 (name, offs[1] - offs[0], dtype, shape, count * _SIZES[dtype]))
        chunk = data[offs[0]:offs[1]]
        if dtype == "BF16":
            arr = bf16_to_f32(np.frombuffer(chunk, dtype="<u2")).reshape(shape)
        else:
            arr = np.frombuffer(chunk, dtype=_DTYPES[dtype]).reshape(shape)
        tensors[name] = arr
        spans.append((offs[0], offs[1], name))
    spans.sort()
    pos = 0
    for begin, end, name in spans:
        if begin < pos:
            fail("tensor %r overlaps the previous tensor" % name)
        if begin > pos:
            fail("hole in the buffer before tensor %r" % name)
        pos = end
    if pos != len(data):
        fail("%d trailing bytes not covered by any tensor" % (len(data) - pos))
    return tensors, metadata


def read(path):
    with open(path, "rb") as f:
        return decode(f.read(), path)


def header_dtypes(path):
    """{name: dtype name} as stored (read() converts BF16 to float32)."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    return {k: v["dtype"] for k, v in header.items()}


def _selftest():
    rng = np.random.default_rng(0)
    t = {
        "a.weight": rng.standard_normal((3, 5)).astype(np.float32),
        "b": np.arange(7, dtype=np.int64),
        "c": np.array([True, False, True]),
        "d": np.array(-1e4, dtype=np.float32),          # rank 0
        "e": rng.standard_normal(4).astype(np.float16),
        "z": np.zeros((0, 3), dtype=np.float32),        # empty
        "h": Raw("BF16", [2, 2], f32_to_bf16(np.array([1.0, -2.5, 3.1415926, 1e-3],
                                                      dtype=np.float32))),
    }
    buf = encode(t, {"format": "pt"})
    assert (8 + struct.unpack("<Q", buf[:8])[0]) % 8 == 0
    back, meta = decode(buf)
    assert meta == {"format": "pt"}
    for k, v in t.items():
        if isinstance(v, Raw):
            assert np.allclose(back[k].ravel(), [1.0, -2.5, 3.140625, 1e-3], rtol=4e-3)
        else:
            assert back[k].dtype == np.asarray(v).dtype and back[k].shape == np.asarray(v).shape
            assert np.array_equal(back[k], v)
    assert encode(t, {"format": "pt"}) == buf  # deterministic
    for bad in (buf[:5], buf[:8] + b"[" + buf[9:], buf[:-1]):
        try:
            decode(bad)
        except ValueError:
            continue
        raise AssertionError("malformed buffer accepted")


if __name__ == "__main__":
    _selftest()
    print("safetensors_io: self-test ok")
