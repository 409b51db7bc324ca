/// mentoryd's version, declared here once: `mentoryd --version`, `mentoryctl --version` and
/// `session.status`'s `serverVersion` report it. The Python client's `__version__` and
/// `debian/changelog`'s newest entry must say the same; `scripts/check-version.sh` fails when they drift.
package enum MentoryVersion {
    /// The version, e.g. `0.1.0`.
    package static let current = "0.1.0"
}
