import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import {
  appendHeadsToFile,
  createPostgresAuditLog,
  readLastHead,
  type SignedHead,
} from '../../lib/audit-postgres/index.js';
import { canonicalContent, GENESIS, rowFromContent, rowHash, type AuditRow } from '../../lib/audit/chain.js';
import { signHead } from '../../lib/audit/head.js';
import { checkpointText, signerOf } from '../../lib/audit/signing.js';
import { EVENTS } from '../../lib/index.js';
import { runCli } from '../support/cli.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { API, startProvider } from '../support/provider.js';
import { exchange, subjectToken } from '../support/http.js';
import { eventFields } from '../support/trail-rows.js';

const KEY = 'audit-head-key-3f9c1e7a-58d2b4e06c1f';
const TABLE = 'impersonation_audit';

/**
 * The attacker of these tests has write access to the database and nothing
 * else: not the key, not the file the heads are published to.
 */
class DatabaseInsider {
  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
  ) {}

  private get table() {
    return `"${this.schema}"."${TABLE}"`;
  }

  /** Rewrites rows `from`..`to` through `change`, re-hashing each from the row before `from`, and returns the last hash. */
  async rewrite(from: number, to: number, change: (row: AuditRow, seq: number) => AuditRow): Promise<string> {
    const { rows } = await this.pool.query<{ seq: string; content: string; hash: string }>(
      `SELECT seq, content, hash FROM ${this.table} WHERE seq BETWEEN $1 AND $2 ORDER BY seq`,
      [from - 1, to],
    );
    let previous = from === 1 ? GENESIS : rows.shift()!.hash;
    for (const row of rows) {
      const seq = Number(row.seq);
      const changed = change(rowFromContent(row.content), seq);
      const content = canonicalContent(changed);
      const hash = rowHash(previous, seq, content);
      await this.pool.query(
        `UPDATE ${this.table} SET actor = $1, subject = $2, content = $3, prev_hash = $4, hash = $5 WHERE seq = $6`,
        [changed.actor, changed.subject, content, previous, hash, seq],
      );
      previous = hash;
    }
    return previous;
  }

  async deleteRowsAfter(seq: number): Promise<void> {
    await this.pool.query(`DELETE FROM ${this.table} WHERE seq > $1`, [seq]);
  }

  async deleteCheckpoints(where = 'true', values: unknown[] = []): Promise<void> {
    await this.pool.query(`DELETE FROM "${this.schema}"."${TABLE}_checkpoints" WHERE ${where}`, values);
  }

  async moveHead(seq: number, hash: string): Promise<void> {
    await this.pool.query(`UPDATE "${this.schema}"."${TABLE}_head" SET seq = $1, hash = $2`, [seq, hash]);
  }
}

