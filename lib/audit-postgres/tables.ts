/** The trail's tables as readers see them: names, presence, and a READ ONLY transaction that can create nothing. */
import type pg from 'pg';

export type Names = ReturnType<typeof namesOf>;

/** `schema` and `table` must have passed assertPlainIdentifiers: they go into SQL as they are, quoted. */
export function namesOf(schema: string | undefined, table: string) {
  const qualify = (name: string) => (schema ? `"${schema}"."${name}"` : `"${name}"`);
  return {
    schema,
    tableName: table,
    table: qualify(table),
    head: qualify(`${table}_head`),
    checkpoints: qualify(`${table}_checkpoints`),
    append: qualify(`${table}_append`),
    subjectIndex: `"${table}_subject"`,
    actorIndex: `"${table}_actor"`,
    lock: `${schema ?? ''}.${table}`,
  };
}

/** The column of a row's field: `clientId` is `client_id`. */
export function columnOf(field: string): string {
  return field.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** What is missing of the trail's tables, in words (naming where it looked); undefined when all are there. */
export async function missingTables(
  client: pg.ClientBase,
  names: Names,
  which: 'all' | 'trail',
): Promise<string | undefined> {
  const {
    rows: [found],
  } = await client.query<{ trail: string | null; head: string | null; checkpoints: string | null; path: string[] }>(
    'SELECT to_regclass($1::text) AS trail, to_regclass($2::text) AS head, to_regclass($3::text) AS checkpoints, current_schemas(false)::text[] AS path',
    [names.table, names.head, names.checkpoints],
  );
  const table = JSON.stringify(names.tableName);
  if (!found!.trail) {
    const where = names.schema
      ? `schema ${JSON.stringify(names.schema)}`
      : `the connection's search path (${found!.path.map((schema) => JSON.stringify(schema)).join(', ') || 'empty'})`;
    return `no audit table ${table} in ${where}`;
  }
  if (which === 'trail') return undefined;
  const beside = [
    ...(found!.head ? [] : [`${names.tableName}_head`]),
    ...(found!.checkpoints ? [] : [`${names.tableName}_checkpoints`]),
  ];
  if (!beside.length) return undefined;
  return `the audit table ${table} has no ${beside.map((name) => JSON.stringify(name)).join(' nor ')} table beside it: one was dropped, or it is not a trail this package wrote`;
}

/** The transaction every read of the trail runs in: PostgreSQL itself refuses any write, and every statement sees one instant. */
export const READ_ONLY = 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY';

/** Runs `read` in a READ ONLY transaction and rolls it back; a connection that cannot roll back is discarded. */
export async function readingOnly<T>(pool: pg.Pool, read: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query(READ_ONLY);
    return await read(client);
  } finally {
    await client.query('ROLLBACK').then(
      () => client.release(),
      (error: Error) => client.release(error),
    );
  }
}
