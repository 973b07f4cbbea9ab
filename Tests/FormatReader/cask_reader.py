#!/usr/bin/env python3
"""An independent reader for Cask stores, written from FORMAT.md alone.

    python3 cask_reader.py DIR [--no-hints] [--json] [--now MILLIS]

Prints every live key and its value as JSON Lines on stdout, sorted by key bytes:

    {"key_hex": "616c706861", "value_hex": "74776f"}

A key whose winning record cannot be read back (its bytes fail validation when the value is read,
which can happen when a valid hint points at a damaged segment) is printed with "error" instead of
"value_hex".

A summary goes to stderr: segments, records, hints used or ignored (with the reason), damaged ranges
(file, start offset, end offset) and torn tails. With --json the summary is one JSON object.

Exit status: 0 when the store was read (damage is reported, not fatal); 2 for usage errors, segments
this version cannot read (another version or header length) and segment file names whose id is
outside 1 ..= 4,294,967,294; 1 for I/O failures.

--now sets the current time (milliseconds since 1970) used for expiry; by default the clock.

Standard library only. Nothing here is taken from the Swift sources; see FORMAT.md.
"""

import json
import os
import re
import struct
import sys
import time

# ---------------------------------------------------------------------------------------------
# Constants from FORMAT.md

SEGMENT_MAGIC = b"CASKSEG\x00"
HINT_MAGIC = b"CASKHNT\x00"
SEGMENT_HEADER_LENGTH = 40
# Zeros after the last record, up to this many, are space a writer reserved ("Reserved space").
RESERVED_SPACE_LIMIT = 2 << 20
HINT_HEADER_LENGTH = 48
FORMAT_VERSION = 1
FORMAT_VERSION_DICTIONARY = 2   # a segment whose header names a dictionary ("Dictionary files")
DICTIONARY_MAGIC = b"CASKDCT\x00"
DICTIONARY_HEADER_LENGTH = 32
MAX_DICTIONARY_CONTENT = 65_536

TYPE_PUT = 1
TYPE_DELETE = 2
KNOWN_TYPES = (TYPE_PUT, TYPE_DELETE, 3)  # 3: batch commit
FLAG_LZ4 = 0x01
FLAG_EXPIRES = 0x02
TYPE_BATCH = 3
FLAG_BATCH = 0x04
FLAG_DICTIONARY = 0x08
KNOWN_FLAGS = FLAG_LZ4 | FLAG_EXPIRES | FLAG_BATCH | FLAG_DICTIONARY

MAX_KEY_LENGTH = 65_535
MAX_VALUE_LENGTH = 268_435_456  # 256 MiB
MAX_HINT_BLOCK_RAW = 1_048_576
MAX_SEGMENT_ID = 4_294_967_294
MAX_RECORD_HEADER = 4 + 1 + 1 + 4 * 10 + 8  # with every varint at its longest (10 bytes) encoding
LZ4_MAX_INPUT_SIZE = 0x7E000000

MAX_SEQ = (1 << 63) - 1
SEGMENT_NAME = re.compile(r"^([0-9]{10})\.cask$")
HINT_NAME = re.compile(r"^([0-9]{10})\.hint$")


class UnsupportedFormat(Exception):
    """A segment with the right magic and checksum but a version or header length we do not know."""


class InvalidStore(Exception):
    """A directory that cannot be a Cask store (a segment file name with an id outside the limits)."""


class Invalid(Exception):
    """Bytes that are not a valid structure; the message says why."""


# ---------------------------------------------------------------------------------------------
# CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF. Table-driven.

def _make_crc_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_CRC_TABLE = _make_crc_table()


def crc32c(data, start=0, end=None):
    """CRC-32C of data[start:end] (a bytes-like object)."""
    if end is None:
        end = len(data)
    table = _CRC_TABLE
    crc = 0xFFFFFFFF
    for b in memoryview(data)[start:end]:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283
assert crc32c(bytes(32)) == 0x8A9136AA


# ---------------------------------------------------------------------------------------------
# Varints: unsigned LEB128, at most 10 bytes, a 10th byte only 0x00 or 0x01.

def read_varint(data, pos, end):
    """Returns (value, next position). Raises Invalid for a truncated, too long or overflowing varint."""
    value = 0
    shift = 0
    for i in range(10):
        if pos + i >= end:
            raise Invalid("truncated varint")
        b = data[pos + i]
        if i == 9 and b > 0x01:
            raise Invalid("varint overflows 64 bits")
        value |= (b & 0x7F) << shift
        if b & 0x80 == 0:
            if b == 0 and i > 0:
                raise Invalid("varint not in its shortest form")
            return value, pos + i + 1
        shift += 7
    raise Invalid("varint longer than 10 bytes")


