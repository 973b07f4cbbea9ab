#!/usr/bin/env python3
"""An independent reader for Cask stores, written from FORMAT.md alone.

    python3 cask_reader.py DIR [--no-hints] [--json] [--now MILLIS] [--key HEX | --key-file PATH]

Prints every live key and its value as JSON Lines on stdout, sorted by key bytes:

    {"key_hex": "616c706861", "value_hex": "74776f"}

A key whose winning record cannot be read back (its bytes fail validation when the value is read,
which can happen when a valid hint points at a damaged segment) is printed with "error" instead of
"value_hex".

A summary goes to stderr: segments, records, hints used or ignored (with the reason), damaged ranges
(file, start offset, end offset, kind) and torn tails. With --json the summary is one JSON object.

An encrypted store (one with an ENCRYPTION file; FORMAT.md, "Encryption") is read with its 32-byte
key: --key with 64 hexadecimal digits, --key-file with a file holding the 32 bytes or 64 hexadecimal
digits and a newline, or else the environment variable CASK_KEY (64 hexadecimal digits).

Exit status: 0 when the store was read (damage is reported, not fatal); 2 for usage errors, segments
this version cannot read (another version or header length) and segment file names whose id is
outside 1 ..= 4,294,967,294; 3 when the key does not open the store (a wrong key, no key for an
encrypted store, a key for a store that is not encrypted, a damaged ENCRYPTION file); 1 for I/O
failures.

--now sets the current time (milliseconds since 1970) used for expiry; by default the clock.

Standard library only, and for encrypted stores the `cryptography` package (its AES-256-GCM and
ChaCha20-Poly1305; HChaCha20 is here); hint blocks stored as zstd frames (codec 2) are expanded by
the system libzstd through ctypes. Nothing here is taken from the Swift sources; see FORMAT.md.
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
FORMAT_VERSION_KEY_PREFIX = 4   # a segment whose header holds a key prefix ("Segment files")
MAX_KEY_PREFIX = 255            # the longest key prefix, and the most bytes a record elides
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
FLAG_ENCRYPTED = 0x10  # every record of a version 3 segment, and only those ("Encryption")
FLAG_KEY_PREFIX = 0x20  # the key starts with bytes of its version 4 segment's key prefix
KNOWN_FLAGS = FLAG_LZ4 | FLAG_EXPIRES | FLAG_BATCH | FLAG_DICTIONARY | FLAG_ENCRYPTED | FLAG_KEY_PREFIX

MAX_KEY_LENGTH = 65_535
MAX_VALUE_LENGTH = 268_435_456  # 256 MiB
MAX_HINT_BLOCK_RAW = 1_048_576
MAX_SEGMENT_ID = 4_294_967_294
LZ4_MAX_INPUT_SIZE = 0x7E000000

MAX_SEQ = (1 << 63) - 1

# "Encryption"
ENCRYPTION_FILE = "ENCRYPTION"
ENCRYPTION_MAGIC = b"CASKENC\x00"
ENCRYPTION_FILE_LENGTH = 68
FORMAT_VERSION_ENCRYPTED = 3     # the segments of an encrypted store
SEGMENT_HEADER_LENGTH_ENCRYPTED = 108
MAX_SEGMENT_HEADER_LENGTH = 46 + MAX_KEY_PREFIX  # the longest segment header (version 4's; version 3's is 108)
HINT_VERSION_ENCRYPTED = 2
# Hint versions: 1 and 2 (encrypted) code each entry whole; 3 and 4 (encrypted) code its seq and
# key against the entry before in the block ("Hint files").
HINT_VERSIONS_PLAIN = (1, 3)
HINT_VERSIONS_ENCRYPTED = (2, 4)
HINT_VERSIONS_DELTA = (3, 4)
HINT_HEADER_LENGTH_ENCRYPTED = 96
DICTIONARY_VERSION_ENCRYPTED = 2
DICTIONARY_HEADER_LENGTH_ENCRYPTED = 64
ALGORITHM_AES256GCM = 1
ALGORITHM_CHACHA20POLY1305 = 2
ALGORITHM_NAMES = {ALGORITHM_AES256GCM: "AES-256-GCM", ALGORITHM_CHACHA20POLY1305: "ChaCha20-Poly1305"}
TAG_LENGTH = 16
KEY_LENGTH = 32
SEGMENT_NAME = re.compile(r"^([0-9]{10})\.cask$")
HINT_NAME = re.compile(r"^([0-9]{10})\.hint$")
STORE_FILE_NAME = re.compile(r"^([0-9]{10})\.(cask|hint|dict)$")


def is_stray(name):
    """A name like a store file's that is not one ("The store directory")."""
    if name.endswith(".tmp") or not any(part in name for part in (".cask", ".hint", ".dict")):
        return False
    m = STORE_FILE_NAME.match(name)
    return m is None or not 1 <= int(m.group(1)) <= MAX_SEGMENT_ID


class UnsupportedFormat(Exception):
    """A segment with the right magic and checksum but a version or header length we do not know."""


class InvalidStore(Exception):
    """A directory that cannot be a Cask store (a segment file name with an id outside the limits)."""


class Invalid(Exception):
    """Bytes that are not a valid structure; the message says why."""


class KeyRefused(Exception):
    """The key given does not open the store: a wrong key, none for an encrypted store, one for a
    store that is not encrypted, or an ENCRYPTION file that is damaged."""


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
# Encryption ("Encryption"): a key per file, HChaCha20(store key, the file's salt); message n of a
# file is sealed under that key with the 12-byte nonce 00 00 00 00 || u64 LE (n).

def _rotl32(v, c):
    return ((v << c) & 0xFFFFFFFF) | (v >> (32 - c))


def hchacha20(key, data16):
    """HChaCha20 (draft-irtf-cfrg-xchacha, section 2.2): the ChaCha20 state of the constants, the
    32-byte key and the 16-byte input, after 20 rounds and without the final addition; its words
    0..3 and 12..15, little-endian (32 bytes)."""
    if len(key) != KEY_LENGTH or len(data16) != 16:
        raise ValueError("HChaCha20 takes a 32-byte key and 16 bytes of input")
    x = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    x += list(struct.unpack("<8I", bytes(key))) + list(struct.unpack("<4I", bytes(data16)))

    def quarter(a, b, c, d):
        x[a] = (x[a] + x[b]) & 0xFFFFFFFF
        x[d] = _rotl32(x[d] ^ x[a], 16)
        x[c] = (x[c] + x[d]) & 0xFFFFFFFF
        x[b] = _rotl32(x[b] ^ x[c], 12)
        x[a] = (x[a] + x[b]) & 0xFFFFFFFF
        x[d] = _rotl32(x[d] ^ x[a], 8)
        x[c] = (x[c] + x[d]) & 0xFFFFFFFF
        x[b] = _rotl32(x[b] ^ x[c], 7)

    for _ in range(10):
        quarter(0, 4, 8, 12)
        quarter(1, 5, 9, 13)
        quarter(2, 6, 10, 14)
        quarter(3, 7, 11, 15)
        quarter(0, 5, 10, 15)
        quarter(1, 6, 11, 12)
        quarter(2, 7, 8, 13)
        quarter(3, 4, 9, 14)
    return struct.pack("<8I", *(x[0:4] + x[12:16]))


