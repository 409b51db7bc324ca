#ifndef MENTORY_CSYSTEMD_SHIM_H
#define MENTORY_CSYSTEMD_SHIM_H

// libsystemd's daemon and journal APIs, as MentorySystemd uses them.
//
// MentorySystemd sends CODE_FILE, CODE_LINE and CODE_FUNC itself (the Swift call site, not this
// header's), so the location-adding macros of sd-journal.h are switched off.
#define SD_JOURNAL_SUPPRESS_LOCATION 1

#include <sys/types.h>
#include <sys/uio.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

#endif