def lz4_compress_bound(n):
    """LZ4_compressBound from lz4.h: n + n/255 + 16 (0 when n is too large for LZ4)."""
    if n > LZ4_MAX_INPUT_SIZE:
        return 0
    return n + n // 255 + 16


# ---------------------------------------------------------------------------------------------
# LZ4 block decompression (the raw block format), bounds-checked against both buffers.

MIN_MATCH = 4
LAST_LITERALS = 5   # the last 5 bytes of a block are always literals
MF_LIMIT = 12       # the last match starts at least 12 bytes before the end of the block


def lz4_decompress(src, expected_length, dictionary=b""):
    """Decompresses one LZ4 block that must expand to exactly expected_length bytes.

    Enforces the end-of-block rules of the block format (the last sequence is literals only and ends
    the input exactly; a match may not start within the last 12 or write into the last 5 bytes), as
    LZ4_decompress_safe does. Raises Invalid on any violation; never reads or writes out of bounds.

    With a dictionary, its content is taken to come right before the output: a match whose offset is
    larger than the bytes produced so far starts in the dictionary ("Dictionary files", "Expanding a
    record").
    """
    src = bytes(src)
    n = len(src)
    out = bytearray()
    ip = 0
    if n == 0:
        raise Invalid("lz4: empty block")
    while True:
        if ip >= n:
            raise Invalid("lz4: block ends without a final literal sequence")
        token = src[ip]
        ip += 1
        # Literal length.
        lit = token >> 4
        if lit == 15:
            while True:
                if ip >= n:
                    raise Invalid("lz4: truncated literal length")
                b = src[ip]
                ip += 1
                lit += b
                if lit > expected_length:
                    raise Invalid("lz4: literal length exceeds the output")
                if b != 255:
                    break
        if ip + lit > n:
            raise Invalid("lz4: literals run past the input")
        if len(out) + lit > expected_length:
            raise Invalid("lz4: literals run past the output")
        out += src[ip:ip + lit]
        ip += lit
        if ip == n:
            # The last sequence: literals only, the block ends right after them.
            break
        # A match follows; it must start at least MF_LIMIT bytes before the end of the output.
        if len(out) > expected_length - MF_LIMIT:
            raise Invalid("lz4: match starts within the last 12 bytes of the block")
        if ip + 2 > n:
            raise Invalid("lz4: truncated match offset")
        offset = src[ip] | (src[ip + 1] << 8)
        ip += 2
        if offset == 0:
            raise Invalid("lz4: match offset 0")
        if offset > len(out) + len(dictionary):
            raise Invalid("lz4: match offset before the start of the output" + (" and of the dictionary" if dictionary else ""))
        mlen = token & 0x0F
        if mlen == 15:
            while True:
                if ip >= n:
                    raise Invalid("lz4: truncated match length")
                b = src[ip]
                ip += 1
                mlen += b
                if mlen > expected_length:
                    raise Invalid("lz4: match length exceeds the output")
                if b != 255:
                    break
        mlen += MIN_MATCH
        if len(out) + mlen > expected_length - LAST_LITERALS:
            raise Invalid("lz4: match writes into the last 5 bytes of the block")
        if offset > len(out):
            # The match starts `back` bytes before the end of the dictionary, and goes on into the
            # output if it is longer than that.
            back = offset - len(out)
            taken = min(mlen, back)
            first = len(dictionary) - back
            out += dictionary[first:first + taken]
            mlen -= taken
            if mlen == 0:
                continue
        start = len(out) - offset
        if mlen <= offset:
            out += out[start:start + mlen]
        else:
            # Overlapping match: the pattern of `offset` bytes repeats.
            pattern = bytes(out[start:])
            reps, rest = divmod(mlen, offset)
            out += pattern * reps + pattern[:rest]
    if len(out) != expected_length:
        raise Invalid("lz4: decompressed to %d bytes, expected %d" % (len(out), expected_length))
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# Records

class Record:
    __slots__ = ("type", "flags", "seq", "key", "value_length", "stored_length", "expires_at",
                 "offset", "length", "payload_start")

    @property
    def lz4(self):
        return bool(self.flags & FLAG_LZ4)