# draft-irtf-cfrg-xchacha-03, section 2.2.1 (the HChaCha20 test vector).
assert hchacha20(bytes(range(32)), bytes.fromhex("000000090000004a0000000031415927")) == bytes.fromhex(
    "82413b4227b27bfed30e42508a877d73a0f9e4d58a74a853c12ec41326d3ecdc")


def nonce(number):
    return b"\x00\x00\x00\x00" + struct.pack("<Q", number)


class FileCipher:
    """The AEAD of one file: the store's algorithm under HChaCha20(store key, the file's salt)."""

    def __init__(self, algorithm, store_key, salt):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
        from cryptography.exceptions import InvalidTag
        self._invalid_tag = InvalidTag
        file_key = hchacha20(store_key, salt)
        if algorithm == ALGORITHM_AES256GCM:
            self._aead = AESGCM(file_key)
        elif algorithm == ALGORITHM_CHACHA20POLY1305:
            self._aead = ChaCha20Poly1305(file_key)
        else:
            raise ValueError("unknown algorithm %d" % algorithm)

    def open(self, number, sealed, associated, what="message"):
        """The message sealed as `number` (ciphertext and its 16-byte tag), or Invalid when the tag
        does not hold."""
        try:
            return self._aead.decrypt(nonce(number), bytes(sealed), bytes(associated))
        except self._invalid_tag:
            raise Invalid("%s: the tag does not hold" % what)

    def tag_holds(self, number, tag, associated):
        """Whether `tag` is that of the empty message sealed as `number` with `associated` data."""
        try:
            self._aead.decrypt(nonce(number), bytes(tag), bytes(associated))
            return True
        except self._invalid_tag:
            return False


def _self_test_xchacha():
    """With algorithm 2 a file's sealing is XChaCha20-Poly1305 with nonce salt || u64(n) (FORMAT.md):
    draft-irtf-cfrg-xchacha-03, appendix A.3.1, through FileCipher."""
    key = bytes(range(0x80, 0xA0))
    iv = bytes(range(0x40, 0x58))
    aad = bytes.fromhex("50515253c0c1c2c3c4c5c6c7")
    text = (b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
            b"sunscreen would be it.")
    sealed = bytes.fromhex(
        "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39"
        "ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9"
        "21f9664c97637da9768812f615c68b13b52e" + "c0875924c1c7987947deafd8780acf49")
    number = struct.unpack("<Q", iv[16:])[0]
    if FileCipher(ALGORITHM_CHACHA20POLY1305, key, iv[:16]).open(number, sealed, aad) != text:
        raise AssertionError("XChaCha20-Poly1305 test vector")


def parse_key(text, what):
    """32 bytes from 64 hexadecimal digits (either case)."""
    text = text.strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(text) != 2 * KEY_LENGTH or len(key) != KEY_LENGTH:
        raise KeyRefused("%s: a key is 64 hexadecimal digits (32 bytes)" % what)
    return key


def read_key_file(path):
    """A key file: the key's 32 bytes, or 64 hexadecimal digits and at most one newline."""
    with open(path, "rb") as f:
        data = f.read(200)
    if len(data) == KEY_LENGTH:
        return data
    text = data[:-1] if data.endswith(b"\n") else data
    text = text[:-1] if text.endswith(b"\r") else text
    try:
        return parse_key(text.decode("ascii"), "key file %s" % path)
    except UnicodeDecodeError:
        raise KeyRefused("key file %s: neither 32 bytes nor 64 hexadecimal digits" % path)


class StoreEncryption:
    """What the ENCRYPTION file says, checked against the key."""

    def __init__(self, store_key, data, path):
        if len(data) != ENCRYPTION_FILE_LENGTH:
            raise KeyRefused("%s: damaged: %d bytes, the file is %d" % (path, len(data), ENCRYPTION_FILE_LENGTH))
        if data[:8] != ENCRYPTION_MAGIC or crc32c(data, 0, 64) != struct.unpack_from("<I", data, 64)[0]:
            raise KeyRefused("%s: damaged: bad magic or checksum" % path)
        version, header_length, algorithm = struct.unpack_from("<HHH", data, 8)
        if version != 1 or header_length != ENCRYPTION_FILE_LENGTH:
            raise UnsupportedFormat("%s: version %d, header length %d" % (path, version, header_length))
        if algorithm not in ALGORITHM_NAMES:
            raise UnsupportedFormat("%s: algorithm %d" % (path, algorithm))
        self.algorithm = algorithm
        self.store_key = bytes(store_key)
        self.store_id = bytes(data[16:32])
        salt = bytes(data[32:48])
        if not self.cipher(salt).tag_holds(0, data[48:64], data[0:48]):
            raise KeyRefused("wrong key: the key check in %s fails (the store was encrypted with another key)" % path)

    def cipher(self, salt):
        return FileCipher(self.algorithm, self.store_key, salt)


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
                 "offset", "length", "payload")

    @property
    def lz4(self):
        return bool(self.flags & FLAG_LZ4)


