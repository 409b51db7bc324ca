#!/usr/bin/env bash
# Regenerates the code generated from the schema:
#   Sources/MentoryWire/Generated/mentory.pb.swift (the daemon, mentoryctl)
#   clients/python/src/mentory/_proto/mentory_pb2.py(i) (the Python client)
# Needs protoc (apt-get install protobuf-compiler) and protoc-gen-swift built
# from the swift-protobuf version Package.swift names:
#   git clone -b 1.39.0 https://github.com/apple/swift-protobuf && cd swift-protobuf
#   swift build -c release --product protoc-gen-swift
# then pass its path as PROTOC_GEN_SWIFT or put it on PATH.
# The Python code needs no plugin: protoc's built-in --python_out/--pyi_out.
set -euo pipefail
cd "$(dirname "$0")/.."
plugin=${PROTOC_GEN_SWIFT:-$(command -v protoc-gen-swift)}
mkdir -p Sources/MentoryWire/Generated
protoc \
  --plugin=protoc-gen-swift="$plugin" \
  --swift_opt=Visibility=Public \
  --swift_opt=FileNaming=DropPath \
  --swift_out=Sources/MentoryWire/Generated \
  --proto_path=Sources/MentoryWire/Proto \
  Sources/MentoryWire/Proto/mentory.proto

python_out=clients/python/src/mentory/_proto
mkdir -p "$python_out"
protoc \
  --python_out="$python_out" \
  --pyi_out="$python_out" \
  --proto_path=Sources/MentoryWire/Proto \
  Sources/MentoryWire/Proto/mentory.proto
