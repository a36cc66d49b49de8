package hookbox

// MaxIDLength is the longest delivery id or event type hookbox stores, in bytes.
const MaxIDLength = 400
