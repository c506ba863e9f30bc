import pg from 'pg';
import { canonicalJson } from '../json.js';
import { assertPlainIdentifiers } from '../postgres/identifier.js';
import { missingAuditTable } from '../errors/standalone.js';
import { FIELDS } from '../audit/chain.js';
import type { PostgresAuditLogOptions } from './index.js';
import { columnOf, missingTables, namesOf, READ_ONLY } from './tables.js';

export interface ExportOptions extends Pick<PostgresAuditLogOptions, 'schema' | 'table'> {
  since?: Date | undefined;
  until?: Date | undefined;
  format: 'jsonl' | 'csv';
}

/** The trail's columns in order: the row's number, its fields, and its links. */
const COLUMNS = ['seq', ...FIELDS.map(columnOf), 'prev_hash', 'hash'];
const BATCH = 1000;

/** The trail in order as JSON lines or CSV, hashes included; reads only, in one READ ONLY transaction. */
export async function* exportTrail(connectionString: string, options: ExportOptions): AsyncGenerator<string> {
  const table = options.table ?? 'impersonation_audit';
  assertPlainIdentifiers('exportTrail', { table, schema: options.schema });
  const names = namesOf(options.schema, table);
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query(READ_ONLY);
    const missing = await missingTables(client, names, 'trail');
    if (missing) throw missingAuditTable(missing);
    if (options.format === 'csv') yield `${COLUMNS.join(',')}\n`;
    let after = 0;
    for (;;) {
      const { rows } = await client.query<Record<string, unknown>>(
        `SELECT ${COLUMNS.join(', ')} FROM ${names.table} WHERE seq > $1 AND at >= coalesce($2, '-infinity'::timestamptz) ` +
          `AND at < coalesce($3, 'infinity'::timestamptz) ORDER BY seq LIMIT ${BATCH}`,
        [after, options.since ?? null, options.until ?? null],
      );
      for (const row of rows) {
        const record: Record<string, unknown> = {
          ...row,
          seq: Number(row['seq']),
          at: (row['at'] as Date).toISOString(),
        };
        yield options.format === 'jsonl'
          ? `${JSON.stringify(record)}\n`
          : `${COLUMNS.map((name) => csvField(record[name])).join(',')}\n`;
      }
      if (rows.length < BATCH) return;
      after = Number(rows.at(-1)!['seq']);
    }
  } finally {
    // Ending the connection ends its transaction: nothing was written to commit.
    await client.end();
  }
}

function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'object' ? canonicalJson(value) : String(value);
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}
