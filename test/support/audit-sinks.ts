import pg from 'pg';
import { createPostgresAuditLog } from '../../lib/audit-postgres/index.js';
import type { AuditLog } from '../../lib/audit/sink.js';
import { createMemoryAuditLog, EVENTS } from '../../lib/index.js';
import { DATABASE_URL, testSchema } from './postgres.js';
import { TcpRelay } from './relay.js';
import { eventFields } from './trail-rows.js';

/** A new, empty audit log, and how a test looks into the store under it. */
export interface AuditLogUnderTest {
  log: AuditLog;
  /** Sets row `seq`'s subject as someone with access to the store would; resolves with how to put it back. */
  forgeSubject(seq: number, subject: string): Promise<() => Promise<void>>;
  /** Ends what the log opened. */
  close(): Promise<void>;
}

/** An audit log the package ships, as the shared sink contract sees it. */
export interface AuditLogKind {
  /** As test titles name it. */
  name: string;
  /** A new log with a store of its own. */
  underTest(): Promise<AuditLogUnderTest>;
  /** A new log that works until `fail()`, and then can append no more (it is full, its database is gone). */
  failing(): Promise<{ log: AuditLog; fail(): Promise<void>; close(): Promise<void> }>;
}

/** The audit logs the package ships: the sink contract runs on each (test/audit/audit-sink-contract.test.ts). */
export const AUDIT_LOGS: readonly AuditLogKind[] = [
  {
    name: 'in-memory',
    underTest: async () => {
      const log = createMemoryAuditLog();
      return {
        log,
        forgeSubject: async (seq, subject) => {
          const row = log.rows[seq - 1]!;
          const original = row.subject;
          row.subject = subject;
          return async () => {
            row.subject = original;
          };
        },
        close: async () => {},
      };
    },
    failing: async () => {
      const log = createMemoryAuditLog({ maxRows: 2 });
      return {
        log,
        fail: async () => {
          while ((await log.verify()).count < 2)
            await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'filler' }));
        },
        close: async () => {},
      };
    },
  },
  {
    name: 'PostgreSQL',
    underTest: async () => {
      const schema = await testSchema();
      const log = createPostgresAuditLog({ connectionString: DATABASE_URL, schema });
      const table = `"${schema}"."impersonation_audit"`;
      const insider = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
      return {
        log,
        forgeSubject: async (seq, subject) => {
          const {
            rows: [row],
          } = await insider.query<{ subject: string | null }>(`SELECT subject FROM ${table} WHERE seq = $1`, [seq]);
          await insider.query(`UPDATE ${table} SET subject = $1 WHERE seq = $2`, [subject, seq]);
          return async () => {
            await insider.query(`UPDATE ${table} SET subject = $1 WHERE seq = $2`, [row!.subject, seq]);
          };
        },
        close: async () => {
          await log.close();
          await insider.end();
        },
      };
    },
    failing: async () => {
      const relay = new TcpRelay(DATABASE_URL, 5432);
      await relay.start();
      const log = createPostgresAuditLog({ connectionString: relay.url, schema: await testSchema() });
      await log.migrate();
      return {
        log,
        fail: () => relay.stop(),
        close: async () => {
          await relay.stop();
          await log.close();
        },
      };
    },
  },
];
