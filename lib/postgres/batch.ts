import { sendIsolatingDataErrors } from './data-errors.js';

interface StatementBatchOptions {
  /** Most items one statement carries; a full batch goes out at once. */
  max: number;
  /** Group commit: one statement in flight; what arrives meanwhile goes in the next, in order. Without it, one per turn. */
  oneInFlight?: boolean;
}

interface Waiting<Item, Result> {
  item: Item;
  resolve(result: Result): void;
  reject(error: unknown): void;
}

/** Items asked for together, sent as one statement: one parse, plan, commit and round trip for all (Invariant 10). */
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
  #sendFirst(): Promise<unknown> {
    const batch = this.#pending.splice(0, this.#max);
    return sendIsolatingDataErrors(batch, async (waiting) => this.#send(waiting.map(({ item }) => item)));
  }
}

/** The items with one key kept once (the last wins), ordered by key (Invariant 3). */
export function lastByKey<Item>(items: Item[], keyOf: (item: Item) => string): Item[] {
  const last = new Map<string, Item>();
  for (const item of items) last.set(keyOf(item), item);
  return [...last.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map((key) => last.get(key)!);
}