def parse_record(data, offset, end):
    """Parses and validates (rules 1-4 of FORMAT.md) the record at `offset` of data[:end].

    Returns a Record or raises Invalid. Rule 5 (decompression) is checked by record_value.
    """
    # Rule 1: type and flags.
    if offset + 6 > end:
        raise Invalid("record header past the end of the file")
    rtype = data[offset + 4]
    flags = data[offset + 5]
    if rtype not in KNOWN_TYPES:
        raise Invalid("unknown record type %d" % rtype)
    if flags & ~KNOWN_FLAGS:
        raise Invalid("unknown record flags 0x%02x" % flags)
    if flags & FLAG_DICTIONARY and not flags & FLAG_LZ4:
        raise Invalid("dictionary flag without the lz4 flag")
    # Rule 2: varints well formed, lengths within limits, before anything is sized from them.
    pos = offset + 6
    seq, pos = read_varint(data, pos, end)
    if not 1 <= seq <= MAX_SEQ:
        raise Invalid("sequence number %d out of range" % seq)
    key_length, pos = read_varint(data, pos, end)
    if not 1 <= key_length <= MAX_KEY_LENGTH:
        raise Invalid("key length %d out of range" % key_length)
    value_length, pos = read_varint(data, pos, end)
    if value_length > MAX_VALUE_LENGTH:
        raise Invalid("value length %d out of range" % value_length)
    if rtype == TYPE_DELETE and (value_length != 0 or flags & ~FLAG_BATCH):
        raise Invalid("delete with a value, the lz4 flag or an expiry")
    if rtype == TYPE_BATCH and (key_length != 8 or not 1 <= value_length <= 5 or flags != 0):
        raise Invalid("batch commit with a key of %d bytes, a value of %d bytes or flags 0x%02x" % (key_length, value_length, flags))
    if flags & FLAG_LZ4:
        stored_length, pos = read_varint(data, pos, end)
        if not 1 <= stored_length <= lz4_compress_bound(value_length):
            raise Invalid("stored length %d out of range for value length %d" % (stored_length, value_length))
    else:
        stored_length = value_length
    expires_at = None
    if flags & FLAG_EXPIRES:
        if pos + 8 > end:
            raise Invalid("expiry past the end of the file")
        expires_at = struct.unpack_from("<Q", data, pos)[0]
        pos += 8
    # Rule 3: the whole record fits in the file.
    key_start = pos
    payload_start = key_start + key_length
    record_end = payload_start + stored_length
    if record_end > end:
        raise Invalid("record runs past the end of the file")
    # Rule 4: the checksum.
    stored_crc = struct.unpack_from("<I", data, offset)[0]
    if crc32c(data, offset + 4, record_end) != stored_crc:
        raise Invalid("checksum mismatch")
    r = Record()
    r.type = rtype
    r.flags = flags
    r.seq = seq
    r.key = bytes(data[key_start:payload_start])
    r.value_length = value_length
    r.stored_length = stored_length
    r.expires_at = expires_at
    r.offset = offset
    r.length = record_end - offset
    r.payload_start = payload_start
    return r


def record_value(data, r, dictionary=None):
    """The value of a put record (rule 5: an lz4 payload must expand to exactly value length).

    `dictionary`: what the record's segment names — None for none, bytes for a usable one's
    content, or a str saying why the one it names cannot be used."""
    payload = data[r.payload_start:r.payload_start + r.stored_length]
    if r.flags & FLAG_DICTIONARY:
        if dictionary is None:
            raise Invalid("the record needs a dictionary and its segment names none")
        if isinstance(dictionary, str):
            raise Invalid(dictionary)
        return lz4_decompress(payload, r.value_length, dictionary)
    if r.lz4:
        return lz4_decompress(payload, r.value_length)
    return bytes(payload)


