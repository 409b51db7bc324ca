import MentoryDaemonKit

await MentoryDaemon.main()