def parse_record(data, offset, end, cipher=None, prefix=None):
    """Parses and validates (rules 1-4 and 4a of FORMAT.md) the record at `offset` of data[:end].

    `cipher`: the FileCipher of an encrypted (version 3) segment, None for a segment that is not
    encrypted. `prefix`: the key prefix of a version 4 segment whose header is valid, None for any
    other segment (where the key prefix flag is invalid). Returns a Record (its key whole, key and
    payload opened) or raises Invalid. Rule 5 (decompression) is checked by record_value.
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
    if flags & FLAG_KEY_PREFIX and (prefix is None or flags & FLAG_ENCRYPTED):
        raise Invalid("key prefix flag %s" % ("with the encrypted flag" if flags & FLAG_ENCRYPTED
                                              else "outside a version 4 segment whose header is valid"))
    # Rule 2: varints well formed, lengths within limits, before anything is sized from them.
    pos = offset + 6
    seq, pos = read_varint(data, pos, end)
    if not 1 <= seq <= MAX_SEQ:
        raise Invalid("sequence number %d out of range" % seq)
    key_length, pos = read_varint(data, pos, end)
    if not 1 <= key_length <= MAX_KEY_LENGTH:
        raise Invalid("key length %d out of range" % key_length)
    elided = 0  # the key's first bytes that are the segment's key prefix's, not stored
    if flags & FLAG_KEY_PREFIX:
        elided, pos = read_varint(data, pos, end)
        if not 1 <= elided <= min(key_length, len(prefix)):
            raise Invalid("elided %d out of range for a key of %d bytes and a key prefix of %d" % (elided, key_length, len(prefix)))
    value_length, pos = read_varint(data, pos, end)
    if value_length > MAX_VALUE_LENGTH:
        raise Invalid("value length %d out of range" % value_length)
    # "The shapes of Records allow the encrypted flag on deletes and commit records" (rule 4a
    # then decides whether the segment wants it).
    if rtype == TYPE_DELETE and (value_length != 0 or flags & ~(FLAG_BATCH | FLAG_ENCRYPTED | FLAG_KEY_PREFIX)):
        raise Invalid("delete with a value, the lz4 flag or an expiry")
    if rtype == TYPE_BATCH and (key_length != 8 or not 1 <= value_length <= 5 or flags & ~FLAG_ENCRYPTED):
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
    # Rule 3: the whole record fits in the file (an encrypted record's 16-byte tag included).
    header_end = key_start = pos
    payload_start = key_start + key_length - elided
    record_end = payload_start + stored_length + (TAG_LENGTH if flags & FLAG_ENCRYPTED else 0)
    if record_end > end:
        raise Invalid("record runs past the end of the file")
    # Rule 4: the checksum.
    stored_crc = struct.unpack_from("<I", data, offset)[0]
    if crc32c(data, offset + 4, record_end) != stored_crc:
        raise Invalid("checksum mismatch")
    # Rule 4a: the encrypted flag exactly in an encrypted segment, and the tag. The key and the
    # payload are one message, number = the record's offset, bytes 4 ..< header length as
    # associated data.
    if cipher is None:
        if flags & FLAG_ENCRYPTED:
            raise Invalid("encrypted record in a segment that is not encrypted")
        key = (prefix[:elided] if elided else b"") + bytes(data[key_start:payload_start])
        payload = bytes(data[payload_start:record_end])
    else:
        if not flags & FLAG_ENCRYPTED:
            raise Invalid("record without the encrypted flag in an encrypted segment")
        opened = cipher.open(offset, data[key_start:record_end], data[offset + 4:header_end], "record")
        key, payload = opened[:key_length], opened[key_length:]
    r = Record()
    r.type = rtype
    r.flags = flags
    r.seq = seq
    r.key = key
    r.value_length = value_length
    r.stored_length = stored_length
    r.expires_at = expires_at
    r.offset = offset
    r.length = record_end - offset
    r.payload = payload
    return r


def record_value(r, dictionary=None):
    """The value of a put record (rule 5: an lz4 payload must expand to exactly value length).

    `dictionary`: what the record's segment names — None for none, bytes for a usable one's
    content, or a str saying why the one it names cannot be used."""
    payload = r.payload
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


def load_dictionary_encrypted(directory, dictionary_id, expected_salt, encryption):
    """The content of version 2 dictionary file dictionary_id ("Dictionary files, version 2"), which
    a version 3 segment names by id and salt, or a str saying why it cannot be used."""
    name = "%010d.dict" % dictionary_id
    path = os.path.join(directory, name)
    if not 1 <= dictionary_id <= MAX_SEGMENT_ID:
        return "dictionary %d cannot be used: an id out of range" % dictionary_id
    header_length = DICTIONARY_HEADER_LENGTH_ENCRYPTED
    try:
        with open(path, "rb") as f:
            data = f.read(header_length + MAX_DICTIONARY_CONTENT + TAG_LENGTH + 1)
    except OSError as error:
        return "dictionary %d (%s) cannot be read: %s" % (dictionary_id, path, error.strerror)
    def unusable(why):
        return "dictionary %d (%s) cannot be used: %s" % (dictionary_id, path, why)
    if len(data) < header_length:
        return unusable("shorter than its header")
    if data[:8] != DICTIONARY_MAGIC or crc32c(data, 0, 60) != struct.unpack_from("<I", data, 60)[0]:
        return unusable("bad magic or header checksum")
    version, file_header_length, file_id, length, _ratio = struct.unpack_from("<HHIII", data, 8)
    if version != DICTIONARY_VERSION_ENCRYPTED or file_header_length != header_length or file_id != dictionary_id:
        return unusable("version %d, header length %d, id %d (an encrypted store's dictionaries are version 2)" % (version, file_header_length, file_id))
    if not 1 <= length <= MAX_DICTIONARY_CONTENT or len(data) != header_length + length + TAG_LENGTH:
        return unusable("content length %d in a file of %d bytes" % (length, len(data)))
    if crc32c(data, header_length) != struct.unpack_from("<I", data, 56)[0]:
        return unusable("content checksum mismatch")
    if bytes(data[24:40]) != encryption.store_id:
        return unusable("another store's dictionary (its store id is not the store's)")
    salt = bytes(data[40:56])
    if salt != expected_salt:
        return unusable("not the dictionary file the segment was written with (its salt is not the one the segment's header names)")
    try:
        return encryption.cipher(salt).open(0, data[header_length:], data[0:56], "sealed content")
    except Invalid as error:
        return unusable(str(error))


def zstd_compress_bound(n):
    """ZSTD_compressBound from zstd.h: n + n/256, plus (131072 - n)/2048 below 128 KiB."""
    return n + n // 256 + ((131072 - n) // 2048 if n < 131072 else 0)


_zstd = None


def zstd_decompress(src, expected_length):
    """A hint block of codec 2: exactly one zstd frame stating `expected_length` as its content size,
    naming no dictionary, expanding to exactly that many bytes."""
    global _zstd
    import ctypes
    import ctypes.util
    if _zstd is None:
        name = ctypes.util.find_library("zstd") or "libzstd.so.1"
        _zstd = ctypes.CDLL(name)
        _zstd.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
        _zstd.ZSTD_getFrameContentSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        _zstd.ZSTD_findFrameCompressedSize.restype = ctypes.c_size_t
        _zstd.ZSTD_findFrameCompressedSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        _zstd.ZSTD_getDictID_fromFrame.restype = ctypes.c_uint
        _zstd.ZSTD_getDictID_fromFrame.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        _zstd.ZSTD_decompress.restype = ctypes.c_size_t
        _zstd.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        _zstd.ZSTD_isError.restype = ctypes.c_uint
        _zstd.ZSTD_isError.argtypes = [ctypes.c_size_t]
    src = bytes(src)
    if _zstd.ZSTD_getFrameContentSize(src, len(src)) != expected_length:
        raise Invalid("zstd: the frame does not state a content size of %d" % expected_length)
    if _zstd.ZSTD_findFrameCompressedSize(src, len(src)) != len(src):
        raise Invalid("zstd: not exactly one frame")
    if _zstd.ZSTD_getDictID_fromFrame(src, len(src)) != 0:
        raise Invalid("zstd: the frame names a dictionary")
    out = ctypes.create_string_buffer(expected_length)
    produced = _zstd.ZSTD_decompress(out, expected_length, src, len(src))
    if _zstd.ZSTD_isError(produced) or produced != expected_length:
        raise Invalid("zstd: the frame does not expand to %d bytes" % expected_length)
    return out.raw


# ---------------------------------------------------------------------------------------------
# Hint files

class HintEntry:
    __slots__ = ("type", "flags", "seq", "record_length", "value_length", "key", "expires_at", "offset")


def commit_count(r):
    """The member count a batch commit record's value states: a varint filling the value exactly,
    else -1 (which no batch has)."""
    try:
        count, end = read_varint(r.payload, 0, len(r.payload))
    except Invalid:
        return -1
    return count if end == len(r.payload) else -1


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


def hint_header(hint, encryption):
    """The fields of a hint file's header that its header checks vouch for (magic, checksum, version
    and header length; with `encryption`, version 2 or 4 and its tag), or raises Invalid. Returns
    (version, block count, segment id, covered length, entry count, segment salt or None, the
    hint's FileCipher or None, the key prefix of the segment's header it holds, its header length).
    A plain hint's header is 48 + p bytes: p, the key prefix's length, at 40, the prefix at 44."""
    header_length = HINT_HEADER_LENGTH_ENCRYPTED if encryption else HINT_HEADER_LENGTH
    if encryption is None and len(hint) >= 44:
        prefix_length = struct.unpack_from("<I", hint, 40)[0]
        if prefix_length > MAX_KEY_PREFIX:
            raise Invalid("hint holds a key prefix of %d bytes" % prefix_length)
        header_length += prefix_length
    if len(hint) < 12:
        raise Invalid("hint shorter than its header")
    if hint[0:8] != HINT_MAGIC:
        raise Invalid("bad hint magic")
    version, length = struct.unpack_from("<HH", hint, 8)
    if encryption is None and version in HINT_VERSIONS_ENCRYPTED:
        raise Invalid("an encrypted store's hint (version %d) in a store that is not encrypted" % version)
    if encryption is not None and version in HINT_VERSIONS_PLAIN:
        raise Invalid("a version %d hint in an encrypted store" % version)
    if len(hint) < header_length:
        raise Invalid("hint shorter than its header")
    crc_at = header_length - 4
    if crc32c(hint, 0, crc_at) != struct.unpack_from("<I", hint, crc_at)[0]:
        raise Invalid("hint header checksum mismatch")
    if version not in (HINT_VERSIONS_ENCRYPTED if encryption else HINT_VERSIONS_PLAIN):
        raise Invalid("unknown hint version %d" % version)
    if length != header_length:
        raise Invalid("unknown hint header length %d" % length)
    block_count, hint_segment, covered, entry_count = struct.unpack_from("<IQQQ", hint, 12)
    if encryption is None:
        prefix = bytes(hint[44:crc_at])
        return version, block_count, hint_segment, covered, entry_count, None, None, prefix, header_length
    # An encrypted segment holds no key prefix: the u32 before the checksum is 0.
    if struct.unpack_from("<I", hint, crc_at - 4)[0] != 0:
        raise Invalid("an encrypted store's hint holds a key prefix")
    segment_salt = bytes(hint[40:56])
    cipher = encryption.cipher(bytes(hint[56:72]))
    if not cipher.tag_holds(0, hint[72:88], hint[0:72]):
        raise Invalid("hint header tag does not hold")
    return version, block_count, hint_segment, covered, entry_count, segment_salt, cipher, b"", header_length


def parse_hint(hint, segment_id, segment_length, header, encryption=None):
    """Parses and checks a whole hint file. Returns (covered length, entries, the key prefix it
    holds) or raises Invalid.

    `header`: the segment's SegmentHeader. The hint holds the key prefix the segment's header holds
    (p bytes, none: empty), which a valid header must hold (behind a damaged one the hint's is
    taken): its first record is at 46 + p (40 for none), and only with p >= 1 may entries have the
    key prefix flag, eliding at most p bytes. With `encryption` (an encrypted store), the hint must
    be version 2 or 4 and describe the segment whose header holds header.salt."""
    version, block_count, hint_segment, covered, entry_count, hint_segment_salt, cipher, prefix, pos = hint_header(hint, encryption)
    if header.valid and not encryption and prefix != (header.prefix or b""):
        raise Invalid("hint holds another key prefix than the segment header's")
    prefix_length = len(prefix)
    first_record = header.length if encryption else 46 + prefix_length if prefix_length else SEGMENT_HEADER_LENGTH
    tag = TAG_LENGTH if encryption else 0
    if hint_segment != segment_id:
        raise Invalid("hint is for segment %d" % hint_segment)
    if encryption is not None and hint_segment_salt != header.salt:
        raise Invalid("hint is for another file of segment %d (its segment salt is not the segment's)" % segment_id)
    if covered > segment_length:
        raise Invalid("hint covers %d bytes, the segment has %d" % (covered, segment_length))
    if covered < first_record:
        raise Invalid("hint covers %d bytes, less than the segment header" % covered)
    entries = []
    offset = first_record
    for block_index in range(block_count):
        if pos + 16 > len(hint):
            raise Invalid("block %d header past the end of the hint" % block_index)
        raw_length, stored_length, codec, block_crc = struct.unpack_from("<IIII", hint, pos)
        block_header = hint[pos:pos + 12]
        pos += 16
        if not 1 <= raw_length <= MAX_HINT_BLOCK_RAW:
            raise Invalid("block %d raw length %d out of range" % (block_index, raw_length))
        # Version 2: stored length counts the tag ("codec 0: raw length + 16").
        if codec == 0:
            if stored_length != raw_length + tag:
                raise Invalid("raw block %d stored length %d != raw length %d" % (block_index, stored_length, raw_length))
        elif codec == 1:
            if not 1 + tag <= stored_length <= lz4_compress_bound(raw_length) + tag:
                raise Invalid("lz4 block %d stored length %d out of range" % (block_index, stored_length))
        elif codec == 2:
            if not 1 + tag <= stored_length <= zstd_compress_bound(raw_length) + tag:
                raise Invalid("zstd block %d stored length %d out of range" % (block_index, stored_length))
        else:
            raise Invalid("block %d has unknown codec %d" % (block_index, codec))
        if pos + stored_length > len(hint):
            raise Invalid("block %d runs past the end of the hint" % block_index)
        stored = hint[pos:pos + stored_length]
        pos += stored_length
        if crc32c(stored) != block_crc:
            raise Invalid("block %d checksum mismatch" % block_index)
        if cipher is not None:
            # Message number i + 1, the block's first 12 bytes as associated data.
            stored = cipher.open(block_index + 1, stored, block_header, "block %d" % block_index)
        raw = stored if codec == 0 else lz4_decompress(stored, raw_length) if codec == 1 else zstd_decompress(stored, raw_length)
        p = 0
        previous = None  # the block's entry before, which a version 3 or 4 entry is coded against
        while p < raw_length:
            if version in HINT_VERSIONS_DELTA:
                e, p = parse_delta_hint_entry(raw, p, raw_length, encryption is not None, previous, prefix_length)
            else:
                e, p = parse_hint_entry(raw, p, raw_length, encryption is not None, prefix_length)
            previous = e
            e.offset = offset
            offset += e.record_length
            entries.append(e)
    if pos != len(hint):
        raise Invalid("hint has %d bytes after its last block" % (len(hint) - pos))
    if len(entries) != entry_count:
        raise Invalid("hint has %d entries, header says %d" % (len(entries), entry_count))
    if offset != covered:
        raise Invalid("hint entries end at %d, covered length is %d" % (offset, covered))
    return covered, entries, prefix


def varint_size(value):
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def plausible_record_length(e, key_length, encrypted, prefix_length):
    """Whether a record with the entry's fields can be e.record_length bytes long ("Hint files"):
    exactly 6 + size(seq) + size(key length) + size(value length) + (8 if expires) + key length
    + value length for a raw put, a delete and a commit; that fixed part plus size(s) + s for some
    1 <= s <= compressBound(value length) for an lz4 put; plus 16 (the tag) when encrypted. With
    the key prefix flag the key takes size(elided) + key length - elided bytes for some
    1 <= elided <= m = min(key length, p), p the segment's key prefix length as the hint declares
    it: any count in [key length - m + size(m), key length]; with p = 0 the flag is impossible."""
    fixed = 6 + varint_size(e.seq) + varint_size(key_length) + varint_size(e.value_length)
    fixed += 8 if e.flags & FLAG_EXPIRES else 0
    fixed += TAG_LENGTH if encrypted else 0
    longest = shortest = key_length  # the bytes the key can take in the record
    if e.flags & FLAG_KEY_PREFIX:
        m = min(key_length, prefix_length)
        if m == 0:
            return False
        shortest = key_length - m + varint_size(m)
    rest = e.record_length - fixed
    if not e.flags & FLAG_LZ4:
        return shortest <= rest - e.value_length <= longest
    # rest = the key's bytes + size(s) + s: for each size j of s, a range of s.
    bound = lz4_compress_bound(e.value_length)
    return any(max(1 << 7 * (j - 1), rest - longest - j) <= min(bound, (1 << 7 * j) - 1, rest - shortest - j)
               for j in range(1, 6))


def hint_entry_type_and_flags(raw, p, end, encrypted):
    """A hint entry's first two bytes, checked: a new HintEntry with its type and flags."""
    if p + 2 > end:
        raise Invalid("hint entry spans the end of its block")
    e = HintEntry()
    e.type = raw[p]
    e.flags = raw[p + 1]
    if e.type not in KNOWN_TYPES:
        raise Invalid("hint entry with unknown type %d" % e.type)
    if e.flags & ~KNOWN_FLAGS or (e.flags & FLAG_DICTIONARY and not e.flags & FLAG_LZ4):
        raise Invalid("hint entry with unknown flags 0x%02x" % e.flags)
    if bool(e.flags & FLAG_ENCRYPTED) != encrypted:
        raise Invalid("hint entry %s the encrypted flag" % ("without" if encrypted else "with"))
    return e


