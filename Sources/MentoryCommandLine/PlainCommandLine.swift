/// The plainest spelling of a command line, read without swift-argument-parser.
///
/// swift-argument-parser is the command-line parser of `mentoryd` and `mentoryctl`. Its generic parse
/// (reflection over the commands, dynamic casts that scan every protocol conformance in the binary)
/// costs more than a short `mentoryctl` command's call to the daemon, and about 1.5 ms of `mentoryd`'s
/// start-up. So both binaries first offer their command line to a `PlainCommandLine` that knows only
/// their simplest options; when it recognizes the whole line, they run with what it read, and anything
/// else (help, a repeated or unknown option, a value that looks like an option, `--`) goes to the
/// parser, which accepts it or says what is wrong. Each binary's tests check that every line read here
/// reads the same through the parser.
///
/// The form recognized: words that are either operands (words not starting with `-`) or options of
/// ``options``, each at most once, written `--flag`, `--name VALUE` or `--name=VALUE`, where `VALUE` is
/// not empty and does not start with `-`.
package struct PlainCommandLine: Sendable {
    /// An option of the plain form.
    package struct Option: Sendable, Hashable {
        /// The option's name with its dashes, for example `--socket`.
        package var name: String
        /// Whether it takes a value (`--name VALUE`) or is a flag (`--name`).
        package var takesValue: Bool

        /// An option that takes a value.
        package static func valued(_ name: String) -> Self { Self(name: name, takesValue: true) }

        /// An option that takes none.
        package static func flag(_ name: String) -> Self { Self(name: name, takesValue: false) }
    }

    /// What a recognized command line holds.
    package struct Reading: Sendable, Equatable {
        /// The operands, in order: a subcommand's name, for example.
        package var operands: [String]
        /// The value of each option given, by name; a flag's value is the empty string.
        package var values: [String: String]

        /// The value given for the option named `name`, if it was given.
        package subscript(_ name: String) -> String? { self.values[name] }

        /// Whether the flag named `name` was given.
        package func isSet(_ name: String) -> Bool { self.values[name] != nil }

        /// A reading of `operands` and the option `values` given.
        package init(operands: [String] = [], values: [String: String] = [:]) {
            self.operands = operands
            self.values = values
        }
    }

    /// The options the plain form may hold.
    package let options: [Option]

    /// A reader of command lines made of `options` and operands.
    package init(options: [Option]) {
        self.options = options
    }

    /// The operands and option values of `words` (a command line without the program's name), or `nil`
    /// when `words` is not in the plain form described on the type.
    package func read(_ words: some Collection<String>) -> Reading? {
        var reading = Reading()
        var iterator = words.makeIterator()
        while let word = iterator.next() {
            guard word.hasPrefix("-") else {
                reading.operands.append(word)
                continue
            }
            var name = Substring(word)
            var value: String?
            if let equals = word.firstIndex(of: "=") {
                name = word[..<equals]
                value = String(word[word.index(after: equals)...])
            }
            guard let option = self.options.first(where: { $0.name == name }),
                reading.values[option.name] == nil
            else { return nil }
            if option.takesValue {
                if value == nil { value = iterator.next() }
                guard let value, !value.isEmpty, !value.hasPrefix("-") else { return nil }
                reading.values[option.name] = value
            } else {
                guard value == nil else { return nil }
                reading.values[option.name] = ""
            }
        }
        return reading
    }
}
