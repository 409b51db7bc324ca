"""mentory.METHODS and mentory.TOPICS come from mentory.proto's and mentory_domain.proto's service declarations."""

from google.protobuf.wrappers_pb2 import UInt32Value

import mentory
from mentory import pb


def test_methods_are_read_from_the_services() -> None:
    declared = {
        (service.GetOptions().Extensions[pb.namespace], method.name)
        for file in (pb.DESCRIPTOR, pb.DOMAIN_DESCRIPTOR)
        for service in file.services_by_name.values()
        for method in service.methods
    }
    assert set(mentory.METHODS) == declared
    # The protocol's file declares no namespace of the domain; the domain's file imports the protocol's.
    assert "diary" not in {s.GetOptions().Extensions[pb.namespace] for s in pb.DESCRIPTOR.services_by_name.values()}
    assert [file.name for file in pb.DOMAIN_DESCRIPTOR.dependencies] == ["mentory.proto"]
    assert mentory.METHODS[("diary", "add")] == (pb.DiaryAddRequest, pb.DiaryEntry)
    assert mentory.METHODS[("session", "ping")] == (pb.Empty, pb.Empty)
    assert mentory.METHODS[("debug", "freezeEngine")] == (UInt32Value, pb.Empty)
    # The classes are the generated ones: a parsed reply is an instance of pb.DiaryEntry.
    request_type, reply_type = mentory.METHODS[("diary", "get")]
    assert request_type is pb.DiaryGetRequest and reply_type is pb.DiaryEntry


def test_topics_are_read_from_the_topic_options() -> None:
    assert mentory.TOPICS == {
        "mentor": (pb.MentorState, pb.MentorState),
        "reachability": (pb.PeerState, pb.ReachabilitySnapshot),
        "diary": (pb.DiaryChange, pb.DiarySnapshot),
    }
