import type pg from 'pg';

/** Runs DDL in one transaction under an advisory lock: instances take turns, a failure leaves nothing half made. */
export async function migrateUnderLock(pool: pg.Pool, lock: string, ddl: string): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [lock]);
    await client.query(ddl);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** PostgreSQL's SQLSTATE for a schema that does not exist (invalid_schema_name). */
export const INVALID_SCHEMA_NAME = '3F000';
