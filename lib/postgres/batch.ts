import { sendIsolatingDataErrors } from './data-errors.js';

interface StatementBatchOptions {
  /** Most items one statement carries; a full batch goes out at once. */
  max: number;
  /**
   * Group commit: one statement in flight at a time. The first item goes out
   * at once; what arrives while a statement is in flight goes together in the
   * next one, in the order it arrived. Without it, a batch goes out at the end
   * of each turn of the event loop, whatever is in flight.
   */
  oneInFlight?: boolean;
}

interface Waiting<Item, Result> {
  item: Item;
  resolve(result: Result): void;
  reject(error: unknown): void;
}

/**
 * Items asked for together, sent to PostgreSQL as one statement. Under load
 * the requests a provider serves at once ask for the same kinds of reads and
 * writes; one statement for all of them costs PostgreSQL one parse, one plan,
 * one commit and one round trip instead of one each, and the provider one
 * query instead of many.
 *
 * Each caller gets its own result. When PostgreSQL refuses a value one caller
 * brought (a data error), the batch is sent again in halves, one after the
 * other, so that only that caller fails; when the statement fails otherwise
 * (an outage), every caller in it gets the failure.
 */
export class StatementBatch<Item, Result> {
  readonly #send: (items: Item[]) => Promise<Result[]>;
  readonly #max: number;
  readonly #oneInFlight: boolean;
  #pending: Array<Waiting<Item, Result>> = [];
  #scheduled = false;
  #inFlight = false;

  constructor(send: (items: Item[]) => Promise<Result[]>, options: StatementBatchOptions) {
    this.#send = send;
    this.#max = options.max;
    this.#oneInFlight = options.oneInFlight ?? false;
  }

  add(item: Item): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.#pending.push({ item, resolve, reject });
      if (this.#oneInFlight) {
        this.#sendNextInTurn();
      } else if (this.#pending.length >= this.#max) {
        this.#sendAll();
      } else if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => {
          this.#scheduled = false;
          this.#sendAll();
        });
      }
    });
  }

  #sendAll(): void {
    while (this.#pending.length) void this.#sendFirst();
  }

  #sendNextInTurn(): void {
    if (this.#inFlight || !this.#pending.length) return;
    this.#inFlight = true;
    void this.#sendFirst().finally(() => {
      this.#inFlight = false;
      this.#sendNextInTurn();
    });
  }

  /** Every caller is settled by sendIsolatingDataErrors, which itself never rejects. */
  #sendFirst(): Promise<void> {
    const batch = this.#pending.splice(0, this.#max);
    return sendIsolatingDataErrors(batch, async (waiting) => this.#send(waiting.map(({ item }) => item)));
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