def load_dictionary(directory, dictionary_id, expected_crc):
    """The content of dictionary file dictionary_id, or a str saying why it cannot be used."""
    name = "%010d.dict" % dictionary_id
    path = os.path.join(directory, name)
    try:
        with open(path, "rb") as f:
            data = f.read(DICTIONARY_HEADER_LENGTH + MAX_DICTIONARY_CONTENT + 1)
    except OSError as error:
        return "dictionary %d (%s) cannot be read: %s" % (dictionary_id, path, error.strerror)
    def unusable(why):
        return "dictionary %d (%s) cannot be used: %s" % (dictionary_id, path, why)
    if len(data) < DICTIONARY_HEADER_LENGTH:
        return unusable("shorter than its header")
    if data[:8] != DICTIONARY_MAGIC or crc32c(data, 0, 28) != struct.unpack_from("<I", data, 28)[0]:
        return unusable("bad magic or header checksum")
    version, header_length, file_id, length, content_crc = struct.unpack_from("<HHIII", data, 8)
    if version != 1 or header_length != DICTIONARY_HEADER_LENGTH or file_id != dictionary_id:
        return unusable("version %d, header length %d, id %d" % (version, header_length, file_id))
    if not 1 <= length <= MAX_DICTIONARY_CONTENT or len(data) != DICTIONARY_HEADER_LENGTH + length:
        return unusable("content length %d in a file of %d bytes" % (length, len(data)))
    content = data[DICTIONARY_HEADER_LENGTH:]
    if crc32c(content) != content_crc:
        return unusable("content checksum mismatch")
    if content_crc != expected_crc:
        return unusable("not the dictionary the segment was written with (crc 0x%08x, the segment says 0x%08x)" % (content_crc, expected_crc))
    return bytes(content)


# ---------------------------------------------------------------------------------------------
# Hint files

class HintEntry:
    __slots__ = ("type", "flags", "seq", "record_length", "value_length", "key", "expires_at", "offset")


def commit_count(data, r):
    """The member count a batch commit record's value states: a varint filling the value exactly,
    else -1 (which no batch has)."""
    start = r.offset + r.length - r.value_length
    try:
        count, end = read_varint(data, start, r.offset + r.length)
    except Invalid:
        return -1
    return count if end == r.offset + r.length else -1


def parse_compaction_manifest(data):
    """The segment ids a compaction manifest lists, or None when it is not valid."""
    if len(data) < 20 or data[:8] != b"CASKCMP\x00" or struct.unpack_from("<H", data, 8)[0] != 1:
        return None
    count = struct.unpack_from("<I", data, 12)[0]
    if len(data) != 16 + count * 8 + 4:
        return None
    if crc32c(data, 0, 16 + count * 8) != struct.unpack_from("<I", data, 16 + count * 8)[0]:
        return None
    return set(struct.unpack_from("<%dQ" % count, data, 16))


def parse_hint(hint, segment_id, segment_length):
    """Parses and checks a whole hint file. Returns (covered length, entries) or raises Invalid."""
    if len(hint) < HINT_HEADER_LENGTH:
        raise Invalid("hint shorter than its header")
    if hint[0:8] != HINT_MAGIC:
        raise Invalid("bad hint magic")
    version, header_length, block_count, hint_segment, covered, entry_count, _reserved, header_crc = \
        struct.unpack_from("<HHIQQQII", hint, 8)
    if crc32c(hint, 0, 44) != header_crc:
        raise Invalid("hint header checksum mismatch")
    if version != FORMAT_VERSION:
        raise Invalid("unknown hint version %d" % version)
    if header_length != HINT_HEADER_LENGTH:
        raise Invalid("unknown hint header length %d" % header_length)
    if hint_segment != segment_id:
        raise Invalid("hint is for segment %d" % hint_segment)
    if covered > segment_length:
        raise Invalid("hint covers %d bytes, the segment has %d" % (covered, segment_length))
    if covered < SEGMENT_HEADER_LENGTH:
        raise Invalid("hint covers %d bytes, less than the segment header" % covered)
    entries = []
    pos = HINT_HEADER_LENGTH
    offset = SEGMENT_HEADER_LENGTH
    for block_index in range(block_count):
        if pos + 16 > len(hint):
            raise Invalid("block %d header past the end of the hint" % block_index)
        raw_length, stored_length, codec, block_crc = struct.unpack_from("<IIII", hint, pos)
        pos += 16
        if not 1 <= raw_length <= MAX_HINT_BLOCK_RAW:
            raise Invalid("block %d raw length %d out of range" % (block_index, raw_length))
        if codec == 0:
            if stored_length != raw_length:
                raise Invalid("raw block %d stored length %d != raw length %d" % (block_index, stored_length, raw_length))
        elif codec == 1:
            if not 1 <= stored_length <= lz4_compress_bound(raw_length):
                raise Invalid("lz4 block %d stored length %d out of range" % (block_index, stored_length))
        else:
            raise Invalid("block %d has unknown codec %d" % (block_index, codec))
        if pos + stored_length > len(hint):
            raise Invalid("block %d runs past the end of the hint" % block_index)
        stored = hint[pos:pos + stored_length]
        pos += stored_length
        if crc32c(stored) != block_crc:
            raise Invalid("block %d checksum mismatch" % block_index)
        raw = stored if codec == 0 else lz4_decompress(stored, raw_length)
        p = 0
        while p < raw_length:
            e, p = parse_hint_entry(raw, p, raw_length)
            e.offset = offset
            offset += e.record_length
            entries.append(e)
    if pos != len(hint):
        raise Invalid("hint has %d bytes after its last block" % (len(hint) - pos))
    if len(entries) != entry_count:
        raise Invalid("hint has %d entries, header says %d" % (len(entries), entry_count))
    if offset != covered:
        raise Invalid("hint entries end at %d, covered length is %d" % (offset, covered))
    return covered, entries