def parse_hint_entry(raw, p, end, encrypted=False, prefix_length=0):
    """A version 1 or 2 entry: seq and key whole."""
    e = hint_entry_type_and_flags(raw, p, end, encrypted)
    p += 2
    e.seq, p = read_varint(raw, p, end)
    if not 1 <= e.seq <= MAX_SEQ:
        raise Invalid("hint entry sequence number %d out of range" % e.seq)
    e.record_length, p = read_varint(raw, p, end)
    e.value_length, p = read_varint(raw, p, end)
    key_length, p = read_varint(raw, p, end)
    if not 1 <= key_length <= MAX_KEY_LENGTH:
        raise Invalid("hint entry key length %d out of range" % key_length)
    return finish_hint_entry(e, raw, p, end, encrypted, b"", key_length, prefix_length)


def parse_delta_hint_entry(raw, p, end, encrypted, previous, prefix_length=0):
    """A version 3 or 4 entry: its seq a zigzag delta from `previous` (the block's entry before,
    None for the first: seq 0), its key `shared` bytes of the previous key and a suffix."""
    e = hint_entry_type_and_flags(raw, p, end, encrypted)
    p += 2
    zigzag, p = read_varint(raw, p, end)
    delta = zigzag >> 1 if zigzag & 1 == 0 else -(zigzag >> 1) - 1
    e.seq = (previous.seq if previous else 0) + delta
    if not 1 <= e.seq <= MAX_SEQ:
        raise Invalid("hint entry sequence number %d out of range" % e.seq)
    e.record_length, p = read_varint(raw, p, end)
    e.value_length, p = read_varint(raw, p, end)
    shared, p = read_varint(raw, p, end)
    previous_key = previous.key if previous else b""
    if shared > len(previous_key):
        raise Invalid("hint entry shares %d bytes of a key of %d" % (shared, len(previous_key)))
    suffix_length, p = read_varint(raw, p, end)
    key_length = shared + suffix_length
    if not 1 <= key_length <= MAX_KEY_LENGTH:
        raise Invalid("hint entry key length %d out of range" % key_length)
    return finish_hint_entry(e, raw, p, end, encrypted, previous_key[:shared], suffix_length, prefix_length)


