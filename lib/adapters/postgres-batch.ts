import { sendIsolatingDataErrors } from '../postgres/data-errors.js';

/**
 * Operations of one kind asked for in the same turn of the event loop, sent
 * to PostgreSQL as one statement. Under load the requests a provider serves
 * at once ask for the same kinds of reads and writes; one statement for all
 * of them costs PostgreSQL one parse, one plan, one commit and one round
 * trip instead of one each, and the provider one query instead of many.
 *
 * A batch goes out when the event loop has run every callback that was
 * ready (a `setImmediate`), or at once when it is full. Each caller gets its
 * own result. When PostgreSQL refuses a value one caller brought (a data
 * error), the batch is sent again in halves, one after the other, so that
 * only that caller fails; when the statement fails otherwise (an outage),
 * every caller in it gets the failure.
 */
export class StatementBatch<Item, Result> {
  readonly #send: (items: Item[]) => Promise<Result[]>;
  readonly #max: number;
  #pending: Array<{ item: Item; resolve: (result: Result) => void; reject: (error: unknown) => void }> = [];
  #scheduled = false;

  constructor(send: (items: Item[]) => Promise<Result[]>, max: number) {
    this.#send = send;
    this.#max = max;
  }

  add(item: Item): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.#pending.push({ item, resolve, reject });
      if (this.#pending.length >= this.#max) {
        this.#flush();
      } else if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => {
          this.#scheduled = false;
          this.#flush();
        });
      }
    });
  }

  #flush(): void {
    const batch = this.#pending;
    if (!batch.length) return;
    this.#pending = [];
    // Every caller is settled by sendIsolatingDataErrors, which itself never rejects.
    void sendIsolatingDataErrors(batch, async (entries) => this.#send(entries.map((entry) => entry.item)));
  }
}

/**
 * The items with one key kept once, the last asked for winning (as if they had
 * been sent one after another), ordered by key, so that every statement locks
 * rows in the same order and two batches never wait for each other in a cycle.
 */
export function lastByKey<Item>(items: Item[], keyOf: (item: Item) => string): Item[] {
  const last = new Map<string, Item>();
  for (const item of items) last.set(keyOf(item), item);
  return [...last.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map((key) => last.get(key)!);
}