def parse_hint_entry(raw, p, end):
    if p + 2 > end:
        raise Invalid("hint entry spans the end of its block")
    e = HintEntry()
    e.type = raw[p]
    e.flags = raw[p + 1]
    if e.type not in KNOWN_TYPES:
        raise Invalid("hint entry with unknown type %d" % e.type)
    if e.flags & ~KNOWN_FLAGS or (e.flags & FLAG_DICTIONARY and not e.flags & FLAG_LZ4):
        raise Invalid("hint entry with unknown flags 0x%02x" % e.flags)
    p += 2
    e.seq, p = read_varint(raw, p, end)
    if not 1 <= e.seq <= MAX_SEQ:
        raise Invalid("hint entry sequence number %d out of range" % e.seq)
    e.record_length, p = read_varint(raw, p, end)
    e.value_length, p = read_varint(raw, p, end)
    key_length, p = read_varint(raw, p, end)
    if not 1 <= key_length <= MAX_KEY_LENGTH:
        raise Invalid("hint entry key length %d out of range" % key_length)
    if e.value_length > MAX_VALUE_LENGTH:
        raise Invalid("hint entry value length %d out of range" % e.value_length)
    if e.type == TYPE_DELETE and (e.value_length != 0 or e.flags & ~FLAG_BATCH):
        raise Invalid("hint entry for a delete with a value, the lz4 flag or an expiry")
    if e.type == TYPE_BATCH and (key_length != 8 or not 1 <= e.value_length <= 5 or e.flags != 0):
        raise Invalid("hint entry for a malformed batch commit")
    # The smallest record these fields allow: crc, type, flags, three 1-byte varints (plus a stored
    # length when lz4, plus the expiry), the key and the payload (at least 1 byte when lz4).
    minimum = 4 + 2 + 3 + key_length
    minimum += 8 if e.flags & FLAG_EXPIRES else 0
    minimum += 2 if e.flags & FLAG_LZ4 else e.value_length
    maximum = MAX_RECORD_HEADER + key_length + (lz4_compress_bound(e.value_length) if e.flags & FLAG_LZ4 else e.value_length)
    if not minimum <= e.record_length <= maximum:
        raise Invalid("hint entry record length %d out of range" % e.record_length)
    e.expires_at = None
    if e.flags & FLAG_EXPIRES:
        if p + 8 > end:
            raise Invalid("hint entry expiry spans the end of its block")
        e.expires_at = struct.unpack_from("<Q", raw, p)[0]
        p += 8
    if p + key_length > end:
        raise Invalid("hint entry key spans the end of its block")
    e.key = bytes(raw[p:p + key_length])
    p += key_length
    return e, p


# ---------------------------------------------------------------------------------------------
# The store

class Winner:
    """The record with the highest seq seen so far for a key."""
    __slots__ = ("seq", "type", "flags", "expires_at", "segment", "offset", "length", "value_length", "from_hint")