def finish_hint_entry(e, raw, p, end, encrypted, key_prefix, key_rest, prefix_length):
    """The checks and fields after the lengths: `key_prefix` and the `key_rest` bytes at the end of
    the entry make its key; `prefix_length`: the segment's key prefix's, as the hint declares it."""
    key_length = len(key_prefix) + key_rest
    if e.value_length > MAX_VALUE_LENGTH:
        raise Invalid("hint entry value length %d out of range" % e.value_length)
    if e.type == TYPE_DELETE and (e.value_length != 0 or e.flags & ~(FLAG_BATCH | FLAG_ENCRYPTED | FLAG_KEY_PREFIX)):
        raise Invalid("hint entry for a delete with a value, the lz4 flag or an expiry")
    if e.type == TYPE_BATCH and (key_length != 8 or not 1 <= e.value_length <= 5 or e.flags & ~FLAG_ENCRYPTED):
        raise Invalid("hint entry for a malformed batch commit")
    if not plausible_record_length(e, key_length, encrypted, prefix_length):
        raise Invalid("hint entry record length %d impossible for its fields" % e.record_length)
    e.expires_at = None
    if e.flags & FLAG_EXPIRES:
        if p + 8 > end:
            raise Invalid("hint entry expiry spans the end of its block")
        e.expires_at = struct.unpack_from("<Q", raw, p)[0]
        p += 8
    if p + key_rest > end:
        raise Invalid("hint entry key spans the end of its block")
    e.key = bytes(key_prefix) + bytes(raw[p:p + key_rest])
    p += key_rest
    return e, p


# ---------------------------------------------------------------------------------------------
# The store

class Winner:
    """The record with the highest seq seen so far for a key."""
    __slots__ = ("seq", "type", "flags", "expires_at", "segment", "offset", "length", "value_length", "from_hint")


def plain_header_length(data):
    """The length a segment header that is not encrypted must have ("Segment files": 40, or 46 + p
    in version 4) when data, at least 40 bytes, starts with the magic and a header whose checksums
    hold: the one at 36 of bytes 0 ..< 36, and in version 4 the one at 42 + p of bytes 0 ..< 42 + p,
    p being 1 ..= 255 and data at least 46 + p bytes. Else None."""
    if data[0:8] != SEGMENT_MAGIC or crc32c(data, 0, 36) != struct.unpack_from("<I", data, 36)[0]:
        return None
    if struct.unpack_from("<H", data, 8)[0] != FORMAT_VERSION_KEY_PREFIX:
        return SEGMENT_HEADER_LENGTH
    if len(data) < 42:
        return None
    p = struct.unpack_from("<H", data, 40)[0]
    if not 1 <= p <= MAX_KEY_PREFIX or len(data) < 46 + p:
        return None
    return 46 + p if crc32c(data, 0, 42 + p) == struct.unpack_from("<I", data, 42 + p)[0] else None


class SegmentHeader:
    """What Reader.examine_header found."""

    def __init__(self):
        self.valid = False        # the header can be used
        self.short = False        # the file is shorter than a header
        self.short_version_4 = False  # ... than a version 4 header (or all zeros): torn only if active
        self.whole_file = False   # an encrypted store's: an invalid header makes the whole file damage
        self.reason = None        # why it is not valid
        self.length = SEGMENT_HEADER_LENGTH  # where records start
        self.base_seq = None
        self.wrong_id = None      # versions 1 and 2: the id the header gives, when not the file name's
        self.dictionary = None    # (id, crc) for version 2, (id, salt) for version 3
        self.salt = None          # version 3: the segment's salt
        self.cipher = None        # version 3: the FileCipher of its records
        self.prefix = None        # version 4, when valid: the key prefix its records' keys may start with


