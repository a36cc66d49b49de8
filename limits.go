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