describe('PostgreSQL audit log: signed heads published outside the database pin its length and its end', function () {
  this.timeout(30_000);
  const directory = mkdtempSync(join(tmpdir(), 'impersonation-heads-'));
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
  const key = { hmac: KEY };
  after(async () => {
    await pool.end();
    rmSync(directory, { recursive: true, force: true });
  });

  /** A signed log with `checkpointEvery: 10`, its heads appended to a file, and `rows` rows. */
  async function signedLog(rows: number) {
    const schema = await testSchema();
    const headFile = join(directory, `${schema}.jsonl`);
    const log = createPostgresAuditLog({
      pool,
      schema,
      signingKey: key,
      checkpointEvery: 10,
      publishHead: appendHeadsToFile(headFile),
    });
    for (let i = 1; i <= rows; i += 1)
      await log.append(
        EVENTS.exchangeSucceeded,
        eventFields({ subject: `customer-${i}`, actor: 'alice', sessionId: `imp_${i}` }),
      );
    return { schema, headFile, log, insider: new DatabaseInsider(pool, schema) };
  }

  const cliVerify = (schema: string, ...extra: string[]) =>
    runCli(
      [
        'audit',
        'verify',
        '--database-url',
        DATABASE_URL,
        '--schema',
        schema,
        '--key',
        'hmac-env:AUDIT_KEY',
        '--require-checkpoints',
        '10',
        ...extra,
      ],
      { AUDIT_KEY: KEY },
    );

  it('publishes a signed head at each checkpoint, on disk before the append that made it resolves', async () => {
    const { headFile, log } = await signedLog(30);
    const heads = readFileSync(headFile, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as SignedHead);
    expect(heads.map((head) => head.seq)).to.deep.equal([10, 20, 30]);
    expect(heads[2]).to.include({ alg: 'hmac-sha256' });
    expect(heads[2]!.hash).to.match(/^[0-9a-f]{64}$/);
    const head = await readLastHead(headFile);
    expect(await log.verify({ key, head, requireCheckpoints: true })).to.deep.equal({
      ok: true,
      count: 30,
      checkpoints: 3,
    });
  });

  it("the review's attack (row 23's actor changed, rows 21–25 re-hashed, rows 26–35 and checkpoint 30 deleted, the head moved) fails against the published head, in verify() and in the command", async () => {
    const { schema, headFile, log, insider } = await signedLog(35);
    const lastHash = await insider.rewrite(21, 25, (row, seq) => (seq === 23 ? { ...row, actor: 'mallory' } : row));
    await insider.deleteRowsAfter(25);
    await insider.deleteCheckpoints('seq = 30');
    await insider.moveHead(25, lastHash);

    // What the database alone can show: a consistent chain of 25 rows with its two checkpoints.
    expect(await log.verify({ key, requireCheckpoints: true })).to.deep.equal({ ok: true, count: 25, checkpoints: 2 });

    const head = await readLastHead(headFile);
    expect(head.seq).to.equal(30);
    const result = await log.verify({ key, head, requireCheckpoints: true });
    // Rows 21 to 25 chain, but only checkpoint 20 still pins anything: they are not counted as verified.
    expect(result, JSON.stringify(result)).to.include({ ok: false, count: 20, seq: 26, check: 'published-head' });
    expect((result as { problem: string }).problem).to.match(/published head at row 30/);

    const command = await cliVerify(schema, '--head', headFile);
    expect(command.code, command.stderr).to.equal(1);
    expect(command.stdout).to.equal(
      'bad row 26: the chain ends before its published head at row 30 (rows were removed from the end) ' +
        '(rows 1 to 20 verified; rows 21 to 25 are chained but pinned by no signature that verifies)\n',
    );
    const inline = await cliVerify(schema, '--head', JSON.stringify(head));
    expect(inline.code).to.equal(1);
  });

  it('the whole chain rewritten and every checkpoint deleted fails, with the published head and without it', async () => {
    const { schema, headFile, log, insider } = await signedLog(35);
    const lastHash = await insider.rewrite(1, 35, (row) => ({ ...row, actor: 'mallory' }));
    await insider.deleteCheckpoints();
    await insider.moveHead(35, lastHash);

    expect((await log.verify()).ok, 'without a key, the rewrite is consistent').to.equal(true);
    const unsigned = await log.verify({ key });
    expect(unsigned, JSON.stringify(unsigned)).to.include({ ok: false, seq: 10 });
    expect((unsigned as { problem: string }).problem).to.match(/no signed checkpoint/);
    // The published head proves the rewrite: that is reported, before the checkpoints that are missing.
    const head = await readLastHead(headFile);
    expect(await log.verify({ key, head })).to.include({ ok: false, count: 0, seq: 30, check: 'published-head' });

    const command = await cliVerify(schema, '--head', headFile);
    expect(command.code).to.equal(1);
    expect(command.stdout).to.match(/^bad row 30: the chain was rewritten up to here/);
    const withoutHead = await cliVerify(schema);
    expect(withoutHead.code).to.equal(1);
    expect(withoutHead.stdout).to.match(/^bad row 10: no signed checkpoint/);
    expect(withoutHead.stderr).to.match(/without --head, rows removed from the end/);
  });

  it('a chain rewritten and cut below the first checkpoint passes without a head (the database alone cannot tell), and fails with it', async () => {
    const { schema, headFile, log, insider } = await signedLog(12);
    const lastHash = await insider.rewrite(1, 9, (row) => ({ ...row, subject: 'nobody' }));
    await insider.deleteRowsAfter(9);
    await insider.deleteCheckpoints();
    await insider.moveHead(9, lastHash);
    expect(await log.verify({ key, requireCheckpoints: true })).to.deep.equal({ ok: true, count: 9, checkpoints: 0 });
    expect(await log.verify({ key, head: await readLastHead(headFile) })).to.include({ ok: false, seq: 10 });
    expect((await cliVerify(schema, '--head', headFile)).code).to.equal(1);
  });

  it('an operator with the key but not the head file: a rewrite below the published head is detected, even with the checkpoints re-signed', async () => {
    const { schema, headFile, log, insider } = await signedLog(35);
    const lastHash = await insider.rewrite(21, 35, (row) => ({ ...row, actor: 'mallory' }));
    await insider.moveHead(35, lastHash);
    const { rows } = await pool.query<{ hash: string }>(`SELECT hash FROM "${schema}"."${TABLE}" WHERE seq = 30`);
    const signer = signerOf(key, 'createPostgresAuditLog');
    await pool.query(`UPDATE "${schema}"."${TABLE}_checkpoints" SET hash = $1, signature = $2 WHERE seq = 30`, [
      rows[0]!.hash,
      signer.sign(checkpointText(30, rows[0]!.hash)),
    ]);
    expect(await log.verify({ key, requireCheckpoints: true })).to.deep.equal({ ok: true, count: 35, checkpoints: 3 });
    expect(await log.verify({ key, head: await readLastHead(headFile) })).to.include({ ok: false, seq: 30 });

    // With the head file as well, the operator publishes a head of the rewritten chain: nothing can tell.
    appendFileSync(headFile, `${JSON.stringify(signHead(signer, 30, rows[0]!.hash))}\n`);
    expect(await log.verify({ key, head: await readLastHead(headFile) })).to.include({ ok: true, count: 35 });
  });

  it('an insider who can also cut the head file makes an older head the newest: detection reaches back only to it', async () => {
    const { headFile, log, insider } = await signedLog(35);
    const lastHash = await insider.rewrite(21, 25, (row) => row);
    await insider.deleteRowsAfter(25);
    await insider.deleteCheckpoints('seq = 30');
    await insider.moveHead(25, lastHash);
    const lines = readFileSync(headFile, 'utf8').trim().split('\n');
    writeFileSync(headFile, `${lines.slice(0, -1).join('\n')}\n`);
    expect(await log.verify({ key, head: await readLastHead(headFile) })).to.include({ ok: true, count: 25 });
    // A head the verifier kept from its previous run still catches it.
    expect(await log.verify({ key, head: JSON.parse(lines.at(-1)!) as SignedHead })).to.include({ ok: false });
  });

  it('a head that was altered, or signed with another key, does not verify', async () => {
    const { headFile, log } = await signedLog(10);
    const head = await readLastHead(headFile);
    expect(await log.verify({ key, head: { ...head, seq: 5 } })).to.include({ ok: false, seq: 5 });
    expect(await log.verify({ key, head: { ...head, at: new Date(0).toISOString() } })).to.include({
      ok: false,
      seq: 10,
    });
    expect(await log.verify({ key: { hmac: 'another-key' }, head })).to.include({ ok: false, seq: 10 });
    expect(await log.verify({ key, head })).to.include({ ok: true, count: 10 });
  });

  it('with a key, a chain of checkpointEvery rows or more without any checkpoint fails; a shorter one, or an empty one, passes', async () => {
    const schema = await testSchema();
    const unsigned = createPostgresAuditLog({ pool, schema, checkpointEvery: 10 });
    await unsigned.migrate();
    expect(await unsigned.verify({ key })).to.deep.equal({ ok: true, count: 0, checkpoints: 0 });
    for (let i = 1; i <= 9; i += 1)
      await unsigned.append(EVENTS.subjectTokenCreated, eventFields({ subject: `customer-${i}` }));
    expect(await unsigned.verify({ key })).to.deep.equal({ ok: true, count: 9, checkpoints: 0 });
    await unsigned.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'customer-10' }));
    expect(await unsigned.verify({ key })).to.include({ ok: false, count: 0, seq: 10, check: 'checkpoint-missing' });
    expect(await unsigned.verify()).to.deep.equal({ ok: true, count: 10, checkpoints: 0 });
  });

  it('a publication that fails fails the append (no token without its pinned record); the next batch publishes it, then its own', async () => {
    const schema = await testSchema();
    const published: SignedHead[] = [];
    let refuse = true;
    const log = createPostgresAuditLog({
      pool,
      schema,
      signingKey: key,
      checkpointEvery: 2,
      publishHead: async (head) => {
        if (refuse) throw new Error('the head store is unreachable');
        published.push(head);
      },
    });
    const tp = await startProvider({ plugin: { auditLog: log } });
    try {
      // Row 1 is the creation, row 2 the exchange's success: its checkpoint cannot be published.
      const subject = await subjectToken(tp);
      const refused = await exchange(tp, { subject_token: subject, resource: API });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(500);
      expect(refused.body).to.not.have.property('access_token');
      expect(published).to.deep.equal([]);

      // Committed before its row's append failed: the session ended, the refusal (row 3), the subject token given back.
      refuse = false;
      const redeemed = await exchange(tp, { subject_token: subject, resource: API });
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
      expect(published.map((head) => head.seq)).to.deep.equal([2, 4]);
      expect(await log.verify({ key, head: published, requireCheckpoints: true })).to.deep.equal({
        ok: true,
        count: 4,
        checkpoints: 2,
      });
    } finally {
      await tp.close();
    }
  });

  it('a checkpoint the database refuses after its rows committed is signed with the next batch, from the hash this process computed', async () => {
    const schema = await testSchema();
    const log = createPostgresAuditLog({ pool, schema, signingKey: key, checkpointEvery: 2 });
    await log.migrate();
    // The first checkpoint INSERT fails (a sequence, so the refusal outlives its rolled-back statement); later ones pass.
    await pool.query(`
      CREATE SEQUENCE "${schema}".refusals;
      CREATE FUNCTION "${schema}".refuse_once() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval('"${schema}".refusals') = 1 THEN RAISE EXCEPTION 'checkpoint refused'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_once BEFORE INSERT ON "${schema}"."${TABLE}_checkpoints"
        FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse_once();
    `);
    await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'customer-1' }));
    const failed = await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'customer-2' })).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failed, 'the append whose checkpoint failed').to.be.instanceOf(Error);
    expect(await log.verify({ key, requireCheckpoints: true })).to.include({ ok: false });

    await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'customer-3' }));
    expect(await log.verify({ key, requireCheckpoints: true })).to.deep.equal({ ok: true, count: 3, checkpoints: 1 });
    await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'customer-4' }));
    expect(await log.verify({ key, requireCheckpoints: true })).to.deep.equal({ ok: true, count: 4, checkpoints: 2 });
  });

  it('a publication that fails with an error that reads as a data error never writes the rows again', async () => {
    const schema = await testSchema();
    const log = createPostgresAuditLog({
      pool,
      schema,
      signingKey: key,
      checkpointEvery: 1,
      publishHead: () => Promise.reject(Object.assign(new Error('refused'), { code: '22P05' })),
    });
    await log.migrate();
    const appends = await Promise.allSettled(
      Array.from({ length: 4 }, (_, index) =>
        log.append(EVENTS.subjectTokenCreated, eventFields({ subject: `customer-${index}` })),
      ),
    );
    expect(appends.map((outcome) => outcome.status)).to.deep.equal(Array(4).fill('rejected'));
    const { rows } = await pool.query(`SELECT count(*)::int AS count FROM "${schema}"."impersonation_audit"`);
    expect(rows[0].count).to.equal(4);
    expect((await log.verify()).ok).to.equal(true);
  });

  it('in best effort (failClosed: false), a publication that fails is counted and reported', async () => {
    const failures: unknown[] = [];
    const log = createPostgresAuditLog({
      pool,
      schema: await testSchema(),
      signingKey: key,
      checkpointEvery: 1,
      failClosed: false,
      onFailure: (error) => failures.push(error),
      publishHead: () => Promise.reject(new Error('the head store is unreachable')),
    });
    await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'customer' }));
    expect(log.failures).to.equal(1);
    expect(failures).to.have.length(1);
  });

  it('checks its options: publishHead needs a signing key, a head needs the key to verify it', async () => {
    const publishHead = appendHeadsToFile(join(directory, 'unused.jsonl'));
    expect(() => createPostgresAuditLog({ pool, publishHead })).to.throw(TypeError, /publishHead/);
    const { headFile, log } = await signedLog(10);
    let caught: unknown;
    try {
      await log.verify({ head: await readLastHead(headFile) });
    } catch (error) {
      caught = error;
    }
    expect(caught).to.be.instanceOf(TypeError);
  });

  it('refuses an HMAC signing secret shorter than 32 bytes, never repeating it; a 32-byte one signs', () => {
    const short = 'guessable-secret-1234567890abcd'; // 31 bytes
    let caught: unknown;
    try {
      createPostgresAuditLog({ pool, signingKey: { hmac: short } });
    } catch (error) {
      caught = error;
    }
    expect(caught).to.be.instanceOf(TypeError);
    expect((caught as Error).message).to.match(/"signingKey\.hmac" must be a secret of at least 32 bytes/);
    expect((caught as Error).message).to.not.include(short);
    expect(() => createPostgresAuditLog({ pool, signingKey: { hmac: Buffer.alloc(31, 7) } })).to.throw(TypeError);
    expect(() => createPostgresAuditLog({ pool, signingKey: { hmac: `${short}x` } })).to.not.throw();
  });

  it('appendHeadsToFile keeps whole lines in the order of publication when heads come together', async () => {
    const file = join(directory, 'together.jsonl');
    const publish = appendHeadsToFile(file);
    const heads = Array.from({ length: 50 }, (_, i) => ({
      seq: i + 1,
      hash: 'a'.repeat(64),
      at: new Date().toISOString(),
      alg: 'hmac-sha256' as const,
      signature: 'x'.repeat(43),
    }));
    await Promise.all(heads.map((head) => publish(head)));
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(lines.map((line) => (JSON.parse(line) as SignedHead).seq)).to.deep.equal(heads.map((head) => head.seq));
    expect((await readLastHead(file)).seq).to.equal(50);
  });
});