class Reader:
    def __init__(self, directory, use_hints=True, now_ms=None, key=None):
        self.directory = directory
        self.use_hints = use_hints
        self.now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        self.key = key           # the store key (32 bytes) for an encrypted store
        self.encryption = None   # StoreEncryption, for an encrypted store
        self.index = {}
        self.segments = []       # (id, name, data)
        self.dictionaries = {}   # segment id -> what its header names (see record_value)
        self.ciphers = {}        # segment id -> its FileCipher (None: not encrypted)
        self.prefixes = {}       # segment id -> its key prefix (None: not a valid version 4 header)
        self.dictionary_files = {}  # what a segment header names -> what load_dictionary* gave
        self.summary = {
            "segments": 0, "records": 0, "records_from_hints": 0, "records_scanned": 0,
            "hints_used": [], "hints_ignored": [], "damaged": [], "torn_tail": None,
            "torn_segment": None, "unreadable": [],
        }

    # -- loading ----------------------------------------------------------------------------

    def load(self):
        names = os.listdir(self.directory)
        # "Encryption": a store with an ENCRYPTION file is read with its key, checked first; a
        # store without one never with a key.
        if ENCRYPTION_FILE in names:
            path = os.path.join(self.directory, ENCRYPTION_FILE)
            if self.key is None:
                raise KeyRefused("the store is encrypted (it has %s): give its key (--key, --key-file or CASK_KEY)" % path)
            with open(path, "rb") as f:
                self.encryption = StoreEncryption(self.key, f.read(ENCRYPTION_FILE_LENGTH + 1), path)
        elif self.key is not None:
            raise KeyRefused("a key was given, and the store is not encrypted (it has no %s file)" % ENCRYPTION_FILE)
        self.summary["encrypted"] = self.encryption is not None
        if self.encryption is not None:
            self.summary["algorithm"] = ALGORITHM_NAMES[self.encryption.algorithm]
        segment_ids = sorted(int(m.group(1)) for m in map(SEGMENT_NAME.match, names) if m)
        # Compaction: the segments a valid manifest lists were replaced; ignore them.
        if "COMPACTION" in names:
            with open(os.path.join(self.directory, "COMPACTION"), "rb") as f:
                manifest = f.read()
            replaced = parse_compaction_manifest(manifest)
            if replaced is None:
                self.damage("COMPACTION", 0, len(manifest), "invalid compaction manifest; ignored", "compaction-manifest")
            else:
                segment_ids = [i for i in segment_ids if i not in replaced]
        # Strays ("The store directory"): a name with .cask, .hint or .dict in it that is not
        # exactly a store file's (ten digits, an id in range), and does not end in .tmp.
        self.summary["ignored"] = sorted(n for n in names if is_stray(n))
        segment_ids = [i for i in segment_ids if 1 <= i <= MAX_SEGMENT_ID]
        hint_names = set(n for n in names if HINT_NAME.match(n))
        self.summary["segments"] = len(segment_ids)
        headers, sizes = {}, {}
        for segment_id in segment_ids:
            with open(os.path.join(self.directory, "%010d.cask" % segment_id), "rb") as f:
                headers[segment_id] = self.examine_header(segment_id, f.read(MAX_SEGMENT_HEADER_LENGTH))
                sizes[segment_id] = os.fstat(f.fileno()).st_size
        active = self.active_segment(segment_ids, headers, sizes, hint_names)
        for segment_id in segment_ids:
            last = segment_id == active
            name = "%010d.cask" % segment_id
            with open(os.path.join(self.directory, name), "rb") as f:
                data = f.read()
            self.segments.append((segment_id, name, data))
            self.load_segment(segment_id, name, data, last, hint_names, self.examine_header(segment_id, data))

    def examine_header(self, segment_id, data):
        """What a segment's header says ("Segment files"; "Segment header, version 3"), from the
        first bytes of the file (all of them when shorter). Raises UnsupportedFormat for a header of
        another version or header length, KeyRefused for an encrypted segment in a store that is
        not encrypted."""
        h = SegmentHeader()
        name = "%010d.cask" % segment_id
        if self.encryption is None:
            h.length = SEGMENT_HEADER_LENGTH
            if len(data) >= SEGMENT_HEADER_LENGTH_ENCRYPTED and data[0:8] == SEGMENT_MAGIC \
                    and struct.unpack_from("<HH", data, 8) == (FORMAT_VERSION_ENCRYPTED, SEGMENT_HEADER_LENGTH_ENCRYPTED) \
                    and crc32c(data, 0, 104) == struct.unpack_from("<I", data, 104)[0]:
                raise KeyRefused("%s is a segment of an encrypted store (version 3), and the store has no %s file" % (name, ENCRYPTION_FILE))
            if len(data) < SEGMENT_HEADER_LENGTH:
                h.short = True
                h.reason = "segment shorter than its header"
                return h
            if self.torn_version_4(data):
                h.short = h.short_version_4 = True
                h.reason = "segment shorter than its header"
                return h
            length = plain_header_length(data)
            if length is None:
                # Not a header we can trust at all (in version 4, nor its key prefix). Records are
                # self-checking, so scan anyway, from offset 40.
                h.reason = "bad segment header (magic, checksum or version 4 prefix length)"
                return h
            version, header_length, dictionary_crc, header_id, base_seq, dictionary_id = struct.unpack_from("<HHIQQI", data, 8)
            if version not in (FORMAT_VERSION, FORMAT_VERSION_DICTIONARY, FORMAT_VERSION_KEY_PREFIX) or header_length != length:
                raise UnsupportedFormat("%s: segment version %d, header length %d" % (name, version, header_length))
            h.base_seq = base_seq
            if base_seq > MAX_SEQ:
                h.reason = "segment header base seq above 2^63-1"
            elif version == FORMAT_VERSION_DICTIONARY and not 1 <= dictionary_id <= MAX_SEGMENT_ID:
                h.reason = "segment header names dictionary %d" % dictionary_id
            elif version == FORMAT_VERSION_KEY_PREFIX and (dictionary_id > MAX_SEGMENT_ID or dictionary_id == 0 and dictionary_crc != 0):
                h.reason = "segment header names dictionary %d with crc 0x%08x" % (dictionary_id, dictionary_crc)
            else:
                h.valid = True
                if header_id != segment_id:
                    # Reported at bytes 16 ..< 24; the file name's id is used.
                    h.wrong_id = header_id
                if version != FORMAT_VERSION and dictionary_id != 0:
                    h.dictionary = (dictionary_id, dictionary_crc)
                if version == FORMAT_VERSION_KEY_PREFIX:
                    h.prefix = bytes(data[42:length - 4])
                    h.length = length
            return h
        # An encrypted store: a segment is used only when its header's crc holds, its store id and
        # algorithm are the store's, its tag holds and its segment id is its name's; any other is
        # damage as a whole.
        h.length = SEGMENT_HEADER_LENGTH_ENCRYPTED
        h.whole_file = True
        if len(data) >= 12 and data[0:8] == SEGMENT_MAGIC:
            version, header_length = struct.unpack_from("<HH", data, 8)
            length = plain_header_length(data) if len(data) >= SEGMENT_HEADER_LENGTH else None
            if (version, header_length) != (FORMAT_VERSION_ENCRYPTED, SEGMENT_HEADER_LENGTH_ENCRYPTED) and length is not None:
                if version in (FORMAT_VERSION, FORMAT_VERSION_DICTIONARY, FORMAT_VERSION_KEY_PREFIX) and header_length == length:
                    h.reason = "a segment that is not encrypted (version %d) in an encrypted store" % version
                    return h
                raise UnsupportedFormat("%s: segment version %d, header length %d" % (name, version, header_length))
        if len(data) < SEGMENT_HEADER_LENGTH_ENCRYPTED:
            h.short = True
            h.reason = "segment shorter than its header"
            return h
        if data[0:8] != SEGMENT_MAGIC or crc32c(data, 0, 104) != struct.unpack_from("<I", data, 104)[0]:
            h.reason = "bad segment header (magic or checksum)"
            return h
        version, header_length, algorithm, _reserved, header_id, base_seq, dictionary_id = struct.unpack_from("<HHHHQQI", data, 8)
        if (version, header_length) != (FORMAT_VERSION_ENCRYPTED, SEGMENT_HEADER_LENGTH_ENCRYPTED):
            raise UnsupportedFormat("%s: segment version %d, header length %d" % (name, version, header_length))
        salt = bytes(data[56:72])
        if algorithm != self.encryption.algorithm:
            h.reason = "segment header names algorithm %d, the store's is %d" % (algorithm, self.encryption.algorithm)
        elif bytes(data[40:56]) != self.encryption.store_id:
            h.reason = "another store's segment (its store id is not the store's)"
        elif not self.encryption.cipher(salt).tag_holds(0, data[88:104], data[0:88]):
            h.reason = "segment header tag does not hold"
        elif header_id != segment_id:
            h.reason = "segment header says id %d (a renamed or swapped segment)" % header_id
        elif base_seq > MAX_SEQ:
            # Not in the list of "Segment header, version 3"; damage as in versions 1 and 2.
            h.reason = "segment header base seq above 2^63-1"
        elif dictionary_id > MAX_SEGMENT_ID:
            # As a version 2 header's dictionary id above the limit ("Segment files").
            h.reason = "segment header names dictionary %d" % dictionary_id
        else:
            h.valid = True
            h.base_seq = base_seq
            h.salt = salt
            h.cipher = self.encryption.cipher(salt)
            if dictionary_id != 0:
                h.dictionary = (dictionary_id, bytes(data[72:88]))
        return h

    def active_segment(self, segment_ids, headers, sizes, hint_names):
        """The segment a writer appends to: the highest base seq (ties: highest id) among the
        valid headers. A newest segment whose header is not valid is the active one only when its
        creation was torn ("Reading a store", rule 4: no hint file, since a hint is written only
        once a header is whole; and no longer than a header, or all zeros, or a version 4 header
        cut short with no record after it); otherwise its header is damage, and no segment is
        active."""
        if segment_ids and not headers[segment_ids[-1]].valid:
            newest = segment_ids[-1]
            h, size = headers[newest], sizes[newest]
            # examine_header saw the whole file when it is no longer than the longest header.
            torn = size <= h.length or (size <= MAX_SEGMENT_HEADER_LENGTH and h.short)
            return newest if torn and "%010d.hint" % newest not in hint_names else None
        best = None
        for segment_id in segment_ids:
            h = headers[segment_id]
            if not h.valid:
                continue
            if best is None or (h.base_seq, segment_id) > best:
                best = (h.base_seq, segment_id)
        return best[1] if best else None

    @staticmethod
    def torn_version_4(data):
        """Whether a file of 40 to 46 + 255 bytes is what a torn creation of a version 4 segment
        leaves ("Reading a store", rule 4): all zeros, or a header whose checksum at 36 holds, of
        version 4 with p in 1 ..= 255, cut before 46 + p, and no valid record at any offset from 40
        (whatever prefix it would need)."""
        if not SEGMENT_HEADER_LENGTH <= len(data) <= MAX_SEGMENT_HEADER_LENGTH:
            return False
        if not any(data):
            return True
        if data[0:8] != SEGMENT_MAGIC or struct.unpack_from("<H", data, 8)[0] != FORMAT_VERSION_KEY_PREFIX \
                or crc32c(data, 0, 36) != struct.unpack_from("<I", data, 36)[0]:
            return False
        if len(data) >= 42:
            p = struct.unpack_from("<H", data, 40)[0]
            if not 1 <= p <= MAX_KEY_PREFIX or len(data) >= 46 + p:
                return False
        for offset in range(SEGMENT_HEADER_LENGTH, len(data)):
            try:
                parse_record(data, offset, len(data), None, b"\x00" * MAX_KEY_PREFIX)
                return False
            except Invalid:
                pass
        return True

    def lost_tail(self, hint, segment_id, name, segment_length, header):
        """Rule 5, lost tails: a hint whose header holds (and, encrypted, names this very segment
        file) and covers more than the segment says the records past its end were lost."""
        try:
            _version, _blocks, hint_segment, covered, _entries, segment_salt, _cipher, _prefix, _length = hint_header(hint, self.encryption)
        except Invalid:
            return
        if hint_segment == segment_id and segment_salt == header.salt and covered > segment_length:
            self.damage(name, segment_length, covered, "the segment lost its tail", "record")

    def load_segment(self, segment_id, name, data, last, hint_names, header):
        hint_name = "%010d.hint" % segment_id
        has_hint = self.use_hints and hint_name in hint_names
        if header.short_version_4 and not last:
            # Only the active segment's creation can be torn: this is a damaged header, and the
            # records after byte 40 are scanned.
            header.short = False
        if header.short and (last or not header.whole_file):
            if last:
                # A torn segment creation: a writer rewrites the header; a reader sees no records.
                self.summary["torn_segment"] = {"file": name, "length": len(data)}
            else:
                self.damage(name, 0, len(data), "sealed segment shorter than its header", "segment-header")
                if has_hint:
                    # Its hint is not used (there is no header to check it against), and rule 5
                    # applies: the records it lists past the end were lost.
                    with open(os.path.join(self.directory, hint_name), "rb") as f:
                        hint = f.read()
                    self.summary["hints_ignored"].append({"file": hint_name, "reason": "its segment is shorter than a header"})
                    self.lost_tail(hint, segment_id, name, len(data), header)
            return
        if header.whole_file and not header.valid:
            if last and len(data) <= header.length:
                self.summary["torn_segment"] = {"file": name, "length": len(data)}
                return
            # Nothing in it can be told from bytes anyone could have written: none of its records
            # is read, nor its hint, which is not examined (it names the segment by its header's
            # salt) and so not reported.
            self.damage(name, 0, len(data), header.reason, "segment-header")
            return
        header_end = SEGMENT_HEADER_LENGTH  # a damaged header's range, reported once the hint is read
        if header.valid and header.wrong_id is not None:
            self.damage(name, 16, 24, "segment header says id %d" % header.wrong_id, "segment-header")
        cipher = header.cipher
        self.ciphers[segment_id] = cipher
        prefix = header.prefix
        if header.dictionary is not None:
            # Segments naming one dictionary (by id and crc, or id and salt) share what it gives.
            if header.dictionary not in self.dictionary_files:
                dictionary_id, check = header.dictionary
                if self.encryption is None:
                    found = load_dictionary(self.directory, dictionary_id, check)
                else:
                    found = load_dictionary_encrypted(self.directory, dictionary_id, check, self.encryption)
                self.dictionary_files[header.dictionary] = found
            self.dictionaries[segment_id] = self.dictionary_files[header.dictionary]
        start = header.length
        self.pending = []  # batch members waiting for their commit record (FORMAT.md, "Batches")
        self.settled_end = header.length  # where the last record that is not a member ends
        if has_hint:
            with open(os.path.join(self.directory, hint_name), "rb") as f:
                hint = f.read()
            try:
                covered, entries, hint_prefix = parse_hint(hint, segment_id, len(data), header, self.encryption)
            except Invalid as error:
                self.summary["hints_ignored"].append({"file": hint_name, "reason": str(error)})
                self.lost_tail(hint, segment_id, name, len(data), header)
            else:
                if not header.valid and hint_prefix:
                    # Behind a damaged header, the key prefix the hint holds: the header was the
                    # version 4 header holding it, and the records that elide it read.
                    prefix = hint_prefix
                    header_end = min(len(data), 46 + len(hint_prefix))
                self.summary["hints_used"].append(hint_name)
                for e in entries:
                    self.receive(e.key, e.seq, e.type, e.flags, e.expires_at, segment_id, e.offset,
                                 e.record_length, e.value_length, True)
                self.summary["records_from_hints"] += len(entries)
                start = covered
        if not header.valid:
            self.damage(name, 0, header_end, header.reason, "segment-header")
        self.prefixes[segment_id] = prefix
        self.scan(segment_id, name, data, start, last, cipher, prefix)
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
                self.damage(name, first, end, "batch without its commit record", "uncommitted-batch")
        self.merge_uncommitted(name)

    def merge_uncommitted(self, name):
        """Rule 6: one uncommitted-batch range per run of adjacent such records (each was reported
        alone), in the file's order among its other ranges."""
        ranges = self.summary["damaged"]
        mine = sorted((d for d in ranges if d["file"] == name and d["kind"] == "uncommitted-batch"), key=lambda d: d["start"])
        merged = []
        for d in mine:
            if merged and merged[-1]["end"] == d["start"]:
                merged[-1] = dict(merged[-1], end=d["end"], reason="members and commit record of a batch that is not whole")
            else:
                merged.append(d)
        if len(merged) != len(mine):
            others = [d for d in ranges if not (d["file"] == name and d["kind"] == "uncommitted-batch")]
            self.summary["damaged"] = others + merged

    def scan(self, segment_id, name, data, pos, last, cipher, prefix):
        end = len(data)
        while pos < end:
            try:
                r = parse_record(data, pos, end, cipher, prefix)
            except Invalid as error:
                reason = str(error)
                damage_start = pos
                pos += 1
                r = None
                if data.count(0, pos, end) == end - pos:
                    # Only zeros follow: no record can start in them (type 0 is invalid), so the
                    # search below would try every offset and find none. Skip it.
                    pos = end
                while pos < end:
                    try:
                        r = parse_record(data, pos, end, cipher, prefix)
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
                self.damage(name, damage_start, pos, reason, "record")
                if r is None:
                    return
            self.commit_count = commit_count(r) if r.type == TYPE_BATCH else None
            self.receive(r.key, r.seq, r.type, r.flags, r.expires_at, segment_id, r.offset, r.length,
                         r.value_length, False)
            self.commit_count = None
            self.summary["records_scanned"] += 1
            pos += r.length

    def damage(self, name, start, end, reason, kind):
        """A damaged range, with one of the kinds of rule 6 of "Reading a store"."""
        self.summary["damaged"].append({"file": name, "start": start, "end": end, "reason": reason, "kind": kind})

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
                    self.damage(name, m[6], m[6] + m[7], "member of an incomplete batch", "uncommitted-batch")
                self.damage(name, offset, offset + length, "commit record of an incomplete batch", "uncommitted-batch")
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
                r = parse_record(data, w.offset, len(data), self.ciphers.get(w.segment), self.prefixes.get(w.segment))
                if (r.length != w.length or r.key != key or r.seq != w.seq or r.type != w.type
                        or r.flags != w.flags or r.value_length != w.value_length or r.expires_at != w.expires_at):
                    raise Invalid("record at the hinted offset does not match the hint")
                value = record_value(r, self.dictionaries.get(w.segment))
            except Invalid as error:
                name = "%010d.cask" % w.segment
                self.summary["unreadable"].append({"file": name, "offset": w.offset, "key_hex": key.hex(),
                                                   "reason": str(error)})
                yield key, None, "%s@%d: %s" % (name, w.offset, error)
                continue
            yield key, value, None


