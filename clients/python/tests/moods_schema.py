"""The schema of the plugins mentory.testing's tests host, built at run time (no protoc needed).

``moods`` (the plugin under test) reads the caller's diary and calls ``streaks``; ``streaks`` is the
namespace the tests fake. As a ``.proto`` file::

    package moods.v1;
    import "mentory.proto";
    import "mentory_domain.proto";
    message MoodsRequest { uint32 days = 1; }
    message Mood { string day = 1; mentory.v1.Emotion emotion = 2; }
    message MoodList { repeated Mood moods = 1; uint32 streak = 2; }
    service Moods {
      option (mentory.v1.namespace) = "moods";
      option (mentory.v1.namespace_version) = 1;
      option (mentory.v1.topic) = {
        name: "moods" change: "moods.v1.Mood" snapshot: "moods.v1.MoodList" reads: "diary.list"
      };
      rpc recent(MoodsRequest) returns (MoodList);        // the caller's diary, on their behalf
      rpc withStreak(MoodsRequest) returns (MoodList);    // and streaks.current, on their behalf
      rpc mentor(mentory.v1.Empty) returns (mentory.v1.MentorState);  // through plugin.client
      rpc purge(mentory.v1.Empty) returns (mentory.v1.Empty) { option (mentory.v1.privilege) = PRIVILEGE_OWNER; }
    }
    message StreakRequest { string habit = 1; }
    message Streak { string habit = 1; uint32 days = 2; }
    service Streaks {
      option (mentory.v1.namespace) = "streaks";
      rpc current(StreakRequest) returns (Streak);
    }
"""

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import ServiceDescriptor

from mentory import pb

FIELD = descriptor_pb2.FieldDescriptorProto


def _message(file: descriptor_pb2.FileDescriptorProto, name: str, *fields: tuple) -> None:
    message = file.message_type.add(name=name)
    for number, (field_name, kind, type_name, repeated) in enumerate(fields, start=1):
        field = message.field.add(
            name=field_name,
            number=number,
            type=kind,
            label=FIELD.LABEL_REPEATED if repeated else FIELD.LABEL_OPTIONAL,
        )
        if type_name:
            field.type_name = type_name


def _build() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="mentory_testing_tests/moods.proto",
        package="moods.v1",
        syntax="proto3",
        dependency=["mentory.proto", "mentory_domain.proto"],
    )
    _message(file, "MoodsRequest", ("days", FIELD.TYPE_UINT32, "", False))
    _message(
        file, "Mood", ("day", FIELD.TYPE_STRING, "", False), ("emotion", FIELD.TYPE_ENUM, ".mentory.v1.Emotion", False)
    )
    _message(
        file,
        "MoodList",
        ("moods", FIELD.TYPE_MESSAGE, ".moods.v1.Mood", True),
        ("streak", FIELD.TYPE_UINT32, "", False),
    )
    _message(file, "StreakRequest", ("habit", FIELD.TYPE_STRING, "", False))
    _message(file, "Streak", ("habit", FIELD.TYPE_STRING, "", False), ("days", FIELD.TYPE_UINT32, "", False))

    moods = file.service.add(name="Moods")
    moods.options.Extensions[pb.namespace] = "moods"
    moods.options.Extensions[pb.namespace_version] = 1
    moods.options.Extensions[pb.topic].add(
        name="moods", change="moods.v1.Mood", snapshot="moods.v1.MoodList", reads=["diary.list"]
    )
    moods.method.add(name="recent", input_type=".moods.v1.MoodsRequest", output_type=".moods.v1.MoodList")
    moods.method.add(name="withStreak", input_type=".moods.v1.MoodsRequest", output_type=".moods.v1.MoodList")
    moods.method.add(name="mentor", input_type=".mentory.v1.Empty", output_type=".mentory.v1.MentorState")
    purge = moods.method.add(name="purge", input_type=".mentory.v1.Empty", output_type=".mentory.v1.Empty")
    purge.options.Extensions[pb.privilege] = pb.PRIVILEGE_OWNER

    streaks = file.service.add(name="Streaks")
    streaks.options.Extensions[pb.namespace] = "streaks"
    streaks.options.Extensions[pb.namespace_version] = 1
    streaks.method.add(name="current", input_type=".moods.v1.StreakRequest", output_type=".moods.v1.Streak")
    return file


def _file():  # type: ignore[no-untyped-def]
    pool = descriptor_pool.Default()
    try:
        return pool.FindFileByName("mentory_testing_tests/moods.proto")
    except KeyError:
        return pool.AddSerializedFile(_build().SerializeToString())


FILE = _file()
MOODS: ServiceDescriptor = FILE.services_by_name["Moods"]
STREAKS: ServiceDescriptor = FILE.services_by_name["Streaks"]
