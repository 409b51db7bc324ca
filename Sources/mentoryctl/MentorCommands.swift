import ArgumentParser
import MentoryClient
import MentoryDomain
import MentoryWire

struct MentorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mentor",
        abstract: "Read and set the day's mentor message.",
        subcommands: [Get.self, Set.self, CompleteTodo.self]
    )

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "get", abstract: "Show the current mentor message.")
        @ParentCommand var mentoryctl: Mentoryctl
        var options: ClientOptions { self.mentoryctl.options }

        func run() throws {
            try Self.run(self.options)
        }

        /// The command, with its options however they were parsed (see ``FastPath``).
        static func run(_ options: some ClientSettings) throws {
            try options.withConnection { client in
                printMentor(try client.mentorGet(), json: options.json)
            }
        }
    }

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set", abstract: "Replace the mentor message.")
        @ParentCommand var mentoryctl: Mentoryctl
        var options: ClientOptions { self.mentoryctl.options }

        @Option(help: "The message text.")
        var content: String

        @Option(help: "The mentor's character: cool or warm.")
        var character: CharacterArgument

        @Option(name: .customLong("todo"), help: "An action item; repeat for several.")
        var todos: [String] = []

        func run() throws {
            try self.options.withConnection { client in
                var request = Mentory_V1_MentorSetRequest()
                request.content = self.content
                request.character = self.character.wire
                request.actionItems = self.todos.map { text in
                    var item = Mentory_V1_ActionItem()
                    item.text = text
                    return item
                }
                printMentor(try client.mentorSet(request), json: self.options.json)
            }
        }
    }

    struct CompleteTodo: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "complete-todo",
            abstract: "Mark one of the mentor's action items done."
        )
        @ParentCommand var mentoryctl: Mentoryctl
        var options: ClientOptions { self.mentoryctl.options }

        @Argument(help: "The action item's id (see 'mentor get').")
        var id: String

        func run() throws {
            try self.options.withConnection { client in
                printMentor(try client.mentorCompleteTodo(id: self.id), json: self.options.json)
            }
        }
    }
}

private func printMentor(_ state: Mentory_V1_MentorState, json: Bool) {
    if json {
        Output.printJSON(state)
    } else {
        print(Formatting.mentor(state))
    }
}
