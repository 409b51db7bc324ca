#!/usr/bin/env bash
# Regenerates everything derived from the schema, whose `service` declarations (one per namespace: rpcs,
# `(topic)` options, version) are the one place methods and topics are declared: the protocol's,
# Sources/MentoryWire/Proto/mentory.proto, and the built-in domain's, Sources/MentoryDomain/Proto/
# mentory_domain.proto (which imports mentory.proto; both folders are on protoc's path):
#   Sources/MentoryWire/Generated/mentory.pb.swift       messages (protoc-gen-swift)
#   Sources/MentoryWire/Generated/mentory.schema.swift   MentorySchema: typed namespaces (protoc-gen-mentory)
#   Sources/MentoryDomain/Generated/mentory_domain.*.swift  the same for the domain: its messages and
#                                                         MentoryDomainSchema
#   clients/python/src/mentory/_proto/mentory_pb2.py(i), mentory_domain_pb2.py(i)  the Python client's
#                                                         messages (protoc's own), and copies of both .proto
#                                                         files shipped in the package (for protoc -I)
#   docs/PROTOCOL.md, between the `BEGIN/END GENERATED: namespaces` markers: the method and topic tables
#                    of both files, and between each `BEGIN GENERATED: messages A B` and
#                    `END GENERATED: messages`: the listings of messages (or enums) A and B, from either file
#   Tests/MentorySchemaGeneratorTests/Generated/          greeter.proto, a third-party namespace
#   Sources/MentoryAdvisor/Generated/                     the reference plugin mentory-advisor (docs/PLUGINS.md)
#   clients/python/examples/kudos/kudos_pb2.py(i)         the Python example plugin (protoc's own, as is: its
#                                                         `import mentory_pb2` is the package's top-level alias)
#
# Usage: scripts/generate-protos.sh [--check]
#   --check   regenerate into a temporary folder and fail, listing the differences, if anything
#             differs from the committed files (scripts/test.sh runs this)
#
# Needs protoc (apt-get install protobuf-compiler libprotobuf-dev). Both plugins are built here from
# this package's graph, in debug: protoc-gen-mentory (Sources/protoc-gen-mentory) and protoc-gen-swift
# from the swift-protobuf version Package.resolved pins. PROTOC_GEN_SWIFT=path uses another
# protoc-gen-swift instead. The generated files are committed, so building mentoryd never needs protoc.
# Handler packages outside mentoryd (Examples/gratitude, docs/HANDLERS.md) commit none: the build plugin
# MentorySchemaPlugin (Plugins/) runs protoc with both generators at build time.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: scripts/generate-protos.sh [--check]" >&2; exit 2 ;;
esac

command -v protoc >/dev/null || {
  echo "generate-protos: protoc not found; apt-get install protobuf-compiler libprotobuf-dev" >&2
  exit 1
}

echo "generate-protos: building the protoc plugins" >&2
swift build --product protoc-gen-mentory >&2
bin=$(swift build --show-bin-path)
mentory_plugin=$bin/protoc-gen-mentory
if [ -n "${PROTOC_GEN_SWIFT:-}" ]; then
  swift_plugin=$PROTOC_GEN_SWIFT
else
  swift build --product protoc-gen-swift >&2
  swift_plugin=$bin/protoc-gen-swift
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/mentory-protos.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ $check -eq 1 ]; then
  out=$work/tree
else
  out=$repo
fi

proto_dir=Sources/MentoryWire/Proto
swift_out=$out/Sources/MentoryWire/Generated
domain_dir=Sources/MentoryDomain/Proto
domain_out=$out/Sources/MentoryDomain/Generated
mappings=$proto_dir/module-mappings.asciipb
python_out=$out/clients/python/src/mentory/_proto
greeter_dir=Tests/MentorySchemaGeneratorTests
greeter_out=$out/$greeter_dir/Generated
advisor_dir=Sources/MentoryAdvisor
advisor_out=$out/$advisor_dir/Generated
kudos_dir=clients/python/examples/kudos
kudos_out=$out/$kudos_dir
mkdir -p "$swift_out" "$domain_out" "$python_out" "$greeter_out" "$advisor_out" "$kudos_out" "$out/docs"

