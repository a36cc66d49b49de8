package hookbox

// MaxIDLength is the longest delivery id or event type, in bytes, that
// hookbox accepts. The receiver refuses a longer one with 400 before it
// reaches a store, and stores may rely on the bound: a 6 KB id would
// otherwise break a PostgreSQL batch for every delivery sharing it.
const MaxIDLength = 400
