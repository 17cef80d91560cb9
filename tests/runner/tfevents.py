#!/usr/bin/python3
"""tfevents.py FILE: a TensorBoard event file read back without scaleguard's code, as JSON lines.

Independent of runner/src/train/tensorboard.cpp: the TFRecord framing is checked with crcmod's
CRC-32C (Debian python3-crcmod) and every record is decoded by Google's protobuf library
(python3-protobuf) with TensorBoard's Event / Summary / Value messages declared here by their
field numbers (tensorflow/core/util/event.proto, summary.proto; declared proto2 so that a
field's presence survives), and each record must re-serialize to exactly its bytes (no unknown,
repeated or mis-typed field). Debian 12 has no
python3-tensorboard to use instead. Prints {"wall_time", "step", "file_version"} or
{"wall_time", "step", "scalars": {tag: value}} per record; exits 1 on any framing error.
"""
import json
import struct
import sys

import crcmod.predefined
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class():
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="sg_tb_event.proto", package="sgtb", syntax="proto2")

    def msg(name, fields):
        m = fdp.message_type.add(name=name)
        for fname, number, ftype, extra in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=extra.get("label", F.LABEL_OPTIONAL))
            if "type_name" in extra:
                f.type_name = extra["type_name"]

    msg("Value", [("tag", 1, F.TYPE_STRING, {}), ("simple_value", 2, F.TYPE_FLOAT, {})])
    msg("Summary", [("value", 1, F.TYPE_MESSAGE, {"label": F.LABEL_REPEATED, "type_name": ".sgtb.Value"})])
    msg("Event", [("wall_time", 1, F.TYPE_DOUBLE, {}), ("step", 2, F.TYPE_INT64, {}),
                  ("file_version", 3, F.TYPE_STRING, {}),
                  ("summary", 5, F.TYPE_MESSAGE, {"type_name": ".sgtb.Summary"})])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("sgtb.Event"))


def records(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        if at + 12 > len(data):
            sys.exit(f"{path}: {len(data) - at} trailing bytes at offset {at}")
        head = data[at:at + 8]
        (n,) = struct.unpack("<Q", head)
        (head_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if head_crc != masked(crc32c(head)):
            sys.exit(f"{path}: bad length CRC at offset {at}")
        body = data[at + 12:at + 12 + n]
        if len(body) != n or at + 16 + n > len(data):
            sys.exit(f"{path}: record at offset {at} truncated")
        (body_crc,) = struct.unpack("<I", data[at + 12 + n:at + 16 + n])
        if body_crc != masked(crc32c(body)):
            sys.exit(f"{path}: bad data CRC at offset {at}")
        yield body
        at += 16 + n


def main():
    Event = event_class()
    for body in records(sys.argv[1]):
        ev = Event()
        ev.ParseFromString(body)
        if ev.SerializeToString() != body:
            sys.exit(f"{sys.argv[1]}: a record does not re-serialize to its bytes: {body!r}")
        out = {"wall_time": ev.wall_time, "step": ev.step}
        if ev.HasField("file_version"):
            out["file_version"] = ev.file_version
        if ev.HasField("summary"):
            out["scalars"] = {v.tag: v.simple_value for v in ev.summary.value}
        print(json.dumps(out))


if __name__ == "__main__":
    main()