# A regeneration replaces the folders' generated files, so a file whose source is gone disappears.
if [ $check -eq 0 ]; then
  rm -f "$swift_out"/*.swift "$domain_out"/*.swift "$greeter_out"/*.swift "$advisor_out"/*.swift
fi

protoc \
  --plugin=protoc-gen-swift="$swift_plugin" \
  --plugin=protoc-gen-mentory="$mentory_plugin" \
  --swift_opt=Visibility=Public \
  --swift_opt=FileNaming=DropPath \
  --swift_out="$swift_out" \
  --mentory_opt=Visibility=Public \
  --mentory_opt=FileNaming=DropPath \
  --mentory_out="$swift_out" \
  --proto_path="$proto_dir" \
  "$proto_dir/mentory.proto"

# The domain: mentory_domain.proto imports mentory.proto, whose types live in MentoryWire.
protoc \
  --plugin=protoc-gen-swift="$swift_plugin" \
  --plugin=protoc-gen-mentory="$mentory_plugin" \
  --swift_opt=Visibility=Public \
  --swift_opt=FileNaming=DropPath \
  --swift_opt=ProtoPathModuleMappings="$mappings" \
  --swift_out="$domain_out" \
  --mentory_opt=Visibility=Public \
  --mentory_opt=FileNaming=DropPath \
  --mentory_opt=ProtoPathModuleMappings="$mappings" \
  --mentory_out="$domain_out" \
  --proto_path="$proto_dir" \
  --proto_path="$domain_dir" \
  "$domain_dir/mentory_domain.proto"

protoc \
  --python_out="$python_out" \
  --pyi_out="$python_out" \
  --proto_path="$proto_dir" \
  --proto_path="$domain_dir" \
  "$proto_dir/mentory.proto" "$domain_dir/mentory_domain.proto"
# protoc writes `import mentory_pb2` in mentory_domain_pb2.py: inside the package, import it relatively.
sed -i 's/^import mentory_pb2 as mentory__pb2$/from . import mentory_pb2 as mentory__pb2/' \
  "$python_out/mentory_domain_pb2.py"
cp "$proto_dir/mentory.proto" "$python_out/mentory.proto"
cp "$domain_dir/mentory_domain.proto" "$python_out/mentory_domain.proto"

# The method and topic tables of docs/PROTOCOL.md, and the message listings, of both files.
protoc \
  --plugin=protoc-gen-mentory="$mentory_plugin" \
  --mentory_opt=Output=Markdown \
  --mentory_out="$work" \
  --proto_path="$proto_dir" \
  --proto_path="$domain_dir" \
  "$proto_dir/mentory.proto" "$domain_dir/mentory_domain.proto"
{ cat "$work/mentory.namespaces.md"; echo; cat "$work/mentory_domain.namespaces.md"; } >"$work/namespaces.md"
cat "$work/mentory.messages.txt" "$work/mentory_domain.messages.txt" >"$work/messages.txt"
begin='<!-- BEGIN GENERATED: namespaces -->'
end='<!-- END GENERATED: namespaces -->'
for marker in "$begin" "$end"; do
  if [ "$(grep -cxF -- "$marker" docs/PROTOCOL.md)" -ne 1 ]; then
    echo "generate-protos: docs/PROTOCOL.md must hold the line '$marker' exactly once" >&2
    exit 1
  fi
done
awk -v begin="$begin" -v end="$end" -v block="$work/namespaces.md" '
  $0 == begin { print; while ((getline line < block) > 0) print line; skipping = 1; next }
  $0 == end { skipping = 0 }
  !skipping { print }
' docs/PROTOCOL.md >"$work/PROTOCOL.namespaces.md"
# The message listings: each block `<!-- BEGIN GENERATED: messages A B -->` ... `<!-- END GENERATED: messages -->`
# gets the listings of messages (or enums) A and B, as mentory.proto or mentory_domain.proto declares them.
awk -v listings="$work/messages.txt" '
  BEGIN {
    while ((getline line < listings) > 0) {
      if (line ~ /^@@ /) { name = substr(line, 4); continue }
      text[name] = text[name] line "\n"
    }
  }
  index($0, "<!-- BEGIN GENERATED: messages ") == 1 {
    print
    names = substr($0, length("<!-- BEGIN GENERATED: messages ") + 1)
    sub(/ *-->$/, "", names)
    count = split(names, wanted, " ")
    print "```proto"
    for (i = 1; i <= count; i++) {
      if (!(wanted[i] in text)) { print "generate-protos: docs/PROTOCOL.md names unknown message " wanted[i] > "/dev/stderr"; failed = 1; exit 1 }
      if (i > 1) print ""
      printf "%s", text[wanted[i]]
    }
    print "```"
    skipping = 1
    next
  }
  $0 == "<!-- END GENERATED: messages -->" { skipping = 0 }
  !skipping { print }
' "$work/PROTOCOL.namespaces.md" >"$work/PROTOCOL.md"
cp "$work/PROTOCOL.md" "$out/docs/PROTOCOL.md"

# The third-party example: greeter.proto imports mentory.proto from the MentoryWire module.
protoc \
  --plugin=protoc-gen-swift="$swift_plugin" \
  --plugin=protoc-gen-mentory="$mentory_plugin" \
  --swift_opt=ProtoPathModuleMappings="$mappings" \
  --swift_out="$greeter_out" \
  --mentory_opt=ProtoPathModuleMappings="$mappings" \
  --mentory_out="$greeter_out" \
  --proto_path="$proto_dir" \
  --proto_path="$greeter_dir/Proto" \
  "$greeter_dir/Proto/greeter.proto"

# The reference plugin mentory-advisor: advisor.proto imports mentory.proto and mentory_domain.proto, whose
# types live in MentoryWire and MentoryDomain.
protoc \
  --plugin=protoc-gen-swift="$swift_plugin" \
  --plugin=protoc-gen-mentory="$mentory_plugin" \
  --swift_opt=Visibility=Public \
  --swift_opt=ProtoPathModuleMappings="$mappings" \
  --swift_out="$advisor_out" \
  --mentory_opt=Visibility=Public \
  --mentory_opt=ProtoPathModuleMappings="$mappings" \
  --mentory_out="$advisor_out" \
  --proto_path="$proto_dir" \
  --proto_path="$domain_dir" \
  --proto_path="$advisor_dir/Proto" \
  "$advisor_dir/Proto/advisor.proto"

# The Python example plugin, generated as a plugin's author would (docs/PLUGINS.md): kudos.proto
# imports mentory.proto, which the package ships, and protoc's `import mentory_pb2` finds the
# package's top-level mentory_pb2 module.
protoc \
  --python_out="$kudos_out" \
  --pyi_out="$kudos_out" \
  --proto_path="$proto_dir" \
  --proto_path="$domain_dir" \
  --proto_path="$kudos_dir" \
  "$kudos_dir/kudos.proto"

if [ $check -eq 1 ]; then
  status=0
  for path in Sources/MentoryWire/Generated Sources/MentoryDomain/Generated clients/python/src/mentory/_proto $greeter_dir/Generated \
    $advisor_dir/Generated; do
    # Only the generated kinds of file (the Python folder also holds __init__.py, and __pycache__).
    if ! diff -r -u -x '__init__.py' -x '__pycache__' "$path" "$out/$path" >"$work/diff" 2>&1; then
      status=1
      echo "generate-protos: $path is not what the schema generates:" >&2
      head -40 "$work/diff" >&2
    fi
  done
  for file in kudos_pb2.py kudos_pb2.pyi; do
    if ! diff -u "$kudos_dir/$file" "$kudos_out/$file" >"$work/diff" 2>&1; then
      status=1
      echo "generate-protos: $kudos_dir/$file is not what the schema generates:" >&2
      head -40 "$work/diff" >&2
    fi
  done
  if ! diff -u docs/PROTOCOL.md "$out/docs/PROTOCOL.md" >"$work/diff"; then
    status=1
    echo "generate-protos: docs/PROTOCOL.md's generated namespace tables or message listings are out of date:" >&2
    head -40 "$work/diff" >&2
  fi
  if [ $status -ne 0 ]; then
    echo "generate-protos: generated code is out of date; run scripts/generate-protos.sh and commit the result" >&2
    exit 1
  fi
  echo "generate-protos: every generated file is current" >&2
fi
