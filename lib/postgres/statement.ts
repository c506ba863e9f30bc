/**
 * A statement the pool prepares once per connection under `name`: PostgreSQL
 * plans it for its first calls and then keeps a generic plan, where an
 * unnamed statement is planned on every call (the outbox's claim took about
 * as long to plan as to run). A name stands for one text on every connection
 * it is prepared on: names are made from the adapter's table (its prefix)
 * and the statement's part.
 */
export interface Statement {
  name: string;
  text: string;
}
