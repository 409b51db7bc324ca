import GRDB

/// The SQLite schema of mentoryd's store and the migrations that build it.
///
/// Migrations are append-only: a released migration never changes, a new one is registered after
/// the last. ``SQLiteSessionStore`` applies every pending migration when it opens a database and
/// refuses a database written by a newer mentoryd (one with migrations this build does not know).
///
/// Reachability is deliberately not stored: it describes live connections, which a restart ends,
/// so the only correct state after a restart is "no peer is reachable", which is also the empty state.
public enum SQLiteSchema {
    /// `PRAGMA application_id` of a mentoryd database ("MNTY"), so that mentoryd recognizes
    /// its own files and refuses to take over another program's SQLite database.
    public static let applicationID: Int32 = 0x4D4E_5459

    /// `PRAGMA user_version` of a database whose last run closed it orderly after checking it
    /// ("CLN1"); any other value (0 while a daemon runs on it) means the next start-up must check
    /// the file (`PRAGMA quick_check`) before it opens. `user_version` holds nothing else: the
    /// schema's version is the migrations' table.
    public static let cleanShutdownMarker: Int32 = 0x434C_4E31

    /// The first schema: diary entries and their action items.
    public static let v1 = "v1-diary"
    /// Adds the mentor's latest message and its action items.
    public static let v2 = "v2-mentor-state"

    /// Every migration, oldest first: its identifier and what it does.
    static let migrations: [(identifier: String, migrate: @Sendable (Database) throws -> Void)] = [
        (
            v1,
            { db in
                try db.execute(sql: "PRAGMA application_id = \(applicationID)")
                try db.execute(
                    sql: """
                        CREATE TABLE diary_entry (
                            id TEXT NOT NULL PRIMARY KEY,
                            record_date TEXT NOT NULL UNIQUE,
                            created_at_unix_ms INTEGER NOT NULL,
                            title TEXT NOT NULL,
                            text TEXT NOT NULL,
                            emotion INTEGER NOT NULL,
                            analysis TEXT
                        );
                        CREATE TABLE diary_action_item (
                            entry_id TEXT NOT NULL REFERENCES diary_entry(id) ON DELETE CASCADE,
                            position INTEGER NOT NULL,
                            id TEXT NOT NULL,
                            text TEXT NOT NULL,
                            done INTEGER NOT NULL DEFAULT 0 CHECK (done IN (0, 1)),
                            PRIMARY KEY (entry_id, position)
                        ) WITHOUT ROWID;
                        """
                )
            }
        ),
        (
            v2,
            { db in
                try db.execute(
                    sql: """
                        CREATE TABLE mentor_message (
                            singleton INTEGER NOT NULL PRIMARY KEY CHECK (singleton = 1),
                            content TEXT NOT NULL,
                            character INTEGER NOT NULL,
                            updated_at_unix_ms INTEGER NOT NULL
                        );
                        CREATE TABLE mentor_action_item (
                            position INTEGER NOT NULL PRIMARY KEY,
                            id TEXT NOT NULL,
                            text TEXT NOT NULL,
                            done INTEGER NOT NULL DEFAULT 0 CHECK (done IN (0, 1))
                        );
                        """
                )
            }
        ),
    ]

    /// Every migration identifier, oldest first.
    public static let migrationIdentifiers = migrations.map(\.identifier)

    /// The migrator that brings a database to the current schema.
    public static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for migration in migrations {
            migrator.registerMigration(migration.identifier, migrate: migration.migrate)
        }
        return migrator
    }

    /// Claims a database that holds nothing yet (no table but, at most, an empty `grdb_migrations`)
    /// and brings it to the current schema, in the caller's transaction: mentoryd's `application_id`,
    /// every migration, and each one recorded as applied in `grdb_migrations` (as ``migrator``
    /// records them, so that it finds nothing left to do). One transaction, so one commit, where
    /// the migrator would commit its table and each migration apart.
    static func createSchema(in db: Database) throws {
        try db.execute(sql: "PRAGMA application_id = \(applicationID)")
        // GRDB's own definition of its table (DatabaseMigrator.runMigrations).
        try db.execute(sql: "CREATE TABLE IF NOT EXISTS grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
        for migration in migrations {
            try migration.migrate(db)
            try db.execute(
                sql: "INSERT INTO grdb_migrations (identifier) VALUES (?)", arguments: [migration.identifier])
        }
    }
}
