#!/usr/bin/env python3
"""Writes the seed corpora for the libFuzzer targets into Fuzz/corpus/<target>/.

Usage: Fuzz/make-corpus.py   (rewrites Fuzz/corpus/frame-decoder and Fuzz/corpus/dispatch)

The seeds are committed; rerun this after changing the wire protocol or an input layout
(described at the top of Fuzz/Targets/*/*.swift). Protobuf is encoded by hand here so the
script needs nothing but Python 3; field numbers follow Sources/MentoryWire/Proto/mentory.proto, and
the methods are read from its `service` declarations.
"""

import os
import re
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(ROOT, "..", "Sources", "MentoryWire", "Proto", "mentory.proto")

# --- protobuf encoding ------------------------------------------------------------------------


def varint(value):
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3 | 0) + varint(value)


def field_bytes(number, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def hello(version=1, name="fuzz"):
    return field_varint(1, version) + field_bytes(2, name)


def request(id, namespace, method, body=b""):
    return field_varint(1, id) + field_bytes(2, namespace) + field_bytes(3, method) + field_bytes(4, body)


def envelope(kind, payload):
    number = {"hello": 1, "welcome": 2, "request": 3, "response": 4, "event": 5, "connection_error": 6}[kind]
    return field_bytes(number, payload)


def action_item(text, id="", done=False):
    return field_bytes(1, id) + field_bytes(2, text) + (field_varint(3, 1) if done else b"")


def subscribe(*topics, resume=None):
    out = b""
    for topic in topics:
        sub = field_bytes(1, topic)
        if resume is not None:
            sub += field_varint(2, resume)
        out += field_bytes(1, sub)
    return out


def mentor_set(content, character=2, items=()):
    return field_bytes(1, content) + field_varint(2, character) + b"".join(field_bytes(3, action_item(t)) for t in items)


def peer_state(peer, paired=True, installed=True, reachable=True):
    return field_bytes(1, peer) + field_varint(2, int(paired)) + field_varint(3, int(installed)) + field_varint(4, int(reachable))


def diary_add(date, title="A day", text="It happened.", emotion=4, items=(), id=""):
    out = field_bytes(1, date) + field_bytes(2, title) + field_bytes(3, text) + field_varint(4, emotion)
    out += b"".join(field_bytes(6, action_item(t)) for t in items)
    if id:
        out += field_bytes(7, id)
    return out


UUID = "e621e1f8-c36c-495a-93fc-0c247a3e6e5f"


# --- the schema ---------------------------------------------------------------------------------


def schema_methods(path=PROTO):
    """(namespace, method) of every rpc of every service in mentory.proto, in declaration order."""
    text = re.sub(r"//[^\n]*", "", open(path, encoding="utf-8").read())
    methods = []
    for match in re.finditer(r"\bservice\s+(\w+)\s*\{", text):
        depth, index = 1, match.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[index], 0)
            index += 1
        body = text[match.end() : index - 1]
        namespace = re.search(r'option\s*\(\s*namespace\s*\)\s*=\s*"([^"]*)"', body)
        if namespace is None:
            raise SystemExit(f"{path}: service {match.group(1)} has no (namespace) option")
        methods += [(namespace.group(1), rpc) for rpc in re.findall(r"\brpc\s+(\w+)\s*\(", body)]
    return methods


# The namespaces the dispatch harness registers (Fuzz/Targets/dispatch/Script.swift).
REGISTERED = ("session", "mentor", "reachability", "diary")

# A valid request body for the methods that take more than an empty message.
BODIES = {
    ("session", "subscribe"): subscribe("mentor", "reachability", "diary"),
    ("session", "unsubscribe"): field_bytes(1, "diary"),
    ("mentor", "set"): mentor_set("Keep going.", 2, ["stretch", "drink water"]),
    ("mentor", "completeTodo"): field_bytes(1, "missing"),
    ("reachability", "report"): peer_state("phone"),
    ("diary", "add"): diary_add("2025-01-01", items=["walk"], id=UUID),
    ("diary", "get"): field_bytes(1, UUID),
    ("diary", "list"): field_varint(1, 10) + field_bytes(2, "2025-06-01"),
    ("diary", "delete"): field_bytes(1, UUID),
    ("diary", "setSuggestionDone"): field_bytes(1, UUID) + field_bytes(2, "s1") + field_varint(3, 1),
}

# One request per method of every registered namespace, in the schema's order: raw request `i` of the
# dispatch target calls REQUESTS[i]'s method (methodTable in Script.swift is built the same way).
REQUESTS = [(ns, method, BODIES.get((ns, method), b"")) for ns, method in schema_methods() if ns in REGISTERED]
# Raw requests len(REQUESTS) ..< len(REQUESTS) + UNKNOWN_COUNT call Script.swift's `unknownMethods`.
UNKNOWN_COUNT = 12