USAGE = "usage: cask_reader.py DIR [--no-hints] [--json] [--now MILLIS] [--key HEX | --key-file PATH]"


def main(argv):
    args = list(argv[1:])
    use_hints = True
    as_json = False
    now_ms = None
    directory = None
    key_hex = None
    key_file = None
    while args:
        a = args.pop(0)
        if a == "--no-hints":
            use_hints = False
        elif a == "--json":
            as_json = True
        elif a in ("--now", "--key", "--key-file"):
            if not args:
                print("%s needs a value\n%s" % (a, USAGE), file=sys.stderr)
                return 2
            value = args.pop(0)
            if a == "--now":
                now_ms = int(value)
            elif a == "--key":
                key_hex = value
            else:
                key_file = value
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif directory is None and not a.startswith("--"):
            directory = a
        else:
            print(USAGE, file=sys.stderr)
            return 2
    if directory is None or (key_hex is not None and key_file is not None):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        if key_file is not None:
            key = read_key_file(key_file)
        elif key_hex is not None:
            key = parse_key(key_hex, "--key")
        elif os.environ.get("CASK_KEY"):
            key = parse_key(os.environ["CASK_KEY"], "CASK_KEY")
        else:
            key = None
    except KeyRefused as error:
        print("invalid key: %s" % error, file=sys.stderr)
        return 2
    except OSError as error:
        print("cannot read the key file: %s" % error, file=sys.stderr)
        return 1
    if key is not None:
        try:
            _self_test_xchacha()
        except ImportError:
            print("an encrypted store needs the Python package `cryptography` (pip install cryptography)", file=sys.stderr)
            return 1
    reader = Reader(directory, use_hints=use_hints, now_ms=now_ms, key=key)
    try:
        reader.load()
    except UnsupportedFormat as error:
        print("unsupported format: %s" % error, file=sys.stderr)
        return 2
    except InvalidStore as error:
        print("not a valid store: %s" % error, file=sys.stderr)
        return 2
    except KeyRefused as error:
        print("key refused: %s" % error, file=sys.stderr)
        return 3
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
        if s["encrypted"]:
            print("encrypted: %s" % s["algorithm"], file=err)
        print("segments: %d" % s["segments"], file=err)
        print("records: %d (%d from hints, %d scanned)" % (s["records"], s["records_from_hints"], s["records_scanned"]), file=err)
        print("live keys: %d" % live, file=err)
        print("hints used: %d" % len(s["hints_used"]), file=err)
        for h in s["hints_ignored"]:
            print("hint ignored: %s: %s" % (h["file"], h["reason"]), file=err)
        for d in s["damaged"]:
            print("damaged (%s): %s bytes %d..<%d (%d bytes): %s" % (d["kind"], d["file"], d["start"], d["end"], d["end"] - d["start"], d["reason"]), file=err)
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
