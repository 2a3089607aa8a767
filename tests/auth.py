# The cluster tag written again from common/auth.h's description, in
# Python, for tests that forge datagrams: SipHash-2-4-128 under a key
# derived with keyed BLAKE2b-128 from the cluster key, the surface and the
# cluster's name; the trailer as the last MoldUDP64 block. A second
# implementation: a datagram it tags that a daemon accepts checks both.
import hashlib
import struct

SURFACES = ("commands", "tape", "exec", "raft", "votes", "requests", "flow")
MASK = (1 << 64) - 1


def load_keys(path):
    """{id: key bytes} and the id sent with, from a cluster key file."""
    keys, send = {}, None
    for line in open(path):
        w = line.split("#", 1)[0].split()
        if len(w) == 3 and w[0] == "cluster-key":
            keys[int(w[1])] = bytes.fromhex(w[2])
        elif len(w) == 2 and w[0] == "send":
            send = int(w[1])
    if send is None:
        send = next(iter(keys))
    return keys, send


def subkey(key, surface, cluster):
    data = b"lockstep auth 1\0" + surface.encode() + b"\0" + cluster.encode() + b"\0"
    return hashlib.blake2b(data, digest_size=16, key=key).digest()


def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & MASK


def _rounds(v, n):
    v0, v1, v2, v3 = v
    for _ in range(n):
        v0 = (v0 + v1) & MASK; v1 = _rotl(v1, 13); v1 ^= v0; v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & MASK; v3 = _rotl(v3, 16); v3 ^= v2
        v0 = (v0 + v3) & MASK; v3 = _rotl(v3, 21); v3 ^= v0
        v2 = (v2 + v1) & MASK; v1 = _rotl(v1, 17); v1 ^= v2; v2 = _rotl(v2, 32)
    return [v0, v1, v2, v3]


def siphash128(k, m):
    k0, k1 = struct.unpack("<QQ", k)
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D ^ 0xEE,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]
    tail = len(m) & ~7
    for i in range(0, tail, 8):
        mi = struct.unpack("<Q", m[i:i + 8])[0]
        v[3] ^= mi
        v = _rounds(v, 2)
        v[0] ^= mi
    last = (len(m) & 0xFF) << 56
    for i, c in enumerate(m[tail:]):
        last |= c << (8 * i)
    v[3] ^= last
    v = _rounds(v, 2)
    v[0] ^= last
    v[2] ^= 0xEE
    v = _rounds(v, 4)
    out0 = v[0] ^ v[1] ^ v[2] ^ v[3]
    v[1] ^= 0xDD
    v = _rounds(v, 4)
    out1 = v[0] ^ v[1] ^ v[2] ^ v[3]
    return struct.pack("<QQ", out0, out1)


def seal(dg, key_path, cluster, surface, mold_off=0, key_id=None):
    """dg with its trailer; mold_off None for a datagram that is not
    MoldUDP64 (raft's and votes' own formats)."""
    keys, send = load_keys(key_path)
    kid = send if key_id is None else key_id
    dg = bytearray(dg)
    count = 0
    if mold_off is not None:
        at = mold_off + 18
        count = struct.unpack(">H", dg[at:at + 2])[0]
        struct.pack_into(">H", dg, at, count + 1 if len(dg) > mold_off + 20 else 1)
    dg += struct.pack(">HBBH", 20, 0xA5, kid, count)
    return bytes(dg) + siphash128(subkey(keys[kid], surface, cluster), bytes(dg))


def open_(dg, key_path, cluster, surface, mold_off=0):
    """The datagram as built (trailer cut, count back), or None."""
    keys, _ = load_keys(key_path)
    if len(dg) < 22:
        return None
    body, t = dg[:-22], dg[-22:]
    ln, magic, kid, count = struct.unpack(">HBBH", t[:6])
    if ln != 20 or magic != 0xA5 or kid not in keys:
        return None
    if siphash128(subkey(keys[kid], surface, cluster), dg[:-16]) != t[6:]:
        return None
    body = bytearray(body)
    if mold_off is not None:
        struct.pack_into(">H", body, mold_off + 18, count)
    return bytes(body)


def send_from(src, dst, payload):
    """Sends one UDP datagram to dst as if from src (both (host, port)),
    through a raw socket (root): how a test speaks from a member's own
    address and port, which the member itself holds."""
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    udp = struct.pack(">HHHH", src[1], dst[1], 8 + len(payload), 0) + payload  # checksum 0: none
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, socket.IPPROTO_UDP, 0,
                     socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    s.sendto(ip + udp, (dst[0], 0))
    s.close()


def _varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def tape_packet(seq, term, session="TAPE"):
    """An untagged MoldUDP64 tape packet of one Event (lockstep.proto: term
    1, seq 2, timestamp 3, commit 6, an empty Command 10) at seq."""
    import time

    def field(num, v):
        return _varint(num << 3) + _varint(v)
    event = field(1, term) + field(2, seq) + field(3, time.time_ns()) + field(6, seq) + \
        _varint(10 << 3 | 2) + _varint(0)
    return session.encode().ljust(10) + struct.pack(">QH", seq, 1) + \
        struct.pack(">H", len(event)) + event


def mcast_sender(src=None):
    """A UDP socket for the loopback's multicast groups, TTL 0 (bound to
    the address src when given: a sender of the test's choosing)."""
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    if src:
        s.bind((src, 0))
    return s