def request_index(namespace, method):
    """The raw request number of a method."""
    return next(i for i, (ns, m, _) in enumerate(REQUESTS) if (ns, m) == (namespace, method))


def frame(payload):
    return struct.pack(">I", len(payload)) + payload


# --- frame-decoder seeds: [max selector | chunk mode << 3] [seed] stream ----------------------


def frame_decoder_seeds():
    hello_frame = frame(envelope("hello", hello()))
    request_frames = [frame(envelope("request", request(i + 1, ns, m, body))) for i, (ns, m, body) in enumerate(REQUESTS)]
    session = hello_frame + b"".join(request_frames)
    seeds = {
        "hello": (0x00, 0, hello_frame),
        "session-one-read": (0x00, 0, session),
        "session-byte-by-byte": (0x08, 7, session),
        "session-small-reads": (0x20, 42, session),
        "zero-length-frame": (0x00, 0, frame(b"")),
        "zero-length-then-hello": (0x10, 3, frame(b"") + hello_frame),
        "length-4GiB": (0x00, 0, b"\xff\xff\xff\xff" + b"\x00" * 16),
        "length-max-plus-one": (0x00, 0, struct.pack(">I", (1 << 20) + 1) + b"\x0a\x00"),
        "length-max-truncated": (0x00, 0, struct.pack(">I", 1 << 20) + b"\x0a\x02\x08\x01"),
        "halfway-then-eof": (0x00, 0, hello_frame[: len(hello_frame) // 2]),
        "prefix-only-partial": (0x00, 0, b"\x00\x00"),
        "invalid-protobuf": (0x00, 0, frame(b"\xff\xff\xff\xff\x0f")),
        "envelope-without-kind": (0x08, 1, frame(b"")),
        "unknown-field": (0x00, 0, frame(field_bytes(15, "x") + envelope("hello", hello()))),
        "small-max-64": (0x05, 1, session),
        "max-zero": (0x01, 9, frame(b"") + frame(b"") + hello_frame),
        "server-messages": (
            0x28,
            5,
            frame(envelope("welcome", field_varint(1, 1) + field_bytes(2, "0.1")))
            + frame(envelope("response", field_varint(1, 7) + field_bytes(2, b"\x08\x01")))
            + frame(envelope("response", field_varint(1, 8) + field_bytes(3, field_varint(1, 2) + field_bytes(2, "no"))))
            + frame(envelope("event", field_bytes(1, "mentor") + field_varint(2, 3) + field_varint(3, 1)))
            + frame(envelope("connection_error", field_bytes(1, field_varint(1, 4)) + field_varint(2, 1))),
        ),
        "random-bytes": (0x18, 200, bytes((i * 73 + 41) % 256 for i in range(96))),
    }
    return {name: bytes([header, seed]) + stream for name, (header, seed, stream) in seeds.items()}


# --- dispatch seeds: [ring selector] then operations (see Fuzz/Targets/dispatch/Script.swift) --

ATTACH, DETACH, FILL, DRAIN, BARRIER, SHUTDOWN, FRAME = 32, 33, 34, 35, 36, 37, 38
SUBSCRIBE, UNSUBSCRIBE, MENTOR_SET, MENTOR_COMPLETE, REPORT, DIARY_ADD, DIARY_REF, DIARY_LIST = range(39, 47)


def op(kind, connection=0):
    return bytes([connection << 6 | kind])


def raw(index, body=b"", id=1, connection=0):
    return op(index, connection) + bytes([id, len(body)]) + body


def built(kind, id, *args, connection=0):
    return op(kind, connection) + bytes([id, *args])


def frame_op(payload, connection=0):
    return op(FRAME, connection) + struct.pack(">H", len(payload)) + payload


def dispatch_seeds():
    every_method = op(ATTACH) + b"".join(raw(i, body, id=i + 1) for i, (_, _, body) in enumerate(REQUESTS)) + op(BARRIER)
    seeds = {
        "every-method": b"\x00" + every_method,
        "every-method-concurrent": b"\x03" + op(ATTACH) + b"".join(raw(i, body, id=1) for i, (_, _, body) in enumerate(REQUESTS)),
        "before-handshake": b"\x00"
        + raw(0)
        + raw(request_index("diary", "add"), BODIES[("diary", "add")])
        + op(ATTACH)
        + raw(0, id=2),
        "unknown-names": b"\x00"
        + op(ATTACH)
        + b"".join(raw(i, id=i) for i in range(len(REQUESTS), len(REQUESTS) + UNKNOWN_COUNT)),
        "frames": b"\x00"
        + frame_op(envelope("request", request(5, "session", "ping")))
        + frame_op(envelope("hello", hello(version=2)))
        + frame_op(envelope("hello", hello()))
        + frame_op(envelope("hello", hello()))
        + frame_op(envelope("request", request(6, "mentor", "set", mentor_set("Hi", 1))))
        + frame_op(envelope("request", request(7, "nope", "nope")))
        + frame_op(envelope("welcome", b""))
        + frame_op(b"\xff\x01"),
        "structured-session": b"\x04"
        + op(ATTACH)
        + built(SUBSCRIBE, 1, 0x07, 0)
        + built(MENTOR_SET, 2, 0x28, 0x00)
        + built(MENTOR_COMPLETE, 3, 0x01)
        + built(REPORT, 4, 0x38)
        + built(DIARY_ADD, 5, 0x00, 0x10, 0x14)
        + built(DIARY_ADD, 6, 0x09, 0x00, 0x25)
        + op(BARRIER)
        + built(DIARY_REF, 7, 2, 0, 0)
        + built(DIARY_REF, 8, 0, 1, 0)
        + built(DIARY_LIST, 9, 4, 2)
        + built(DIARY_REF, 10, 1, 0, 0)
        + built(UNSUBSCRIBE, 11, 0x00)
        + op(DETACH),
        # The release build once crashed on the second diary.list of a process (a Swift 6.3.1 -O
        # miscompile around DiaryHandler.page); one input lists three times.
        "diary-list-repeated": b"\x00"
        + op(ATTACH)
        + built(DIARY_LIST, 1, 0, 0)
        + op(BARRIER)
        + built(DIARY_ADD, 2, 0x00, 0x10, 0x14)
        + built(DIARY_LIST, 3, 0, 0)
        + op(BARRIER)
        + built(DIARY_LIST, 4, 1, 2),
        "slow-subscriber": b"\x02"
        + op(ATTACH)
        + op(ATTACH, 1)
        + built(SUBSCRIBE, 1, 0x07, 0)
        + op(BARRIER)
        + op(FILL)
        + b"".join(built(REPORT, 10 + i, 0x20 | i % 2, connection=1) for i in range(6))
        + built(DIARY_ADD, 20, 0x00, 0x00, 0x04, connection=1)
        + op(BARRIER)
        + op(DRAIN)
        + built(MENTOR_SET, 21, 0x04, 0x00, connection=1),
        "resume": b"\x05"
        + op(ATTACH)
        + op(ATTACH, 1)
        + built(SUBSCRIBE, 1, 0x02, 0)
        + op(BARRIER)
        + b"".join(built(REPORT, 10 + i, 0x20 | i % 2, connection=1) for i in range(4))
        + op(BARRIER)
        + built(UNSUBSCRIBE, 2, 0x02)
        + built(REPORT, 30, 0x01, connection=1)
        + op(BARRIER)
        + built(SUBSCRIBE, 3, 0x02, 0x09)
        + built(SUBSCRIBE, 4, 0x02, 0x0A)
        + built(SUBSCRIBE, 5, 0x02, 0x07),
        "subscribe-while-publishing": b"\x01"
        + op(ATTACH)
        + op(ATTACH, 1)
        + b"".join(built(DIARY_ADD, 10 + i, i, 0x00, 0x04, connection=1) for i in range(3))
        + built(SUBSCRIBE, 1, 0x04, 0)
        + b"".join(built(DIARY_ADD, 20 + i, 0x06, 0x00, 0x04, connection=1) for i in range(2)),
        "disconnect-mid-request": b"\x00"
        + op(ATTACH)
        + built(SUBSCRIBE, 1, 0x07, 0)
        + built(DIARY_ADD, 2, 0x00, 0x00, 0x04)
        + op(DETACH)
        + built(REPORT, 3, 0x20)
        + op(ATTACH),
        "shutdown": b"\x00" + op(ATTACH) + built(MENTOR_SET, 1, 0x04, 0) + op(SHUTDOWN) + raw(request_index("mentor", "get"), id=2) + op(BARRIER) + raw(0, id=3),
        "invalid-bodies": b"\x00" + op(ATTACH) + b"".join(raw(i, b"\xff\xff\xff", id=i) for i in range(len(REQUESTS))),
    }
    return seeds


# Seeds that are fuzzer findings, committed by hand (not generated here); rewriting keeps them.
FINDINGS = {"dispatch": {"detach-during-subscribe"}}


def write(target, seeds):
    directory = os.path.join(ROOT, "corpus", target)
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        if name not in seeds and name not in FINDINGS.get(target, set()):
            os.remove(os.path.join(directory, name))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(directory, name), "wb") as file:
            file.write(data)
    print(f"{target}: {len(seeds)} seeds in {os.path.relpath(directory)}")


if __name__ == "__main__":
    write("frame-decoder", frame_decoder_seeds())
    write("dispatch", dispatch_seeds())
