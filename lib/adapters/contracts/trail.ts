/** The trail's optional domain: the exchange's audit row written in the exchange's own commit. */

/** A store whose connection may be a trail's: the PostgreSQL adapter on the audit log's pool. */
export interface SharedDatabase {
  /** Whether the store's connection is `database` (a trail's pool), so that a commit may carry a journal. */
  sharesDatabase(database: object): boolean;
}

/** The trail's part of a commit (`CommitWrite`), by a store that said it shares the trail's database. */
export interface JournalCommit {
  /** The trail's rows appended in the same transaction (its SQL function and argument), only when the entry is consumed. */
  journal?: { appendFunction: string; rows: string } | undefined;
}
