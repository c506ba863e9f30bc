/**
 * The trail's domain: what a store offers so that the audit trail's row of an
 * exchange is written in the exchange's own commit. Optional: a store without
 * it commits the exchange, and the trail appends its row apart, before it.
 */

/** A store whose connection may be a trail's: the PostgreSQL adapter on the audit log's pool. */
export interface SharedDatabase {
  /** Whether the store's connection is `database` (a trail's pool), so that a commit may carry a journal. */
  sharesDatabase(database: object): boolean;
}

/** The trail's part of a commit (`CommitWrite`), by a store that said it shares the trail's database. */
export interface JournalCommit {
  /**
   * A trail's rows to append in the same transaction: the SQL function that
   * appends them and its argument. Only when the entry is consumed.
   */
  journal?: { appendFunction: string; rows: string } | undefined;
}
