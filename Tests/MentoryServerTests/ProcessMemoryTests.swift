import Foundation
import Testing

@testable import MentoryServer

@Suite("The process's C heap")
struct ProcessMemoryTests {
    // This test process links CMentoryShims as mentoryd does, so its constructor ran here too, before `main`.
    @Test("the arena limit is set as the process loads, unless MALLOC_ARENA_MAX sets it")
    func arenaLimitSetAtLoad() {
        if ProcessInfo.processInfo.environment[ProcessMemory.arenaLimitVariable] != nil {
            #expect(ProcessMemory.arenaLimit == nil, "the environment's limit is glibc's to apply")
        } else {
            #expect(ProcessMemory.arenaLimit == ProcessMemory.defaultArenaLimit)
        }
        #expect(ProcessMemory.defaultArenaLimit == 2)
    }
}
