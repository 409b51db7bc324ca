# shellcheck shell=bash
# How the binaries mentoryd ships are built: the one definition scripts/install.sh, scripts/package-deb.sh,
# scripts/test.sh (CI's release build and the allocation guard) and scripts/bench.sh share.
#
# - `-c release --static-swift-stdlib`: optimized, the Swift runtime linked in.
# - `--traits ShippedBinaries`: the shipped link options (Package.swift).
# - `-Xswiftc -enforce-exclusivity=unchecked`: exclusive access to memory is enforced when compiling, and at run
#   time only in debug builds, which every test, the ThreadSanitizer run and the fuzzers use (Xcode's
#   "Run-time Checks in Debug Builds Only"). The run-time checks cost a request about a fifth of its
#   instructions (docs/BENCHMARKS.md, "Exclusivity checked at run time in debug builds only"); a conflicting access
#   the tests do not reach is then not caught at run time in the shipped build. Every module gets it, swift-nio's
#   included, so the NIO floor that scripts/bench.sh times beside mentoryd is built with it too
#   (`shipped_swiftc_flags`).
shipped_swiftc_flags=(-Xswiftc -enforce-exclusivity=unchecked)
shipped_build=(swift build -c release --static-swift-stdlib --traits ShippedBinaries "${shipped_swiftc_flags[@]}")