class Reader:
    def __init__(self, directory, use_hints=True, now_ms=None):
        self.directory = directory
        self.use_hints = use_hints
        self.now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        self.index = {}
        self.segments = []       # (id, name, data)
        self.dictionaries = {}   # segment id -> what its header names (see record_value)
        self.summary = {
            "segments": 0, "records": 0, "records_from_hints": 0, "records_scanned": 0,
            "hints_used": [], "hints_ignored": [], "damaged": [], "torn_tail": None,
            "torn_segment": None, "unreadable": [],
        }

    # -- loading ----------------------------------------------------------------------------

    def load(self):
        names = os.listdir(self.directory)
        segment_ids = sorted(int(m.group(1)) for m in map(SEGMENT_NAME.match, names) if m)
        # Compaction: the segments a valid manifest lists were replaced; ignore them.
        if "COMPACTION" in names:
            with open(os.path.join(self.directory, "COMPACTION"), "rb") as f:
                replaced = parse_compaction_manifest(f.read())
            if replaced is None:
                self.damage("COMPACTION", 0, 0, "invalid compaction manifest; ignored")
            else:
                segment_ids = [i for i in segment_ids if i not in replaced]
        # Strays ("The store directory"): a segment name with an id out of range is ignored.
        self.summary["ignored"] = sorted("%010d.cask" % i for i in segment_ids if not 1 <= i <= MAX_SEGMENT_ID)
        segment_ids = [i for i in segment_ids if 1 <= i <= MAX_SEGMENT_ID]
        hint_names = set(n for n in names if HINT_NAME.match(n))
        self.summary["segments"] = len(segment_ids)
        active = self.active_segment(segment_ids)
        for segment_id in segment_ids:
            last = segment_id == active
            name = "%010d.cask" % segment_id
            with open(os.path.join(self.directory, name), "rb") as f:
                data = f.read()
            self.segments.append((segment_id, name, data))
            self.load_segment(segment_id, name, data, last, hint_names)

    def active_segment(self, segment_ids):
        """The segment a writer appends to: the highest base seq (ties: highest id); a newest
        segment whose header is not valid can only be one whose creation was torn."""
        best = None
        for segment_id in segment_ids:
            with open(os.path.join(self.directory, "%010d.cask" % segment_id), "rb") as f:
                header = f.read(SEGMENT_HEADER_LENGTH)
            valid = (len(header) == SEGMENT_HEADER_LENGTH and header[:8] == SEGMENT_MAGIC
                     and crc32c(header, 0, 36) == struct.unpack_from("<I", header, 36)[0]
                     and struct.unpack_from("<Q", header, 24)[0] <= MAX_SEQ)
            if not valid:
                if segment_id == segment_ids[-1]:
                    return segment_id
                continue
            base_seq = struct.unpack_from("<Q", header, 24)[0]
            if best is None or (base_seq, segment_id) > best:
                best = (base_seq, segment_id)
        return best[1] if best else (segment_ids[-1] if segment_ids else None)

    def load_segment(self, segment_id, name, data, last, hint_names):
        if len(data) < SEGMENT_HEADER_LENGTH:
            if last:
                # A torn segment creation: a writer rewrites the header; a reader sees no records.
                self.summary["torn_segment"] = {"file": name, "length": len(data)}
            else:
                self.damage(name, 0, len(data), "sealed segment shorter than its header")
            return
        if data[0:8] != SEGMENT_MAGIC or crc32c(data, 0, 36) != struct.unpack_from("<I", data, 36)[0]:
            # Not a header we can trust at all. Records are self-checking, so scan anyway.
            self.damage(name, 0, SEGMENT_HEADER_LENGTH, "bad segment header (magic or checksum)")
        else:
            version, header_length, dictionary_crc, header_id, base_seq, dictionary_id = struct.unpack_from("<HHIQQI", data, 8)
            if version not in (FORMAT_VERSION, FORMAT_VERSION_DICTIONARY) or header_length != SEGMENT_HEADER_LENGTH:
                raise UnsupportedFormat("%s: segment version %d, header length %d" % (name, version, header_length))
            if base_seq > MAX_SEQ:
                self.damage(name, 0, SEGMENT_HEADER_LENGTH, "segment header base seq above 2^63-1")
            elif version == FORMAT_VERSION_DICTIONARY and not 1 <= dictionary_id <= MAX_SEGMENT_ID:
                self.damage(name, 0, SEGMENT_HEADER_LENGTH, "segment header names dictionary %d" % dictionary_id)
            elif header_id != segment_id:
                self.damage(name, 0, SEGMENT_HEADER_LENGTH, "segment header says id %d" % header_id)
            if version == FORMAT_VERSION_DICTIONARY and 1 <= dictionary_id <= MAX_SEGMENT_ID and base_seq <= MAX_SEQ:
                self.dictionaries[segment_id] = load_dictionary(self.directory, dictionary_id, dictionary_crc)
        start = SEGMENT_HEADER_LENGTH
        self.pending = []  # batch members waiting for their commit record (FORMAT.md, "Batches")
        self.settled_end = SEGMENT_HEADER_LENGTH  # where the last record that is not a member ends
        hint_name = "%010d.hint" % segment_id
        if self.use_hints and hint_name in hint_names:
            with open(os.path.join(self.directory, hint_name), "rb") as f:
                hint = f.read()
            try:
                covered, entries = parse_hint(hint, segment_id, len(data))
            except Invalid as error:
                self.summary["hints_ignored"].append({"file": hint_name, "reason": str(error)})
                # Rule 5, lost tails: a hint whose header holds and covers more than the segment.
                if len(hint) >= HINT_HEADER_LENGTH and hint[0:8] == HINT_MAGIC \
                        and crc32c(hint, 0, 44) == struct.unpack_from("<I", hint, 44)[0] \
                        and struct.unpack_from("<Q", hint, 16)[0] == segment_id:
                    covered = struct.unpack_from("<Q", hint, 24)[0]
                    if covered > len(data):
                        self.damage(name, len(data), covered, "the segment lost its tail")
            else:
                self.summary["hints_used"].append(hint_name)
                for e in entries:
                    self.receive(e.key, e.seq, e.type, e.flags, e.expires_at, segment_id, e.offset,
                                 e.record_length, e.value_length, True)
                self.summary["records_from_hints"] += len(entries)
                start = covered
        self.scan(segment_id, name, data, start, last)
        if self.pending:
            # A batch whose commit record never came: never applied.
            first = min(m[6] for m in self.pending)
            end = max(m[6] + m[7] for m in self.pending)
            damage_after = any(d["file"] == name and d["end"] > first for d in self.summary["damaged"])
            if last and first >= self.settled_end and not damage_after:
                # Nothing but them (and a torn tail) after the first of them: the torn tail.
                tail = self.summary["torn_tail"]
                if tail is not None and tail["file"] == name:
                    end = tail["end"]
                self.summary["torn_tail"] = {"file": name, "start": first, "end": end, "reason": "batch without its commit record"}
            else:
                self.damage(name, first, end, "batch without its commit record")

    def scan(self, segment_id, name, data, pos, last):
        end = len(data)
        while pos < end:
            try:
                r = parse_record(data, pos, end)
            except Invalid as error:
                reason = str(error)
                damage_start = pos
                pos += 1
                r = None
                while pos < end:
                    try:
                        r = parse_record(data, pos, end)
                        break
                    except Invalid:
                        pos += 1
                if r is None and end - damage_start <= RESERVED_SPACE_LIMIT and not any(data[damage_start:end]):
                    # Zeros to the end of a segment: space a writer reserved ("Reserved space").
                    # Not a record, not damage.
                    return
                if r is None and last:
                    # Damage reaching the end of the last segment: a torn write. A writer would cut
                    # the file here; a read-only reader stops.
                    self.summary["torn_tail"] = {"file": name, "start": damage_start, "end": end, "reason": reason}
                    return
                self.damage(name, damage_start, pos, reason)
                if r is None:
                    return
            self.commit_count = commit_count(data, r) if r.type == TYPE_BATCH else None
            self.receive(r.key, r.seq, r.type, r.flags, r.expires_at, segment_id, r.offset, r.length,
                         r.value_length, False)
            self.commit_count = None
            self.summary["records_scanned"] += 1
            pos += r.length

    def damage(self, name, start, end, reason):
        self.summary["damaged"].append({"file": name, "start": start, "end": end, "reason": reason})

    def receive(self, key, seq, rtype, flags, expires_at, segment_id, offset, length, value_length, from_hint):
        """One valid record: applied now, or (a batch member) when its commit record comes."""
        self.summary["records"] += 1
        args = (key, seq, rtype, flags, expires_at, segment_id, offset, length, value_length, from_hint)
        if rtype == TYPE_BATCH:
            first = struct.unpack("<Q", bytes(key))[0]
            committed = [m for m in self.pending if first <= m[1] < seq]
            self.pending = [m for m in self.pending if not first <= m[1] < seq]
            # Applied only when whole ("Batches"): a member of every seq first ..< seq. (A hint
            # entry holds no value; the count in a scanned commit's value is checked by its caller.)
            whole = first < seq and len(committed) == seq - first and len(set(m[1] for m in committed)) == len(committed)
            if whole and getattr(self, "commit_count", None) not in (None, seq - first):
                whole = False
            if whole:
                for m in committed:
                    self.apply(*m)
            else:
                name = "%010d.cask" % segment_id
                for m in committed:
                    self.damage(name, m[6], m[6] + m[7], "member of an incomplete batch")
                self.damage(name, offset, offset + length, "commit record of an incomplete batch")
        elif flags & FLAG_BATCH:
            self.pending.append(args)
            return
        else:
            self.apply(*args)
        self.settled_end = offset + length

    def apply(self, key, seq, rtype, flags, expires_at, segment_id, offset, length, value_length, from_hint):
        current = self.index.get(key)
        if current is not None and (seq, segment_id, offset) <= (current.seq, current.segment, current.offset):
            return  # older; on equal seqs the later record in (segment id, offset) order wins
        w = Winner()
        w.seq, w.type, w.flags, w.expires_at = seq, rtype, flags, expires_at
        w.segment, w.offset, w.length, w.value_length, w.from_hint = segment_id, offset, length, value_length, from_hint
        self.index[key] = w

    # -- reading ------------------------------------------------------------------------------

    def live(self):
        """Yields (key, value or None, error or None) for every live key, sorted by key bytes."""
        data_by_id = {sid: data for sid, _name, data in self.segments}
        for key in sorted(self.index):
            w = self.index[key]
            if w.type == TYPE_DELETE:
                continue
            if w.expires_at is not None and w.expires_at <= self.now_ms:
                continue
            data = data_by_id[w.segment]
            try:
                r = parse_record(data, w.offset, len(data))
                if (r.length != w.length or r.key != key or r.seq != w.seq or r.type != w.type
                        or r.flags != w.flags or r.value_length != w.value_length or r.expires_at != w.expires_at):
                    raise Invalid("record at the hinted offset does not match the hint")
                value = record_value(data, r, self.dictionaries.get(w.segment))
            except Invalid as error:
                name = "%010d.cask" % w.segment
                self.summary["unreadable"].append({"file": name, "offset": w.offset, "key_hex": key.hex(),
                                                   "reason": str(error)})
                yield key, None, "%s@%d: %s" % (name, w.offset, error)
                continue
            yield key, value, None


