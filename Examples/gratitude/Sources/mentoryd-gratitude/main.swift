import GratitudeHandler
import MentoryDaemonKit

// mentoryd with every built-in handler, plus `gratitude`.
await MentoryDaemon.main(adding: [GratitudeHandler()])
