package hookbox

// MaxIDLength is the longest delivery id or event type, in bytes, that
// hookbox accepts. The receiver refuses a longer one with 400 before it
// reaches a store, and stores may rely on the bound: a 6 KB id would
// otherwise break a PostgreSQL batch for every delivery sharing it.
const MaxIDLength = 400

// MaxOrderKeyLength is the longest order key (Route.OrderKey), in bytes,
// that a store takes: CheckStorable refuses a longer one, so that every
// store refuses the same keys (PostgreSQL would refuse one past its index
// entry's limit, SQLite none). Routing gives a value past it, or one that
// is not StorableText, a hashed key in its place.
const MaxOrderKeyLength = 128

// MaxNameLength is the longest source name (Delivery.Source) or target
// name (Route.Target), in bytes, that a store takes: CheckStorable refuses
// a longer one, so that every store refuses the same names. A target's
// deliveries are queued under "source/target" (QueueName), which with a
// delivery id of MaxIDLength and an order key of MaxOrderKeyLength stays
// well inside PostgreSQL's limit on an index entry (about 2.7 KB), past
// which it refused a name that SQLite stored. Configured names are far
// shorter.
const MaxNameLength = 400