def main(argv):
    args = list(argv[1:])
    use_hints = True
    as_json = False
    now_ms = None
    directory = None
    while args:
        a = args.pop(0)
        if a == "--no-hints":
            use_hints = False
        elif a == "--json":
            as_json = True
        elif a == "--now":
            if not args:
                print("--now needs milliseconds since 1970", file=sys.stderr)
                return 2
            now_ms = int(args.pop(0))
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif directory is None and not a.startswith("--"):
            directory = a
        else:
            print("usage: cask_reader.py DIR [--no-hints] [--json] [--now MILLIS]", file=sys.stderr)
            return 2
    if directory is None:
        print("usage: cask_reader.py DIR [--no-hints] [--json] [--now MILLIS]", file=sys.stderr)
        return 2
    reader = Reader(directory, use_hints=use_hints, now_ms=now_ms)
    try:
        reader.load()
    except UnsupportedFormat as error:
        print("unsupported format: %s" % error, file=sys.stderr)
        return 2
    except InvalidStore as error:
        print("not a valid store: %s" % error, file=sys.stderr)
        return 2
    except OSError as error:
        print("cannot read the store: %s" % error, file=sys.stderr)
        return 1
    out = sys.stdout
    live = 0
    for key, value, error in reader.live():
        if error is None:
            out.write(json.dumps({"key_hex": key.hex(), "value_hex": value.hex()}) + "\n")
            live += 1
        else:
            out.write(json.dumps({"key_hex": key.hex(), "error": error}) + "\n")
    out.flush()
    s = reader.summary
    s["live_keys"] = live
    if as_json:
        print(json.dumps(s, sort_keys=True), file=sys.stderr)
    else:
        err = sys.stderr
        print("segments: %d" % s["segments"], file=err)
        print("records: %d (%d from hints, %d scanned)" % (s["records"], s["records_from_hints"], s["records_scanned"]), file=err)
        print("live keys: %d" % live, file=err)
        print("hints used: %d" % len(s["hints_used"]), file=err)
        for h in s["hints_ignored"]:
            print("hint ignored: %s: %s" % (h["file"], h["reason"]), file=err)
        for d in s["damaged"]:
            print("damaged: %s bytes %d..<%d (%d bytes): %s" % (d["file"], d["start"], d["end"], d["end"] - d["start"], d["reason"]), file=err)
        if s["torn_tail"]:
            t = s["torn_tail"]
            print("torn tail: %s bytes %d..<%d (a writer would cut here): %s" % (t["file"], t["start"], t["end"], t["reason"]), file=err)
        if s["torn_segment"]:
            print("torn segment creation: %s (%d bytes)" % (s["torn_segment"]["file"], s["torn_segment"]["length"]), file=err)
        for u in s["unreadable"]:
            print("unreadable: %s@%d key %s: %s" % (u["file"], u["offset"], u["key_hex"], u["reason"]), file=err)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
